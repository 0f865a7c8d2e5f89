// ops/linear/weight_tiles.h: the "tiled" storage of a 4-bit affine weight for the streaming CUDA GEMV of large
// matrices (ops/linear/linear_gemv_stream.cu). Exact: the same codes, scales and biases, re-laid out so that every
// warp load reads whole contiguous 512-byte pieces and every lane finds its MMA fragments in the 16 bytes it loads.
//
// Nibble view: a 4-bit row is read as it is; an 8-bit row of K codes as a 4-bit row of 2K nibbles (code c =
// nibble 2c + 16·nibble 2c+1, MLX's little-endian bit order; the kernel meets the high nibble with 16·x) whose
// groups hold 2·group_size nibbles. "Columns" below are nibble columns, "groups" nibble groups (32, 64 or 128).
// Geometry: tiles of 16 rows (rows padded with zero codes, scales and biases to tiles·16), chunks of 128 columns
// (NG = 128 / group nibbles groups). Tile-major: block (tile, chunk) at index tile·nchunks + chunk.
//   codes  [tiles][nchunks][1024 B]: [h = 0, 1][lane = 0..31][16 B]; lane (g = lane / 4, t = lane % 4) holds row
//          16·tile + g + 8h; bits 4p..4p+3 of its 32-bit word w (p = 0..7) hold column
//              128·chunk + 16·s + 4t + 2·(j % 2) + p / 4,    j = p % 4, k-step s = 2w + j / 2,
//          so that one shift + one LOP3 per two codes build the bf16 A fragments of k-step s (rows g, g+8, k =
//          2t, 2t+1 | 2t+8, 2t+9 ↔ columns 4t + 0, 1 | 4t + 2, 3 of the step).
//   sb     [tiles][nchunks][8·NG entries], entry g·NG + G = {scale(g, G), bias(g, G), scale(g+8, G), bias(g+8, G)}
//          in the weight's sb dtype (BF16, F16 or F32), G = the chunk's group index.
// GGML Q6_K (w = d·sc·(q − 32), q = 4 low + 2 high bits, int8 sc per 16 columns, fp16 d per 256): chunks of 128
// columns = 8 groups G of 16 = the k-steps (s = G). codes [tiles][nchunks][1536 B] = [piece 0..2][lane][16 B]: lane
// word 4·piece + c (c = its 32-bit word in the piece) = w[0..11]. Words w[3m..3m+2] (k-steps 2m, 2m+1) form two
// 48-bit streams, of their low and of their high 16-bit halves (stream bit b = bit b % 16 of w[3m + b / 16] in the
// half); the 6-bit codes q of A register r (0: row g k 2t, 2t+1; 1: row g+8; 2, 3: the same at k + 8) of k-step s
// sit at bits 6i..6i+5 of the two streams, i = 4·(s % 2) + r; k = 2t + e, 2t + 8 + e (e = 0, 1: the low / high
// stream) ↔ columns 16s + 4t + e, 16s + 4t + 2 + e, as in the 4-bit layout —
// so that one shift + one LOP3 build a bf16 pair {128 + q, 128 + q'} (two of each for the codes at i = 2, 5 that
// straddle two words). sb [tiles][nchunks][160 B]: int8 sc [lane][4] = {(g, t), (g+8, t), (g, t+4), (g+8, t+4)}
// (128 B), fp16 d [g][h] (32 B; the row's 256-column block's d, repeated in its two chunks: 0.06 bits per weight
// more than the GGUF blocks).
// A Weight in this storage has format TILED (device only): data = codes, scales = sb, biases unused; bits /
// group_size / sb_dtype / ggml_type of the source (Q6_K: 6, 16, F16, Q6_K). The CPU kernels do not read it.
#pragma once
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "ops/linear/weight.h"

namespace ember {

constexpr int kTileRows = 16, kTileCols = 128;

// Warps per block of the streaming kernel for `cols` nibble columns (every warp owns the same number of chunks):
// the largest divisor of cols / 128 in [8, 20]; 0 when there is none (or cols % 128 != 0).
int tiled_warps(int64_t cols);

// The storage geometry of W (an AFFINE or GGML Q6_K source, or a TILED weight): ok = false when unsupported.
struct TileGeometry {
    bool ok = false;
    int kind = 0;               // 4, 8 (affine bits) or 6 (Q6_K)
    int64_t nibble_cols = 0;    // columns of the nibble view
    int64_t nchunks = 0;        // nibble_cols / 128
    int group_nibbles = 0;      // 32, 64 or 128
    int code_bytes = 0, sb_bytes = 0;  // per tile-chunk
    int warps = 0;              // tiled_warps(nibble_cols)
};
TileGeometry tile_geometry(const Weight& W);

// True when W can be stored tiled: AFFINE 4-bit group 32 / 64 / 128 or 8-bit group 32 / 64 with BF16 / F16 / F32
// scales and cols a multiple of 128, or GGML Q6_K (cols a multiple of 256); and tiled_warps(nibble cols) > 0.
bool tiles_supported(const Weight& W);

// The TILED descriptor of a supported source W (pointers left null).
Weight tiled_form(const Weight& W);

// Bytes of the tiled codes and sb arrays of W.
int64_t tiled_code_bytes(const Weight& W);
int64_t tiled_sb_bytes(const Weight& W);

// W (AFFINE, tiles_supported) re-laid out; the result's pointers refer to `codes` / `sb`.
struct TiledWeight {
    Weight w;
    std::vector<uint8_t> codes, sb;
};
Expected<TiledWeight> tile_weight(const Weight& W);

// The inverse for affine sources, for tests: T (TILED, host pointers) back to MLX affine codes, scales and biases.
Status untile_weight(const Weight& T, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales,
                     std::vector<uint8_t>& biases);

}  // namespace ember
