// DeviceArena implementation.
#include "backend/cuda/weight_upload.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "backend/cuda/cuda_check.h"
#include "core/env.h"
#include "ops/linear/linear.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_gemm_q.h"
#include "ops/linear/weight_repack.h"
#include "ops/linear/weight_tiles.h"

namespace ember::cuda {
namespace {

// GGML Q4_0 / Q4_1 / Q8_0 / Q4_K matrices run through the streaming affine GEMV when the group they are uploaded
// in (one matrix, or the parts stacked into one GEMV) holds at least 8 MiB: they are re-expressed exactly as
// affine group-32 weights on the way up (weight_repack.h). Smaller ones keep the per-type block kernels: in a
// decode graph the affine kernel's fixed cost made SmolLM2-135M (every matrix ≤ 2 MB but the head) 8 % slower
// when all were repacked (H200: 877 vs 956 tok/s), while 16–66 MB shapes run 1.6–2.0× faster repacked
// (gemv_bench). When every matrix a decode step multiplies can be repacked (DeviceArena::set_repack_all, decided
// by the model), all are: the decode then runs fused (norms, SwiGLU, residual adds inside the GEMVs), which
// outweighs the small-matrix cost (SmolLM2: 964 → 1,122 tok/s, prefill 2,759 → 5,775 tok/s).
// EMBER_GGML_REPACK=all|off overrides both rules. A block with a non-finite scale keeps the GGML format (the
// repack refuses it).
int repack_mode() {  // 0 auto, 1 all, 2 off
    static const int mode = env_is("EMBER_GGML_REPACK", "all") ? 1 : env_is("EMBER_GGML_REPACK", "off") ? 2 : 0;
    return mode;
}

bool repack_ggml(const Weight& w, int64_t group_bytes, bool all) {
    const int mode = repack_mode();
    if (w.format != WeightFormat::GGML || !ggml_affine_exact(w.ggml_type) || mode == 2) return false;
    if (mode == 1 || all) return true;
    // 8-bit rows longer than 8192 do not fit the affine kernel's staged x at once: Llama-8B down (4096×14336) Q8_0
    // decodes at 0.79× repacked (n = 1; 3.4× at n = 8), so those stay on the block kernel.
    if (w.ggml_type == GgmlType::Q8_0 && w.cols > 8192) return false;
    return group_bytes >= (int64_t(8) << 20);
}

// The parts as they will be stored on the device; repacked copies live in `keep` (a deque: stable addresses).
std::vector<const Weight*> device_forms(const std::vector<const Weight*>& parts, std::deque<RepackedWeight>& keep,
                                        bool all) {
    int64_t group_bytes = 0;
    for (const Weight* w : parts) group_bytes += w->total_bytes();
    std::vector<const Weight*> out;
    for (const Weight* w : parts) {
        if (repack_ggml(*w, group_bytes, all)) {
            auto r = ggml_to_affine(*w);
            if (r.is_ok()) {
                keep.push_back(std::move(r).value());
                out.push_back(&keep.back().w);
                continue;
            }
        }
        out.push_back(w);
    }
    return out;
}

// The tiling rule (weight_upload.h): EMBER_TILED=0 off, 1 every supported matrix, else ≥ 64 MiB. The stream kernel
// reaches 89–99 % of copy bandwidth on 290 MB – 1.1 GB heads (Q6_K 92–95 %) where the row-major kernels reach
// 56–71 %; on ≤ 30 MB matrices its one-block-per-SM runs of 256 rows leave SMs idle and it loses to the q kernel
// (bench/results/2026-12-01-h200-stream-gemv.md).
bool tile_it(const Weight& w) {
    static const int mode = env_off("EMBER_TILED") ? 2 : env_on("EMBER_TILED") ? 1 : 0;
    if (mode == 2 || !tiles_supported(w) || !detail::gemv_stream_fits(tiled_form(w))) return false;
    return mode == 1 || w.total_bytes() >= (int64_t(64) << 20);
}

}  // namespace

bool DeviceArena::repackable_for_fusion(const Weight& w) {
    if (w.format == WeightFormat::AFFINE) return w.bits == 4 || w.bits == 8;
    // 8-bit rows longer than 8192 stay excluded (Llama-8B Q8_0 down: 0.79× repacked, unmeasured fused).
    return w.format == WeightFormat::GGML && repack_mode() != 2 && ggml_affine_exact(w.ggml_type) &&
           !(w.ggml_type == GgmlType::Q8_0 && w.cols > 8192);
}

Expected<const void*> DeviceArena::put(const void* src, size_t bytes, const char* what) {
    EMBER_ASSIGN(DeviceBuffer b, DeviceBuffer::alloc(bytes, what));
    copy_to_device(b.get(), src, bytes);
    bytes_ += static_cast<int64_t>(bytes);
    bufs_.push_back(std::move(b));
    return static_cast<const void*>(bufs_.back().get());
}

// The tensor-core GEMM's {s, b'} pairs (linear_gemm_q.h) made once here, so that no prefill or batched-decode call
// re-derives them (H200, 2B, 64-row step: 97 of those kernels, 846 µs summed). They cost 8 bytes per row and group
// (2B at group 64: ≈ 0.19 GB; 27B: ≈ 3.4 GB), so they are made only while at least 2 GiB of device memory stays
// free besides them; EMBER_GEMM_PAIRS=0 never makes them (the GEMM then makes them per call, as before).
Status DeviceArena::attach_pairs(Weight& d, const char* what) {
    static const bool on = !env_off("EMBER_GEMM_PAIRS");
    const size_t bytes = gemm_q_pairs_bytes(d);
    if (!on || bytes == 0 || d.rows == 0) return Status::ok();
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess || free_b < bytes + (size_t(2) << 30)) {
        cudaGetLastError();
        return Status::ok();
    }
    EMBER_ASSIGN(DeviceBuffer b, DeviceBuffer::alloc(bytes, what));
    gemm_q_make_pairs(d, b.get(), nullptr);
    CUDA_CHECK(cudaStreamSynchronize(nullptr));  // before any other stream reads them
    d.gemm_pairs = b.get();
    d.gemm_pairs_ld = gemm_q_pairs_ld(d);
    bytes_ += static_cast<int64_t>(bytes);
    bufs_.push_back(std::move(b));
    return Status::ok();
}

