// DeviceArena implementation.
#include "backend/cuda/weight_upload.h"

#include <cstdint>

#include "ops/linear/linear.h"

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

Expected<Weight> DeviceArena::upload_stacked(const std::vector<const Weight*>& parts, const char* what) {
    EMBER_REQUIRE(!parts.empty(), "upload_stacked: no parts");
    Weight d = *parts[0];
    d.rows = 0;
    for (const Weight* w : parts) {
        EMBER_REQUIRE(w->same_layout(*parts[0]), "upload_stacked(%s): parts differ in format", what);
        d.rows += w->rows;
    }
    auto stack = [&](auto member, int64_t row_bytes_of_part0, bool sb) -> Expected<const void*> {
        std::vector<uint8_t> host;
        host.reserve(static_cast<size_t>(d.rows * row_bytes_of_part0));
        for (const Weight* w : parts) {
            const auto* p = static_cast<const uint8_t*>(w->*member);
            host.insert(host.end(), p, p + w->rows * (sb ? w->row_sb_bytes() : w->row_bytes()));
        }
        return put(host.data(), host.size(), what);
    };
    EMBER_ASSIGN(d.data, stack(&Weight::data, d.row_bytes(), false));
    if (d.format == WeightFormat::AFFINE) {
        EMBER_ASSIGN(d.scales, stack(&Weight::scales, d.row_sb_bytes(), true));
        EMBER_ASSIGN(d.biases, stack(&Weight::biases, d.row_sb_bytes(), true));
    }
    return d;
}

Status DeviceArena::upload_group(const std::vector<const Weight*>& parts, Weight& stacked,
                                 const std::vector<Weight*>& outs, const char* what) {
    EMBER_REQUIRE(!parts.empty() && parts.size() == outs.size(), "upload_group(%s): bad arguments", what);
    bool same = true;
    for (const Weight* w : parts) same = same && w->same_layout(*parts[0]);
    if (!same) {
        for (size_t i = 0; i < parts.size(); ++i) {
            EMBER_ASSIGN(*outs[i], upload(*parts[i], what));
        }
        return Status::ok();
    }
    EMBER_ASSIGN(stacked, upload_stacked(parts, what));
    int64_t r = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
        *outs[i] = stacked.rows_view(r, r + parts[i]->rows);
        r += parts[i]->rows;
    }
    return Status::ok();
}

Expected<Weight> DeviceArena::upload_gather_table(const Weight& E, const char* what) {
    if (E.format != WeightFormat::GGML) return upload(E, what);
    std::vector<float> table(static_cast<size_t>(E.rows * E.cols));
    for (int64_t r = 0; r < E.rows; ++r) weight_row(E, r, &table[static_cast<size_t>(r * E.cols)]);
    EMBER_ASSIGN(const float* p, upload(table, what));
    Weight d = E;
    d.format = WeightFormat::DENSE;
    d.dtype = DType::F32;
    d.data = p;
    return d;
}

Expected<const float*> DeviceArena::upload(const std::vector<float>& v, const char* what) {
    EMBER_ASSIGN(const void* p, put(v.data(), v.size() * sizeof(float), what));
    return static_cast<const float*>(p);
}

}  // namespace ember::cuda
