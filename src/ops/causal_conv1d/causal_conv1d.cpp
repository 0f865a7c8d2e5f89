// Depthwise causal conv1d + SiLU with rolling state (formula in causal_conv1d.h), fp32, blocked over channels.
#include "ops/causal_conv1d/causal_conv1d.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/norm/silu.h"

namespace ember {

namespace {
constexpr int64_t kBlock = 64;  // channels per tile: acc stays in L1, the inner loops run over contiguous channels
constexpr int kMaxK = 16;
}  // namespace

// Each thread takes a contiguous channel range and sweeps the tokens in order (rows of x and y are read and
// written contiguously, which the prefetchers and TLB like far better than walking down one narrow column
// block at a stride of C floats).
void causal_conv1d_silu(const float* x, int64_t T, int64_t C, const float* w, int K, float* state, float* y) {
    EMBER_CHECK(T >= 0 && C > 0 && K >= 1 && K <= kMaxK, "causal_conv1d_silu: T=%lld C=%lld K=%d",
                (long long)T, (long long)C, K);
    EMBER_CHECK(T == 0 || (y != x && (K == 1 || y != state)), "causal_conv1d_silu: y must not alias x or state");
    const int64_t S = K - 1;
    const int64_t n_blocks = (C + kBlock - 1) / kBlock;
    const int64_t work = std::max<int64_t>(1, T * K * kBlock);
    parallel_for(n_blocks, std::max<int64_t>(1, 32768 / work), [&](int64_t b0, int64_t b1) {
        const int64_t c0 = b0 * kBlock, n = std::min(C, b1 * kBlock) - c0;
        std::vector<float> wt(K * n);  // w transposed for channels [c0, c0 + n): wt[j·n + cc] = w[c0 + cc, j]
        for (int64_t cc = 0; cc < n; ++cc)
            for (int j = 0; j < K; ++j) wt[j * n + cc] = w[(c0 + cc) * K + j];
        float acc[kBlock];
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
                const int64_t nc = std::min(kBlock, n - i0);
                for (int64_t cc = 0; cc < nc; ++cc) acc[cc] = 0.0f;
                for (int j = 0; j < K; ++j) {
                    const int64_t r = t + j;  // row of xx = [state ; x]
                    const float* src = (r < S ? state + r * C : x + (r - S) * C) + c0 + i0;
                    const float* wj = wt.data() + j * n + i0;
                    for (int64_t cc = 0; cc < nc; ++cc) acc[cc] += wj[cc] * src[cc];
                }
                float* yt = y + t * C + c0 + i0;
                for (int64_t cc = 0; cc < nc; ++cc) yt[cc] = silu_vec(acc[cc]);
            }
        }
        // New state = last K−1 rows of xx: row r ← xx[T + r]. Increasing r only reads rows at or after the one
        // written (T + r ≥ r), so shifting the old state in place is safe.
        for (int64_t r = 0; r < S; ++r) {
            const int64_t src_row = T + r;
            const float* src = (src_row < S ? state + src_row * C : x + (src_row - S) * C) + c0;
            float* dst = state + r * C + c0;
            if (src != dst)
                for (int64_t cc = 0; cc < n; ++cc) dst[cc] = src[cc];
        }
    });
}

}  // namespace ember
