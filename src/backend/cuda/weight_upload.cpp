// DeviceArena implementation.
#include "backend/cuda/weight_upload.h"

namespace ember::cuda {

Expected<const void*> DeviceArena::put(const void* src, size_t bytes, const char* what) {
    EMBER_ASSIGN(DeviceBuffer b, DeviceBuffer::alloc(bytes, what));
    copy_to_device(b.get(), src, bytes);
    bytes_ += static_cast<int64_t>(bytes);
    bufs_.push_back(std::move(b));
    return static_cast<const void*>(bufs_.back().get());
}

Expected<Weight> DeviceArena::upload(const Weight& w, const char* what) {
    Weight d = w;
    EMBER_ASSIGN(d.data, put(w.data, static_cast<size_t>(w.rows * w.row_bytes()), what));
    if (w.format == WeightFormat::AFFINE) {
        size_t sb = static_cast<size_t>(w.rows * (w.cols / w.group_size)) * dtype_size(w.sb_dtype);
        EMBER_ASSIGN(d.scales, put(w.scales, sb, what));
        EMBER_ASSIGN(d.biases, put(w.biases, sb, what));
    }
    return d;
}

Expected<const float*> DeviceArena::upload(const std::vector<float>& v, const char* what) {
    EMBER_ASSIGN(const void* p, put(v.data(), v.size() * sizeof(float), what));
    return static_cast<const float*>(p);
}

}  // namespace ember::cuda
