// bench/gpu/bench_timing.cuh: the timing method shared by the GPU benchmarks (gemv_bench, read_bench): a CUDA
// graph of `per` launches (launch(i) for i < per, e.g. rotating through weight copies so that L2 stays cold),
// instantiated, replayed once to warm up, then 5 timed replays; the median per-launch seconds. This is what a
// decode graph sees: no per-launch host overhead, consecutive kernels overlapping as the hardware allows.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace ember::bench {

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class Launch>
double graph_seconds_per_launch(cudaStream_t st, int per, Launch&& launch) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < per; ++i) launch(i);
    CUDA_CHECK(cudaStreamEndCapture(st, &g));
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    CUDA_CHECK(cudaGraphLaunch(ge, st));
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    std::vector<double> t;
    for (int i = 0; i < 5; ++i) {
        CUDA_CHECK(cudaEventRecord(a, st));
        CUDA_CHECK(cudaGraphLaunch(ge, st));
        CUDA_CHECK(cudaEventRecord(b, st));
        CUDA_CHECK(cudaEventSynchronize(b));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1e-3 / per);
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));
    return median(t);
}

}  // namespace ember::bench
