// Reference depthwise causal conv1d + SiLU with rolling state: the formula of causal_conv1d.h, fp64 sums.
#include <cmath>
#include <vector>

#include "ops/causal_conv1d/causal_conv1d.h"

namespace ember {

void causal_conv1d_silu_ref(const float* x, int64_t T, int64_t C, const float* w, int K, float* state, float* y) {
    const int64_t S = K - 1;
    std::vector<float> xx((S + T) * C);  // [state ; x]
    for (int64_t i = 0; i < S * C; ++i) xx[i] = state[i];
    for (int64_t i = 0; i < T * C; ++i) xx[S * C + i] = x[i];
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) {
            double s = 0;
            for (int j = 0; j < K; ++j) s += static_cast<double>(w[c * K + j]) * xx[(t + j) * C + c];
            y[t * C + c] = static_cast<float>(s / (1.0 + std::exp(-s)));
        }
    for (int64_t r = 0; r < S; ++r)
        for (int64_t c = 0; c < C; ++c) state[r * C + c] = xx[(T + r) * C + c];
}

}  // namespace ember
