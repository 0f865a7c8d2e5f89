// ops/linear/weight_tiles.cpp: 4/8-bit affine and GGML Q6_K → tiled storage, and back for affine (spec: weight_tiles.h).
#include "ops/linear/weight_tiles.h"

#include <cstring>

#include "core/dtype.h"
#include "core/parallel.h"
#include "quant/ggml_blocks.h"

namespace ember {
namespace {

int64_t tiles_of(const Weight& W) { return (W.rows + kTileRows - 1) / kTileRows; }

// Column (within its chunk / Q6_K group pair) of nibble p of word wi of lane (g, t) — the same for both row halves.
int tile_col(int t, int wi, int p) {
    const int j = p % 4, s = 2 * wi + j / 2;
    return 16 * s + 4 * t + 2 * (j % 2) + p / 4;
}

bool is_q6k(const Weight& W) {
    return (W.format == WeightFormat::GGML || W.format == WeightFormat::TILED) && W.ggml_type == GgmlType::Q6_K;
}

// The affine layout's correspondence, for one tile-chunk (tile, ch) of W (rows beyond W.rows skipped):
// code(row, byte offset of a 32-bit word in the tile-chunk's codes, the nibble columns of its 8 nibbles within the
// chunk) and sb(row, group index in the row, byte offset of the {scale, bias} pair in the tile-chunk's sb).
// tile_weight packs along it, untile_weight unpacks.
template <class Code, class Sb>
void visit_affine_chunk(const Weight& W, const TileGeometry& geo, int64_t tile, int64_t ch, Code&& code, Sb&& sb) {
    const int NG = kTileCols / geo.group_nibbles;
    const int64_t ng = W.cols / W.group_size;
    const size_t es = dtype_size(W.sb_dtype);
    for (int h = 0; h < 2; ++h)
        for (int lane = 0; lane < 32; ++lane) {
            const int g = lane / 4, t = lane % 4;
            const int64_t row = tile * kTileRows + g + 8 * h;
            if (row >= W.rows) continue;
            for (int wi = 0; wi < 4; ++wi) {
                int cols[8];
                for (int p = 0; p < 8; ++p) cols[p] = tile_col(t, wi, p);
                code(row, (h * 32 + lane) * 16 + wi * 4, cols);
            }
        }
    for (int g = 0; g < 8; ++g)
        for (int G = 0; G < NG; ++G)
            for (int h = 0; h < 2; ++h) {
                const int64_t row = tile * kTileRows + g + 8 * h;
                if (row >= W.rows) continue;
                sb(row, row * ng + ch * NG + G, ((g * NG + G) * 4 + 2 * h) * es);
            }
}

}  // namespace

int tiled_warps(int64_t cols) {
    if (cols <= 0 || cols % kTileCols != 0) return 0;
    const int64_t nch = cols / kTileCols;
    for (int w = 20; w >= 8; --w)
        if (nch % w == 0) return w;
    return 0;
}

TileGeometry tile_geometry(const Weight& W) {
    TileGeometry g;
    if (W.rows <= 0 || W.cols <= 0) return g;
    if (is_q6k(W)) {
        if (W.cols % 256 != 0 || (W.format == WeightFormat::TILED && (W.bits != 6 || W.group_size != 16)))
            return g;
        g.kind = 6, g.nibble_cols = W.cols, g.group_nibbles = 16, g.code_bytes = 1536, g.sb_bytes = 160;
    } else {
        if (W.format != WeightFormat::AFFINE && W.format != WeightFormat::TILED) return g;
        const bool groups = W.bits == 4 ? (W.group_size == 32 || W.group_size == 64 || W.group_size == 128)
                                        : W.bits == 8 && (W.group_size == 32 || W.group_size == 64);
        if (!groups || W.cols % kTileCols != 0) return g;
        if (W.sb_dtype != DType::BF16 && W.sb_dtype != DType::F16 && W.sb_dtype != DType::F32) return g;
        g.kind = W.bits, g.nibble_cols = W.cols * W.bits / 4, g.group_nibbles = W.group_size * W.bits / 4;
        g.code_bytes = 1024, g.sb_bytes = 32 * (kTileCols / g.group_nibbles) * int(dtype_size(W.sb_dtype));
    }
    g.nchunks = g.nibble_cols / kTileCols;
    g.warps = tiled_warps(g.nibble_cols);
    g.ok = g.warps > 0;
    return g;
}

bool tiles_supported(const Weight& W) { return W.format != WeightFormat::TILED && tile_geometry(W).ok; }

Weight tiled_form(const Weight& W) {
    Weight A = W;
    A.format = WeightFormat::TILED;
    if (is_q6k(W)) A.bits = 6, A.group_size = 16, A.sb_dtype = DType::F16;
    A.data = A.scales = A.biases = nullptr;
    return A;
}

int64_t tiled_code_bytes(const Weight& W) { return tiles_of(W) * tile_geometry(W).nchunks * tile_geometry(W).code_bytes; }
int64_t tiled_sb_bytes(const Weight& W) { return tiles_of(W) * tile_geometry(W).nchunks * tile_geometry(W).sb_bytes; }

namespace {

// Q6_K: chunk = 128 columns = 8 groups G of 16 = k-steps s = G. Lane (g, t)'s register r of k-step s (0: row g,
// 1: row g+8, 2 / 3: the same at k + 8) holds the 6-bit codes q (0..63) of columns 16s + 4t + 2·(r / 2) + e (e =
// 0, 1: the low / high 16-bit half) at bits 6i..6i+5 (i = 4·(s % 2) + r) of stream e of its words 3m..3m+2 (m =
// s / 2); word 4p + c of the lane is 32-bit word c of its 16 bytes in piece p. int8 sc [lane][4] = {(g, t), (g+8,
// t), (g, t+4), (g+8, t+4)}, then fp16 d [g][h] (the row's 256-column block's d, repeated in its two chunks).
void tile_q6k(const Weight& W, TiledWeight& T) {
    const int64_t tiles = tiles_of(W), nch = W.cols / 128, nblk = W.cols / 256;
    const auto* src = static_cast<const uint8_t*>(W.data);
    parallel_for(tiles, 16, [&](int64_t tile0, int64_t tile1) {
        int8_t codes[256];
        float scale[16], mn[16];
        for (int64_t tile = tile0; tile < tile1; ++tile)
            for (int r16 = 0; r16 < 16; ++r16) {
                const int64_t row = tile * kTileRows + r16;
                if (row >= W.rows) continue;
                const int g = r16 % 8, h = r16 / 8;
                for (int64_t b = 0; b < nblk; ++b) {
                    const uint8_t* blk = src + (row * nblk + b) * 210;
                    ggml_decompose(GgmlType::Q6_K, blk, codes, scale, mn);
                    for (int cc = 0; cc < 2; ++cc) {  // the block's two chunks
                        const int64_t ch = b * 2 + cc, bi = tile * nch + ch;
                        uint8_t* code = T.codes.data() + bi * 1536;
                        uint8_t* sb = T.sb.data() + bi * 160;
                        const int8_t* q = codes + cc * 128;
                        for (int t = 0; t < 4; ++t) {
                            const int lane = 4 * g + t;
                            uint32_t w[12] = {};
                            for (int s = 0; s < 8; ++s)
                                for (int r = h; r < 4; r += 2)  // this row's registers
                                    for (int e = 0; e < 2; ++e) {
                                        const uint32_t v = uint32_t(q[16 * s + 4 * t + 2 * (r / 2) + e] + 32);
                                        const int o = 6 * (4 * (s % 2) + r), wi = 3 * (s / 2) + o / 16, b = o % 16;
                                        w[wi] |= ((v << b) & 0xffffu) << (16 * e);  // the bits that fit this half
                                        if (b > 10) w[wi + 1] |= (v >> (16 - b)) << (16 * e);  // the rest
                                    }
                            for (int wi = 0; wi < 12; ++wi) {  // OR: the other row half fills the other bits
                                uint32_t cur;
                                uint8_t* dst = code + ((wi / 4) * 32 + lane) * 16 + (wi % 4) * 4;
                                std::memcpy(&cur, dst, 4);
                                cur |= w[wi];
                                std::memcpy(dst, &cur, 4);
                            }
                        }
                        for (int G = 0; G < 8; ++G) sb[(4 * g + G % 4) * 4 + 2 * (G / 4) + h] = blk[192 + cc * 8 + G];
                        std::memcpy(sb + 128 + (g * 2 + h) * 2, blk + 208, 2);
                    }
                }
            }
    });
}

}  // namespace

Expected<TiledWeight> tile_weight(const Weight& W) {
    EMBER_REQUIRE(tiles_supported(W),
                  "tile_weight: needs a 4-bit (group 32/64/128) or 8-bit (group 32/64) affine weight with bf16/f16/f32 "
                  "scales, or GGML Q6_K, and a column count that is a multiple of 128 with a divisor of the nibble "
                  "columns / 128 in [8, 20] (got %lld×%lld, %d-bit, group %d)",
                  static_cast<long long>(W.rows), static_cast<long long>(W.cols), W.bits, W.group_size);
    if (is_q6k(W)) {
        EMBER_REQUIRE(W.data, "tile_weight: null data");
        TiledWeight T;
        T.codes.assign(static_cast<size_t>(tiled_code_bytes(W)), 0);
        T.sb.assign(static_cast<size_t>(tiled_sb_bytes(W)), 0);
        tile_q6k(W, T);
        T.w = tiled_form(W);
        T.w.data = T.codes.data(), T.w.scales = T.sb.data();
        return T;
    }
    EMBER_REQUIRE(W.data && W.scales && W.biases, "tile_weight: null data, scales or biases");
    const TileGeometry geo = tile_geometry(W);
    const int64_t tiles = tiles_of(W), nch = geo.nchunks;
    const size_t es = dtype_size(W.sb_dtype);
    TiledWeight T;
    T.codes.assign(static_cast<size_t>(tiled_code_bytes(W)), 0);
    T.sb.assign(static_cast<size_t>(tiled_sb_bytes(W)), 0);
    const auto* src = static_cast<const uint8_t*>(W.data);
    const auto* sc = static_cast<const uint8_t*>(W.scales);
    const auto* bi = static_cast<const uint8_t*>(W.biases);
    const int64_t rb = geo.nibble_cols / 2, sbc = geo.sb_bytes;
    parallel_for(tiles, 64, [&](int64_t tile0, int64_t tile1) {
        for (int64_t tile = tile0; tile < tile1; ++tile)
            for (int64_t ch = 0; ch < nch; ++ch) {
                uint8_t* out = T.codes.data() + (tile * nch + ch) * 1024;
                uint8_t* so = T.sb.data() + (tile * nch + ch) * sbc;
                visit_affine_chunk(
                    W, geo, tile, ch,
                    [&](int64_t row, int off, const int (&cols)[8]) {
                        const uint8_t* r = src + row * rb + ch * (kTileCols / 2);
                        uint32_t word = 0;
                        for (int p = 0; p < 8; ++p)
                            word |= uint32_t((r[cols[p] / 2] >> (4 * (cols[p] & 1))) & 15) << (4 * p);
                        std::memcpy(out + off, &word, 4);
                    },
                    [&](int64_t, int64_t gi, size_t off) {
                        std::memcpy(so + off, sc + gi * es, es);
                        std::memcpy(so + off + es, bi + gi * es, es);
                    });
            }
    });
    T.w = tiled_form(W);
    T.w.data = T.codes.data(), T.w.scales = T.sb.data();
    return T;
}

Status untile_weight(const Weight& T, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales,
                     std::vector<uint8_t>& biases) {
    const TileGeometry geo = tile_geometry(T);
    EMBER_REQUIRE(T.format == WeightFormat::TILED && geo.ok && geo.kind != 6 && T.data && T.scales,
                  "untile_weight: not a tiled affine weight");
    const int64_t tiles = tiles_of(T), nch = geo.nchunks, ng = T.cols / T.group_size;
    const size_t es = dtype_size(T.sb_dtype);
    const int64_t rb = geo.nibble_cols / 2, sbc = geo.sb_bytes;
    codes.assign(static_cast<size_t>(T.rows * rb), 0);
    scales.assign(static_cast<size_t>(T.rows * ng) * es, 0);
    biases.assign(scales.size(), 0);
    const auto* in = static_cast<const uint8_t*>(T.data);
    const auto* sb = static_cast<const uint8_t*>(T.scales);
    for (int64_t tile = 0; tile < tiles; ++tile)
        for (int64_t ch = 0; ch < nch; ++ch) {
            const uint8_t* blk = in + (tile * nch + ch) * 1024;
            const uint8_t* sbk = sb + (tile * nch + ch) * sbc;
            visit_affine_chunk(
                T, geo, tile, ch,
                [&](int64_t row, int off, const int (&cols)[8]) {
                    uint8_t* r = codes.data() + row * rb + ch * (kTileCols / 2);
                    uint32_t word;
                    std::memcpy(&word, blk + off, 4);
                    for (int p = 0; p < 8; ++p)
                        r[cols[p] / 2] = static_cast<uint8_t>(r[cols[p] / 2] | ((word >> (4 * p)) & 15) << (4 * (cols[p] & 1)));
                },
                [&](int64_t, int64_t gi, size_t off) {
                    std::memcpy(scales.data() + gi * es, sbk + off, es);
                    std::memcpy(biases.data() + gi * es, sbk + off + es, es);
                });
        }
    return Status::ok();
}

}  // namespace ember
