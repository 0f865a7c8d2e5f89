// SwiGLU MLP: down( silu(gate·u) ⊙ (up·u) ).
#pragma once
#include <cstdint>

#include "ops/linear/weight.h"

namespace ember {

struct SwiGluWeights {
    Weight gate_proj, up_proj;  // [intermediate, hidden]
    Weight down_proj;           // [hidden, intermediate]
};

// x [n, hidden] → out [n, hidden]
void swiglu_mlp(const SwiGluWeights& w, const float* x, int64_t n, float* out);

}  // namespace ember
