// HF Qwen3.5 checkpoint (bf16/f16/f32, multimodal or text-only, single or sharded) → MLX affine-quantized
// checkpoint in exactly the layout mlx-lm's `convert -q` writes (qwen35.md §3b):
//
//   names     model.language_model.X / model.X  →  language_model.model.X;  lm_head → language_model.lm_head
//             (kept only when untied); mtp.* and model.visual.* dropped
//   Linear    every nn.Linear / nn.Embedding whose input dim is divisible by the group size:
//             .weight U32 [out, in·bits/32] + .scales/.biases [out, in/group] in `dtype` (mx.quantize affine);
//             the others stay dense in `dtype`
//   norms     input_layernorm, post_attention_layernorm, model.norm, q_norm, k_norm: 1 + w (MLX nn.RMSNorm);
//             linear_attn.norm is a plain weight: not shifted
//   conv1d    [C, 1, K] → [C, K, 1] (MLX Conv1d layout)
//   dtypes    everything float cast to `dtype` (bf16), except A_log, which keeps its stored dtype (fp32)
//   config    input config.json + "quantization" = "quantization_config" = {group_size, bits, mode: affine};
//             vision_config dropped (as mlx-lm does, the vision tower is not kept); a text-only config's
//             model_type "qwen3_5_text" becomes "qwen3_5" (mlx-lm has no qwen3_5_text model; its qwen3_5 reads
//             flat configs too); tokenizer files copied.
//
// Works tensor by tensor straight from the mmap'ed input into the pre-laid-out output files, so memory use is a
// few MiB of row buffers regardless of model size.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace ember {

struct ConvertProgress {
    int64_t tensors_done = 0, tensors_total = 0;  // input tensors converted (kept ones only)
    uint64_t bytes_in = 0, bytes_in_total = 0;    // input bytes read so far / in all
    uint64_t bytes_out = 0;                       // output bytes written so far
    double seconds = 0;                           // since the conversion started
    std::string tensor;                           // input tensor being converted
};

struct ConvertOptions {
    int bits = 4;                         // 2, 3, 4, 5, 6 or 8
    int group_size = 64;                  // 32, 64 or 128
    DType dtype = DType::BF16;            // float dtype of scales/biases and of every other float tensor but A_log
    uint64_t max_shard_bytes = 5ull << 30;  // mlx-lm: 5 GiB per file
    bool force = false;                   // allow a non-empty output directory (our output files are replaced)
    std::function<void(const ConvertProgress&)> on_progress;  // called after each tensor and large piece
};

struct ConvertReport {
    int64_t tensors_in = 0;       // tensors in the input checkpoint
    int64_t tensors_out = 0;      // tensors written
    int64_t quantized = 0;        // Linear/Embedding weights quantized
    int64_t dense_linear = 0;     // Linear weights left dense (input dim not divisible by the group size)
    int64_t dropped_mtp = 0, dropped_vision = 0, dropped_lm_head = 0;
    int64_t parameters = 0;       // mlx-lm "total_parameters": leaf-module weights, quantized ones counted unpacked
    uint64_t bytes_in = 0, bytes_out = 0;
    size_t shards = 0;
    std::vector<std::string> copied;  // side files copied (tokenizer etc.)
    std::vector<std::string> notes;   // config changes and mlx-lm compatibility warnings, for the user
    double seconds = 0;
};

Expected<ConvertReport> convert_hf_to_mlx(const std::string& in_dir, const std::string& out_dir,
                                          const ConvertOptions& opt);

// Side files copied next to the weights when present (tokenizer, chat template, generation config).
const std::vector<std::string>& convert_side_files();

}  // namespace ember
