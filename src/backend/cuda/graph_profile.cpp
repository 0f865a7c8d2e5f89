// profile_graph_nodes (graph_profile.h).
#include "backend/cuda/graph_profile.h"

#include <algorithm>
#include <map>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "core/status.h"

namespace ember::cuda {

std::string profile_graph_nodes(cudaGraph_t graph, cudaStream_t st, int repeats) {
    size_t n = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
    std::vector<cudaGraphNode_t> nodes(n);
    CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    struct Acc { double us = 0; int calls = 0; };
    std::map<std::string, Acc> by_name;
    double total = 0;
    int failed = 0, kernels = 0;
    for (cudaGraphNode_t nd : nodes) {
        cudaGraphNodeType t;
        CUDA_CHECK(cudaGraphNodeGetType(nd, &t));
        if (t != cudaGraphNodeTypeKernel) continue;
        ++kernels;
        cudaKernelNodeParams p{};
        if (cudaGraphKernelNodeGetParams(nd, &p) != cudaSuccess) { (void)cudaGetLastError(); ++failed; continue; }
        cudaLaunchAttribute attr[1];
        int na = 0;
        cudaLaunchAttributeValue v{};
        if (cudaGraphKernelNodeGetAttribute(nd, cudaLaunchAttributeClusterDimension, &v) == cudaSuccess &&
            v.clusterDim.x * v.clusterDim.y * v.clusterDim.z > 1) {
            attr[0].id = cudaLaunchAttributeClusterDimension;
            attr[0].val = v;
            na = 1;
        }
        (void)cudaGetLastError();
        cudaLaunchConfig_t cfg{};
        cfg.gridDim = p.gridDim;
        cfg.blockDim = p.blockDim;
        cfg.dynamicSmemBytes = p.sharedMemBytes;
        cfg.stream = st;
        cfg.attrs = na ? attr : nullptr;
        cfg.numAttrs = na;
        float best = 1e30f;
        bool ok = true;
        for (int r = 0; r < repeats && ok; ++r) {
            CUDA_CHECK(cudaEventRecord(a, st));
            ok = cudaLaunchKernelExC(&cfg, p.func, p.kernelParams) == cudaSuccess;
            CUDA_CHECK(cudaEventRecord(b, st));
            CUDA_CHECK(cudaEventSynchronize(b));
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
            best = std::min(best, ms);
        }
        if (!ok) { (void)cudaGetLastError(); ++failed; continue; }
        const char* name = nullptr;
        if (cudaFuncGetName(&name, p.func) != cudaSuccess || !name) { (void)cudaGetLastError(); name = "?"; }
        Acc& acc = by_name[name];
        acc.us += best * 1e3;
        acc.calls += 1;
        total += best * 1e3;
    }
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    std::vector<std::pair<std::string, Acc>> v(by_name.begin(), by_name.end());
    std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.second.us > y.second.us; });
    std::string out = strfmt("%d kernel nodes, each launched alone (best of %d): %.1f us in all; %d not launchable alone\n\n"
                             "| kernel | calls | us | %% |\n|---|---|---|---|\n", kernels, repeats, total, failed);
    for (const auto& [name, acc] : v)
        out += strfmt("| %.100s | %d | %.1f | %.1f |\n", name.c_str(), acc.calls, acc.us, 100.0 * acc.us / total);
    return out;
}

}  // namespace ember::cuda