Expected<Weight> DeviceArena::upload(const Weight& w0, const char* what) { return upload_impl(w0, what, true); }

Expected<Weight> DeviceArena::upload_impl(const Weight& w0, const char* what, bool allow_tiles) {
    EMBER_REQUIRE(!w0.act_q8, "%s: 8-bit activations (llama.cpp's CPU numerics) run on the CPU only", what);
    std::deque<RepackedWeight> keep;
    const Weight& w = *device_forms({&w0}, keep, repack_all_)[0];
    if (allow_tiles && tile_it(w)) {
        EMBER_ASSIGN(TiledWeight t, tile_weight(w));
        Weight d = t.w;
        EMBER_ASSIGN(d.data, put(t.codes.data(), t.codes.size(), what));
        EMBER_ASSIGN(d.scales, put(t.sb.data(), t.sb.size(), what));
        return d;
    }
    Weight d = w;
    EMBER_ASSIGN(d.data, put(w.data, static_cast<size_t>(w.rows * w.row_bytes()), what));
    if (w.format == WeightFormat::AFFINE) {
        size_t sb = static_cast<size_t>(w.rows * (w.cols / w.group_size)) * dtype_size(w.sb_dtype);
        EMBER_ASSIGN(d.scales, put(w.scales, sb, what));
        EMBER_ASSIGN(d.biases, put(w.biases, sb, what));
        EMBER_TRY(attach_pairs(d, what));
    }
    return d;
}

Expected<Weight> DeviceArena::upload_stacked(const std::vector<const Weight*>& parts0, const char* what) {
    EMBER_REQUIRE(!parts0.empty(), "upload_stacked: no parts");
    for (const Weight* w : parts0)
        EMBER_REQUIRE(!w->act_q8, "%s: 8-bit activations (llama.cpp's CPU numerics) run on the CPU only", what);
    std::deque<RepackedWeight> keep;
    const std::vector<const Weight*> parts = device_forms(parts0, keep, repack_all_);
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
        EMBER_TRY(attach_pairs(d, what));
    }
    return d;
}

Status DeviceArena::upload_group(const std::vector<const Weight*>& parts0, Weight& stacked,
                                 const std::vector<Weight*>& outs, const char* what) {
    EMBER_REQUIRE(!parts0.empty() && parts0.size() == outs.size(), "upload_group(%s): bad arguments", what);
    std::deque<RepackedWeight> keep;
    const std::vector<const Weight*> parts = device_forms(parts0, keep, repack_all_);  // (not repacked again below)
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
    if (E.format != WeightFormat::GGML) return upload_impl(E, what, false);  // the gather reads rows as stored
    // GGML tables as stored in the file: embed_rows decodes their blocks (Llama-8B's Q4_K table: 0.29 GB, where an
    // f32 expansion took 2.1 GB).
    Weight d = E;
    EMBER_ASSIGN(d.data, put(E.data, static_cast<size_t>(E.rows * E.row_bytes()), what));
    return d;
}

Expected<const float*> DeviceArena::upload(const std::vector<float>& v, const char* what) {
    EMBER_ASSIGN(const void* p, put(v.data(), v.size() * sizeof(float), what));
    return static_cast<const float*>(p);
}

}  // namespace ember::cuda
