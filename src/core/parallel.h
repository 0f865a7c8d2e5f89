// Thread-level parallelism for CPU ops: a thin wrapper over OpenMP so ops never touch pragmas directly.
#pragma once
#include <cstdint>

namespace ember {

int num_threads();                 // threads used by parallel_for (EMBER_THREADS or OpenMP default)
void set_num_threads(int n);

// Calls fn(begin, end) on disjoint chunks covering [0, n); chunks are at least `grain` long.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& fn);

}  // namespace ember

#include "core/parallel_impl.h"
