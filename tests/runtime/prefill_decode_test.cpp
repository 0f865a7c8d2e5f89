// Runtime equivalences on the committed random-init fixtures: prefill(N) + decode(k) ≡ prefill(N + k),
// chunked prefill ≡ one prefill, and two interleaved sessions ≡ their solo runs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "models/model.h"
#include "runtime/session.h"

namespace ember {
namespace {

const char* kCases[] = {"mm_tied", "flat_untied_gqa3", "q4_affine"};

std::string fixture(const char* name) { return std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/qwen35/" + name; }

std::vector<int32_t> tokens(int64_t n, int64_t vocab) {
    std::vector<int32_t> t;
    for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 131 + 17) % vocab));
    return t;
}

// max |a − b| / max |b| over one row
double rel_err(const float* a, const float* b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
        num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
        den = std::max(den, static_cast<double>(std::fabs(b[i])));
    }
    return num / std::max(den, 1e-30);
}

class PrefillDecode : public ::testing::TestWithParam<const char*> {};

TEST_P(PrefillDecode, PrefillThenDecodeEqualsLongPrefill) {
    auto m = load_model(fixture(GetParam()));
    ASSERT_TRUE(m.is_ok()) << m.message();
    const int64_t V = (*m)->info().vocab_size, K = 3;
    for (int64_t N : {1, 2, 63, 64, 65, 129}) {
        auto all = tokens(N + K, V);
        Session full(**m);
        auto ref = full.prefill(all, /*all_logits=*/true, /*batch=*/N + K);
        ASSERT_TRUE(ref.is_ok()) << ref.message();
        Session s(**m);
        auto p = s.prefill(std::vector<int32_t>(all.begin(), all.begin() + N), true, N);
        ASSERT_TRUE(p.is_ok()) << p.message();
        for (int64_t t = 0; t < N; ++t)
            EXPECT_LT(rel_err(&(*p)[t * V], &(*ref)[t * V], V), 1e-4) << "N=" << N << " prefill row " << t;
        for (int64_t k = 0; k < K; ++k) {
            auto d = s.decode(all[N + k]);
            ASSERT_TRUE(d.is_ok()) << d.message();
            EXPECT_LT(rel_err(d->data(), &(*ref)[(N + k) * V], V), 1e-4) << "N=" << N << " decode step " << k;
        }
    }
}

TEST_P(PrefillDecode, ChunkedPrefillAndInterleavedSessions) {
    auto m = load_model(fixture(GetParam()));
    ASSERT_TRUE(m.is_ok()) << m.message();
    const int64_t V = (*m)->info().vocab_size;
    auto a = tokens(150, V), b = tokens(97, V);
    for (auto& x : b) x = static_cast<int32_t>((x * 7 + 3) % V);
    Session one(**m), chunked(**m);
    auto r1 = one.prefill(a, false, 150);
    auto r2 = chunked.prefill(a, false, 40);  // 40, 40, 40, 30
    ASSERT_TRUE(r1.is_ok() && r2.is_ok());
    EXPECT_LT(rel_err(r2->data(), r1->data(), V), 1e-4);
    // Two sessions decoded in turn equal their solo runs (no state leaks between sessions).
    Session sa(**m), sb(**m), solo(**m);
    ASSERT_TRUE(sa.prefill(std::vector<int32_t>(a.begin(), a.begin() + 20)).is_ok());
    ASSERT_TRUE(sb.prefill(std::vector<int32_t>(b.begin(), b.begin() + 30)).is_ok());
    ASSERT_TRUE(solo.prefill(std::vector<int32_t>(b.begin(), b.begin() + 30)).is_ok());
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(sa.decode(a[20 + i]).is_ok());
        auto x = sb.decode(b[30 + i]);
        auto y = solo.decode(b[30 + i]);
        ASSERT_TRUE(x.is_ok() && y.is_ok());
        EXPECT_EQ(rel_err(x->data(), y->data(), V), 0.0) << "step " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PrefillDecode, ::testing::ValuesIn(kCases));

}  // namespace
}  // namespace ember
