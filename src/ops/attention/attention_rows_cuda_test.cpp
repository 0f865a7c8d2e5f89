// GPU tests for the batched decode of attention_cuda.h (gated_attention_decode_rows): rows of different
// sequences (slots of a cache pool) at ragged positions, against the CPU composition of the fp64 references
// (attntest::cpu_attention, one call per row on that slot's cache), with poisoned outputs and untouched-slot
// checks; an invalid slot; CUDA-graph replay with the rows rewritten. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/attention/attention_cuda_test_util.h"

namespace ember::cuda {
namespace {

using namespace attntest;

// Row r of a batch of inputs as a 1-token Inputs.
Inputs row_inputs(const GatedAttentionDims& d, const Inputs& in, int64_t r) {
    const size_t q = size_t(d.n_heads * 2 * d.head_dim), kv = size_t(d.n_kv * d.head_dim);
    Inputs o;
    o.qg.assign(in.qg.begin() + r * q, in.qg.begin() + (r + 1) * q);
    o.k.assign(in.k.begin() + r * kv, in.k.begin() + (r + 1) * kv);
    o.v.assign(in.v.begin() + r * kv, in.v.begin() + (r + 1) * kv);
    o.qn = in.qn;
    o.kn = in.kn;
    return o;
}

// paged: one page pool for every slot ([page][G][kKvPage][D]) with a page table [slots][max_pages], each slot's
// pages drawn in a random order from the shuffled pool (five pages spare).
struct Pool {
    GatedAttentionDims d;
    int64_t slots, n_max;
    DeviceBuffer qg, k, v, qn, kn, K, V, rows, out, ws, table;
    size_t ws_bytes, slot_elems;
    std::vector<std::vector<float>> Kh, Vh;  // host copy of every slot's caches
    std::vector<int64_t> len;               // rows of each slot holding keys
    std::vector<int32_t> pages;             // paged: [slots][max_pages]
    int64_t max_pages = 0;
    // Element offset of row `row` of kv head g of slot s in the pools.
    size_t off(int64_t s, int64_t g, int64_t row) const {
        const int64_t D = d.head_dim;
        if (pages.empty()) return size_t(s) * slot_elems + size_t((g * d.capacity + row) * D);
        return size_t(kv_page_elem(pages[size_t(s * max_pages + row / kKvPage)], g, row, d.n_kv, D));
    }
    Pool(const GatedAttentionDims& dims, int64_t n_slots, int64_t n_max_, uint64_t seed, bool paged = false)
        : d(dims), slots(n_slots), n_max(n_max_) {
        const size_t H = size_t(d.n_heads), G = size_t(d.n_kv), D = size_t(d.head_dim), N = size_t(n_max);
        slot_elems = G * size_t(d.capacity) * D;
        size_t pool_elems = size_t(slots) * slot_elems;
        if (paged) {
            int64_t n_pages = 0;
            max_pages = (d.capacity + kKvPage - 1) / kKvPage;
            pages = random_pages(slots * max_pages * kKvPage, 5, seed, &n_pages);  // every slot's pages distinct
            table = dev_alloc(pages.size() * 4);
            copy_to_device(table.get(), pages.data(), pages.size() * 4);
            pool_elems = size_t(n_pages * kKvPage) * G * D;
        }
        qg = dev_alloc(N * H * 2 * D * 4);
        k = dev_alloc(N * G * D * 4);
        v = dev_alloc(N * G * D * 4);
        qn = dev_alloc(D * 4);
        kn = dev_alloc(D * 4);
        K = dev_alloc(pool_elems * kv_elem(d));
        V = dev_alloc(pool_elems * kv_elem(d));
        rows = dev_alloc(N * 2 * 4);
        out = dev_alloc(N * H * D * 4);
        ws_bytes = gated_attention_rows_workspace_bytes(d, n_max);
        ws = dev_alloc(ws_bytes);
        CUDA_CHECK(cudaMemset(K.get(), 0xff, K.bytes()));  // rows past each slot's length: NaN
        CUDA_CHECK(cudaMemset(V.get(), 0xff, V.bytes()));
        Kh.resize(size_t(slots));
        Vh.resize(size_t(slots));
        len.assign(size_t(slots), 0);
        for (int64_t s = 0; s < slots; ++s) {
            len[size_t(s)] = (s * 977 + 13) % d.capacity;
            make_host_cache(d, len[size_t(s)], seed + 10 * uint64_t(s), Kh[size_t(s)], Vh[size_t(s)]);
            if (d.kv_bf16) {
                round_bf16(Kh[size_t(s)].data(), Kh[size_t(s)].size());
                round_bf16(Vh[size_t(s)].data(), Vh[size_t(s)].size());
            }
            for (int64_t g = 0; g < d.n_kv; ++g)
                for (int64_t r = 0; r < len[size_t(s)]; r += kKvPage) {  // page runs (the whole range if contiguous)
                    const int64_t n = pages.empty() ? len[size_t(s)] : std::min(kKvPage, len[size_t(s)] - r);
                    const size_t h = size_t((g * d.capacity + r) * d.head_dim);
                    kv_upload(d, kv_at(d, K, off(s, g, r)), Kh[size_t(s)].data() + h, size_t(n * d.head_dim));
                    kv_upload(d, kv_at(d, V, off(s, g, r)), Vh[size_t(s)].data() + h, size_t(n * d.head_dim));
                    if (pages.empty()) break;
                }
        }
    }
    void stage(const Inputs& in, const std::vector<int32_t>& pairs) {
        copy_to_device(qg.get(), in.qg.data(), in.qg.size() * 4);
        copy_to_device(k.get(), in.k.data(), in.k.size() * 4);
        copy_to_device(v.get(), in.v.data(), in.v.size() * 4);
        copy_to_device(qn.get(), in.qn.data(), in.qn.size() * 4);
        copy_to_device(kn.get(), in.kn.data(), in.kn.size() * 4);
        copy_to_device(rows.get(), pairs.data(), pairs.size() * 4);
        CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));
    }
    void call(int64_t n, cudaStream_t st) {
        gated_attention_decode_rows(d, qg.as<float>(), k.as<float>(), v.as<float>(), qn.as<float>(), kn.as<float>(),
                                    K.get(), V.get(), slots, rows.as<int32_t>(), n, out.as<float>(),
                                    ws.get(), ws_bytes, st, pages.empty() ? nullptr : table.as<int32_t>(), max_pages);
    }
    std::vector<float> result(int64_t n) {
        std::vector<float> o(size_t(n * d.n_heads * d.head_dim));
        copy_to_host(o.data(), out.get(), o.size() * 4);
        return o;
    }
    // Slot s's cache as [G][cap][D] (paged: gathered from its pages).
    std::vector<float> slot_cache(const DeviceBuffer& C, int64_t s) {
        if (pages.empty()) return kv_download(d, kv_at(d, C, size_t(s) * slot_elems), slot_elems);
        const std::vector<float> all = kv_download(d, C.get(), C.bytes() / kv_elem(d));
        std::vector<float> o(slot_elems);
        for (int64_t g = 0; g < d.n_kv; ++g)
            for (int64_t r = 0; r < d.capacity; ++r)
                std::memcpy(&o[size_t((g * d.capacity + r) * d.head_dim)], &all[off(s, g, r)], size_t(d.head_dim) * 4);
        return o;
    }
};

