// Internal to ops/gated_delta_rule: the ISA-specific inner kernels (portable / AVX2+FMA) behind the GDN drivers.
#pragma once
#include <cstdint>

#include "ops/gated_delta_rule/gated_delta_rule.h"

namespace ember::gdn {

struct Kernels {
    const char* name;
    // C = beta·C + A·B, row-major with leading dims.  A [m, k]  B [k, n]  C [m, n]; beta == 0: C is not read.
    // a_lower: A[i, p] == 0 for p > i, so row i only needs p ≤ i (the k loop of a row block stops at its end).
    // c_lower: only C[i, j] with j ≤ i is wanted; column blocks entirely above the diagonal are skipped
    //          (left unwritten), entries above the diagonal inside a computed block are written.
    void (*gemm)(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
                 float* C, int64_t ldc, float beta, bool a_lower, bool c_lower);
    // Recurrent rule (gated_delta_rule.h) for one value head over T tokens; token t's rows are at
    // q + t·qk_stride, k + t·qk_stride [dk], v + t·v_stride [dv], o + t·o_stride [dv], g[t·gb_stride],
    // beta[t·gb_stride].  S [dk, dv] in/out.
    void (*recurrent_head)(int64_t T, int64_t dk, int64_t dv, const float* q, const float* k, int64_t qk_stride,
                           const float* v, int64_t v_stride, const float* g, const float* beta, int64_t gb_stride,
                           float* S, float* o, int64_t o_stride);
    // Chunked form for value head h (key head kh) over all T tokens in chunks of ≤ C (gated_delta_rule_impl.h).
    // Sh [dk, dv] in/out; o [T, nv, dv]; scratch: chunk_scratch_floats(C, dk, dv) floats; gam: C doubles.
    void (*chunked_head)(const GdnShape& s, int64_t h, int64_t kh, int64_t T, const float* q, const float* k,
                         const float* v, const float* g, const float* beta, float* Sh, float* o, int64_t C,
                         float* scratch, double* gam);
};

const Kernels& kernels_portable();
const Kernels* kernels_avx2();  // nullptr when this CPU lacks AVX2/FMA
const Kernels& kernels_best();  // AVX2 when available, else portable

// The drivers with an explicit kernel table (tests run every table the CPU supports).
void recurrent_with(const Kernels& kern, const GdnShape& shape, int64_t T, const float* q, const float* k,
                    const float* v, const float* g, const float* beta, float* S, float* o);
void chunked_with(const Kernels& kern, const GdnShape& shape, int64_t T, const float* q, const float* k,
                  const float* v, const float* g, const float* beta, float* S, float* o, int64_t chunk);

}  // namespace ember::gdn
