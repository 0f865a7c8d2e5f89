// Device helpers implementation.
#include "backend/cuda/device.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace ember::cuda {

bool gpu_available() {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string device_name() {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "none";
    return p.name;
}

Expected<DeviceBuffer> DeviceBuffer::alloc(size_t bytes, const char* what) {
    DeviceBuffer b;
    if (bytes == 0) return b;
    cudaError_t e = cudaMalloc(&b.p_, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();  // clear the sticky-free error state
        size_t free_b = 0, total = 0;
        cudaMemGetInfo(&free_b, &total);
        return errorf("out of GPU memory allocating %s: %.1f MiB requested, %.1f MiB free of %.1f MiB (%s)", what,
                      bytes / 1048576.0, free_b / 1048576.0, total / 1048576.0, cudaGetErrorName(e));
    }
    b.n_ = bytes;
    return b;
}

DeviceBuffer::~DeviceBuffer() {
    if (p_) cudaFree(p_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        if (p_) cudaFree(p_);
        p_ = o.p_; n_ = o.n_;
        o.p_ = nullptr; o.n_ = 0;
    }
    return *this;
}

Expected<double> copy_bandwidth_gbs() {
    const size_t bytes = size_t(1) << 30;
    EMBER_ASSIGN(DeviceBuffer a, DeviceBuffer::alloc(bytes, "bandwidth probe"));
    EMBER_ASSIGN(DeviceBuffer b, DeviceBuffer::alloc(bytes, "bandwidth probe"));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    CUDA_CHECK(cudaMemset(a.get(), 1, bytes));
    float best = 1e30f;
    for (int i = 0; i < 6; ++i) {
        CUDA_CHECK(cudaEventRecord(e0));
        CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaEventRecord(e1));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (i > 0) best = std::min(best, ms);  // the first copy warms up
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return 2.0 * bytes / (best * 1e-3) / 1e9;
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace ember::cuda
