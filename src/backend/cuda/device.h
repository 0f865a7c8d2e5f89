// Device helpers for the CUDA backend: GPU presence, typed device buffers (cudaMalloc only, RAII),
// host<->device copies. Out-of-memory is an error Status with the numbers, never an abort.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember::cuda {

// True when a CUDA device is usable (tests skip otherwise).
bool gpu_available();
std::string device_name();
// Measured device-to-device copy bandwidth in GB/s (read + write bytes / time; best of a few 1 GiB copies) —
// the "copy bandwidth" the floors in performance.md divide by. Error when 2 GiB cannot be allocated.
Expected<double> copy_bandwidth_gbs();

// Owns `bytes` of device memory.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    static Expected<DeviceBuffer> alloc(size_t bytes, const char* what);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void* get() const { return p_; }
    template <class T> T* as() const { return static_cast<T*>(p_); }
    size_t bytes() const { return n_; }

private:
    void* p_ = nullptr;
    size_t n_ = 0;
};

// Synchronous copies (tests, upload at load time).
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
template <class T>
Expected<DeviceBuffer> upload(const std::vector<T>& v, const char* what) {
    EMBER_ASSIGN(DeviceBuffer b, DeviceBuffer::alloc(v.size() * sizeof(T), what));
    copy_to_device(b.get(), v.data(), v.size() * sizeof(T));
    return b;
}
template <class T>
std::vector<T> download(const DeviceBuffer& b, size_t n) {
    std::vector<T> v(n);
    copy_to_host(v.data(), b.get(), n * sizeof(T));
    return v;
}

}  // namespace ember::cuda