// Rows (slot, position = that slot's length) for the given slots; checks each row against the reference on
// its slot, the appended cache rows, and that every other slot is untouched (bit for bit).
void check_rows(Pool& P, const std::vector<int64_t>& slots, uint64_t seed, cudaStream_t st = nullptr,
                bool graph = false) {
    const int64_t n = int64_t(slots.size()), HD = P.d.n_heads * P.d.head_dim;
    SCOPED_TRACE(testing::Message() << "H=" << P.d.n_heads << " G=" << P.d.n_kv << " D=" << P.d.head_dim
                                    << " n=" << n << (graph ? " graph" : ""));
    const Inputs in = make_inputs(P.d, n, seed);
    std::vector<int32_t> pairs;
    for (int64_t s : slots) pairs.insert(pairs.end(), {int32_t(s), int32_t(P.len[size_t(s)])});
    std::vector<std::vector<float>> before(size_t(P.slots));
    for (int64_t s = 0; s < P.slots; ++s) before[size_t(s)] = P.slot_cache(P.K, s);
    P.stage(in, pairs);
    if (graph) {
        // Captured once with these rows; replayed after the rows array was rewritten with the real ones.
        std::vector<int32_t> other(pairs.size(), 0);
        copy_to_device(P.rows.get(), other.data(), other.size() * 4);
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        P.call(n, st);
        CUDA_CHECK(cudaStreamEndCapture(st, &g));
        CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
        CUDA_CHECK(cudaMemcpyAsync(P.rows.get(), pairs.data(), pairs.size() * 4, cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaGraphLaunch(ge, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        CUDA_CHECK(cudaGraphExecDestroy(ge));
        CUDA_CHECK(cudaGraphDestroy(g));
    } else {
        P.call(n, st);
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = P.result(n);
    for (int64_t r = 0; r < n; ++r) {
        const int64_t s = slots[size_t(r)], pos = P.len[size_t(s)];
        std::vector<float> k_new;
        // The appended key row of every kv head, in this slot only (a bf16 cache: the reference takes the stored
        // rows, checked against its own keys within the rounding).
        const std::vector<float> Kd = P.slot_cache(P.K, s);
        std::vector<float> k_stored;
        for (int64_t h = 0; h < P.d.n_kv; ++h) {
            const size_t off = size_t((h * P.d.capacity + pos) * P.d.head_dim);
            k_stored.insert(k_stored.end(), Kd.begin() + off, Kd.begin() + off + P.d.head_dim);
        }
        const std::vector<float> want = cpu_attention(P.d, row_inputs(P.d, in, r), P.Kh[size_t(s)], P.Vh[size_t(s)],
                                                      pos, 1, &k_new, true, {}, P.d.kv_bf16 ? &k_stored : nullptr);
        if (P.d.kv_bf16) expect_close(k_stored, k_new, "stored bf16 keys", {}, 0, bf16_row_budget());
        const std::vector<float> g(got.begin() + r * HD, got.begin() + (r + 1) * HD);
        expect_close(g, want, "row output");
        for (int64_t h = 0; h < P.d.n_kv; ++h) {
            const size_t off = size_t((h * P.d.capacity + pos) * P.d.head_dim);
            const std::vector<float> row(Kd.begin() + off, Kd.begin() + off + P.d.head_dim),
                want_row(P.Kh[size_t(s)].begin() + off, P.Kh[size_t(s)].begin() + off + P.d.head_dim);
            expect_close(row, want_row, "new key row");
        }
        P.len[size_t(s)] = pos + 1;
    }
    for (int64_t s = 0; s < P.slots; ++s) {
        bool used = false;
        for (int64_t u : slots) used = used || u == s;
        if (used) continue;
        const std::vector<float> now = P.slot_cache(P.K, s);
        EXPECT_EQ(0, std::memcmp(now.data(), before[size_t(s)].data(), now.size() * 4)) << "slot " << s << " changed";
    }
}

TEST(AttentionRowsCuda, RaggedRowsMatchReferencePerSlot) {
    SKIP_WITHOUT_GPU();
    // Qwen3.5 shapes (gated, d 256) and a small odd one; positions from 0 to several thousand (several splits).
    const int64_t cfgs[][4] = {{8, 2, 256, 64}, {16, 4, 256, 64}, {6, 3, 128, 32}, {3, 1, 64, 16}};
    uint64_t seed = 500;
    for (const auto& c : cfgs) {
        const GatedAttentionDims d = make_dims(c[0], c[1], c[2], c[3], 6000);
        Pool P(d, 9, 8, seed);
        check_rows(P, {4}, seed + 1);
        check_rows(P, {7, 0, 3}, seed + 2);
        check_rows(P, {8, 6, 5, 2, 1}, seed + 3);
        check_rows(P, {1, 3, 5, 7, 0, 2, 4, 6}, seed + 4);
        seed += 100;
    }
}

TEST(AttentionRowsCuda, GraphReplayReadsRowsAtRunTime) {
    SKIP_WITHOUT_GPU();
    const GatedAttentionDims d = make_dims(8, 2, 256, 64, 5000);
    Pool P(d, 6, 4, 900);
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    check_rows(P, {5, 1, 3}, 901, st, true);
    check_rows(P, {2, 4}, 902, st, true);
    CUDA_CHECK(cudaStreamDestroy(st));
}

// Ragged rows on pools of (H, G, D, rot) shapes with a bf16 and / or paged cache, direct and through a graph replay.
void run_pool_cases(const std::vector<std::array<int64_t, 4>>& cfgs, int64_t cap, bool kv_bf16, bool paged,
                    uint64_t seed) {
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (const auto& c : cfgs) {
        GatedAttentionDims d = make_dims(c[0], c[1], c[2], c[3], cap);
        d.kv_bf16 = kv_bf16;
        Pool P(d, 9, 8, seed, paged);
        check_rows(P, {4}, seed + 1);
        check_rows(P, {8, 6, 5, 2, 1}, seed + 2);
        check_rows(P, {1, 3, 5, 7, 0, 2, 4, 6}, seed + 3, st, true);
        seed += 100;
    }
    CUDA_CHECK(cudaStreamDestroy(st));
}

// A bf16 cache pool (GatedAttentionDims::kv_bf16): the same checks against the reference on the rounded rows.
TEST(AttentionRowsCuda, Bf16CacheRowsMatchReferencePerSlot) {
    SKIP_WITHOUT_GPU();
    run_pool_cases({{8, 2, 256, 64}, {6, 3, 128, 32}, {3, 1, 64, 16}, {4, 2, 16, 16}}, 6000, true, false, 7500);
}

// Paged pools (the batched engine's layout): every slot's pages shuffled through one pool, fp32 and bf16 caches;
// the untouched slots' pages unchanged.
TEST(AttentionRowsCuda, PagedPoolRowsMatchReferencePerSlot) {
    SKIP_WITHOUT_GPU();
    for (bool kv16 : {false, true})
        run_pool_cases({{8, 2, 256, 64}, {6, 3, 128, 32}, {4, 2, 16, 16}}, 3000, kv16, true, kv16 ? 8300 : 7900);
}

TEST(AttentionRowsCuda, InvalidSlotOrPositionGivesNanRowAndWritesNothing) {
    SKIP_WITHOUT_GPU();
    const GatedAttentionDims d = make_dims(4, 2, 64, 64, 300);
    Pool P(d, 3, 4, 77);
    const Inputs in = make_inputs(d, 4, 78);
    std::vector<std::vector<float>> before;
    for (int64_t s = 0; s < 3; ++s) before.push_back(P.slot_cache(P.K, s));
    // slot −1, slot 3 (= n_slots), position 300 (= capacity), then a valid row.
    const std::vector<int32_t> pairs = {-1, 5, 3, 5, 1, 300, 2, int32_t(P.len[2])};
    P.stage(in, pairs);
    P.call(4, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = P.result(4);
    const int64_t HD = d.n_heads * d.head_dim;
    for (int64_t r = 0; r < 3; ++r)
        for (int64_t i = 0; i < HD; ++i) ASSERT_TRUE(std::isnan(got[size_t(r * HD + i)])) << "row " << r;
    for (int64_t i = 0; i < HD; ++i) ASSERT_FALSE(std::isnan(got[size_t(3 * HD + i)]));
    for (int64_t s = 0; s < 2; ++s) {
        const std::vector<float> now = P.slot_cache(P.K, s);
        EXPECT_EQ(0, std::memcmp(now.data(), before[size_t(s)].data(), now.size() * 4)) << "slot " << s;
    }
}

}  // namespace
}  // namespace ember::cuda
