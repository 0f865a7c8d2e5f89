// ops/linear/split_out.cuh: where a row of a split output lives (GemmOutSplit, linear_gemm_q.h: up to four arrays,
// part k holding rows [end[k − 1], end[k]) as [tokens, end[k] − end[k − 1]]), shared by the GEMM's epilogue and
// reduction and the q GEMV's stores. CUDA only.
#pragma once

namespace ember::cuda::detail {

// Part of row r: its base advanced to row r of token 0, and (ld) the part's row stride in floats. Static selects
// (no indexed parameters: no local memory); end[k] past the last part is ≥ rows.
template <class I>
__device__ __forceinline__ float* split_out_row(float* y0, float* y1, float* y2, float* y3, const I (&end)[3], I rows,
                                                I r, I& ld) {
    float* p = y0;
    I s = 0, e = end[0];
    if (r >= end[0]) p = y1, s = end[0], e = end[1];
    if (r >= end[1]) p = y2, s = end[1], e = end[2];
    if (r >= end[2]) p = y3, s = end[2], e = rows;
    ld = (e < rows ? e : rows) - s;
    return p + (r - s);
}

}  // namespace ember::cuda::detail
