// Uploads host weights (mmap'ed or owned) to device memory once; the returned Weight has device pointers.
#pragma once
#include <vector>

#include "backend/cuda/device.h"
#include "ops/linear/weight.h"

namespace ember::cuda {

// Keeps every device allocation made for a model alive.
// GGML Q4_0 / Q4_1 / Q8_0 / Q4_K matrices uploaded in groups (one matrix, or stacked parts) of ≥ 8 MiB are stored
// re-expressed exactly as affine group-32 weights (weight_repack.h), so they run through the streaming affine GEMV
// (EMBER_GGML_REPACK=all|off overrides); all of them when the model asks (set_repack_all).
// A single matrix (upload) that is then 4/8-bit affine or GGML Q6_K, with ≥ 64 MiB of weights and a column count
// the tiled "stream" GEMV takes (weight_tiles.h: untied LM heads, very large projections) is stored TILED: 1.3–1.5×
// faster at one token than the row-major kernels on such matrices (H200); EMBER_TILED=0 keeps every matrix
// row-major, EMBER_TILED=1 tiles every supported one whatever its size (tests).
class DeviceArena {
public:
    Expected<Weight> upload(const Weight& w, const char* what);
    // The weights stacked along rows into one device matrix (one GEMV for several projections of the same
    // input); error unless all share one layout (Weight::same_layout). Parts are recovered with rows_view().
    Expected<Weight> upload_stacked(const std::vector<const Weight*>& parts, const char* what);
    // Stacked into `stacked` with row views of it in `outs` when the parts share a layout; otherwise each part
    // uploaded on its own into `outs` (and `stacked` left empty).
    Status upload_group(const std::vector<const Weight*>& parts, Weight& stacked, const std::vector<Weight*>& outs,
                        const char* what);
    Expected<const float*> upload(const std::vector<float>& v, const char* what);
    // An embedding table for embed_rows, uploaded as stored (never tiled or repacked; GGML blocks included: the
    // gather decodes them, rows equal to weight_row's).
    Expected<Weight> upload_gather_table(const Weight& E, const char* what);
    // A matrix never stored TILED (repacking as upload does): the batched engine's GEMM copy of a tiled LM head.
    Expected<Weight> upload_untiled(const Weight& w, const char* what) { return upload_impl(w, what, false); }
    int64_t bytes() const { return bytes_; }
    // Repack every repackable GGML matrix uploaded from now on, whatever its size (the model sets it when all its
    // decode matrices are repackable_for_fusion, so that its decode runs the fused GEMV path).
    void set_repack_all(bool on) { repack_all_ = on; }
    // AFFINE 4/8-bit, or GGML that the repack turns into one (not with EMBER_GGML_REPACK=off).
    static bool repackable_for_fusion(const Weight& host_weight);

private:
    bool repack_all_ = false;
    Expected<Weight> upload_impl(const Weight& w, const char* what, bool allow_tiles);
    Status attach_pairs(Weight& d, const char* what);
    Expected<const void*> put(const void* src, size_t bytes, const char* what);
    std::vector<DeviceBuffer> bufs_;
    int64_t bytes_ = 0;
};

}  // namespace ember::cuda
