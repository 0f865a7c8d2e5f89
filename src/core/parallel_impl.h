// parallel_for implementation (OpenMP when available, serial otherwise).
#pragma once
#include <algorithm>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace ember {

template <class F>
void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int nt = num_threads();
    int64_t chunks = std::min<int64_t>(nt, (n + grain - 1) / grain);
    if (chunks <= 1) { fn(int64_t{0}, n); return; }
#ifdef _OPENMP
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
#endif
    for (int64_t c = 0; c < chunks; ++c) {
        int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
        if (b < e) fn(b, e);
    }
}

}  // namespace ember
