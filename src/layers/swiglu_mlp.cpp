// SwiGLU MLP layer.
#include "layers/swiglu_mlp.h"

#include <vector>

#include "ops/activation/activation.h"
#include "ops/linear/linear.h"

namespace ember {

void swiglu_mlp(const SwiGluWeights& w, const float* x, int64_t n, float* out) {
    const int64_t I = w.gate_proj.rows;
    std::vector<float> g(n * I), u(n * I);
    linear(w.gate_proj, x, n, g.data());
    linear(w.up_proj, x, n, u.data());
    swiglu(g.data(), u.data(), g.data(), n * I);
    linear(w.down_proj, g.data(), n, out);
}

}  // namespace ember
