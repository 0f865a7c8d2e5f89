// The GEMV phase of the persistent decode kernel (persistent_decode.h): y = x'·Wᵀ (+ y) for AFFINE 4-bit W.
//
// Producer (one warp): for every GEMV phase of the launch, in order, for each 16-row tile of this block and each
// K chunk of ≤ kc columns, one ring slot: the 16 code rows by 1-D bulk copies (row stride RS ≡ 64 mod 128 bytes,
// so that the consumers' 16-byte reads are free of bank conflicts), then the rows' scales and biases (bulk when
// 16-byte aligned, else copied by the lanes). It never waits for activations, only for a free slot, so the
// weights of the next phases stream while the consumers wait for their inputs.
//
// Consumers (8 warps): stage x' = pre(x) once per phase in the mma B-fragment layout (hi + lo bf16, per-group
// sums X), then per slot warp w multiplies segments w, w + 8 (128 columns each) of the 16 rows: 8 m16n8k16 steps for x hi and
// 8 for x lo, the codes as exact bf16 16 + q. Segment-local element e of k-step s and lane (g, t):
//   k = 2t, 2t+1 ↔ e0, e0 + 4;   k = 2t + 8, 2t + 9 ↔ e0 + 1, e0 + 5;   e0 = 32t + 8⌊s/2⌋ + 2(s mod 2)
// (lane t's 16 code bytes are elements 32t .. 32t + 31: linear_gemv_mma.cuh pair16 picks the pairs). The B
// column of an element is its group within the segment (32t / gs), so D[row][c] is the (16 + q)·x' sum of group c
// and the per-group affine terms are applied once per segment: acc += s·D + (b − 16s)·X (X = Σ x' over the group).
// The warps' row sums are added in a fixed order at the end of each tile.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/decode/persistent_decode_sync.cuh"
#include "ops/linear/linear_gemv_mma.cuh"

namespace ember::cuda::pd::dev {

using ember::cuda::detail::mma;
using ember::cuda::detail::pair16;
using ember::cuda::detail::split2;

__device__ __forceinline__ int row_stride(int kc) { return (kc / 2 + 127) / 128 * 128 + 64; }
__device__ __forceinline__ int scale_es(int st) { return st == PD_F32 ? 4 : 2; }
// Bytes of one row's scales in a slot (16-byte multiple).
__device__ __forceinline__ int scale_row_bytes(int kc, int gs, int st) { return ((kc / gs) * scale_es(st) + 15) / 16 * 16; }

// The slot layout of a GEMV phase: codes of row r at r·RS, its scales at 16·RS + r·SBR, its biases at 16·RS +
// 16·SBR + r·SBR. When the whole K fits one slot (and a row's scales are a 16-byte multiple), a tile's 16 rows are
// contiguous in memory, so the slot is three 1-D bulk copies with RS = K/2, SBR = (K/gs)·es (two-way bank
// conflicts on the code reads); otherwise each row is its own copy of ≤ kc columns and RS ≡ 64 (mod 128) bytes
// keeps the reads conflict-free. contiguous = false forces the per-row form (EMBER_PD_DEBUG bit 1).
struct SlotLayout {
    int RS, SBR;
    bool contig;
};
__device__ __forceinline__ SlotLayout slot_layout(const PdGemv& op, int kc, bool allow_contig) {
    const int es = scale_es(op.st), rsb = (op.K / op.gs) * es;
    const bool contig = allow_contig && op.K <= kc && rsb % 16 == 0 &&
                        ((reinterpret_cast<uintptr_t>(op.scales) | reinterpret_cast<uintptr_t>(op.biases)) & 15u) == 0;
    return contig ? SlotLayout{op.K / 2, rsb, true} : SlotLayout{row_stride(kc), scale_row_bytes(kc, op.gs, op.st), false};
}

// ---- producer -----------------------------------------------------------------------------------------------
__device__ __forceinline__ void produce_gemv(const PdGemv op, const Smem& S, RingPos& it, int lane, int blk,
                                             int grid, bool allow_contig, bool use_cp_async) {
    const int rows = op.rows, K = op.K, gs = op.gs, kc = S.kc, es = scale_es(op.st);
    const SlotLayout SL = slot_layout(op, kc, allow_contig);
    const int RS = SL.RS, SBR = SL.SBR;
    const int ngroups = K / gs, nch = (K + kc - 1) / kc;
    const unsigned nslots = unsigned(S.nslots);
    const int64_t tiles = (rows + 15) / 16;
    int64_t t0, t1;
    task_range(tiles, grid, blk, t0, t1);
    for (int64_t tile = t0; tile < t1; ++tile) {
        const int row0 = int(tile * 16), nvalid = min(16, rows - row0);
        for (int ch = 0; ch < nch; ++ch) {
            const int slot = it.slot;
            if (it.n >= nslots) mbar_wait(&S.empty[slot], it.parity ^ 1u);  // the consumers' release of round − 1
            uint8_t* base = S.ring + size_t(slot) * S.slot_bytes;
            const int width = min(kc, K - ch * kc), cb = width / 2, gch = width / gs, sbytes = gch * es;
            const int64_t goff = int64_t(row0) * ngroups + int64_t(ch) * (kc / gs);
            const uint8_t* sc = static_cast<const uint8_t*>(op.scales) + goff * es;
            const uint8_t* bi = static_cast<const uint8_t*>(op.biases) + goff * es;
            const uint8_t* wsrc = op.w + int64_t(row0) * (K / 2) + int64_t(ch) * (kc / 2);
            if (SL.contig) {  // three copies: the tile's code rows, scale rows, bias rows (each contiguous)
                if (lane == 0) mbar_arrive_expect_tx(&S.full[slot], unsigned(nvalid) * unsigned(cb + 2 * sbytes));
                __syncwarp();
                if (lane == 0) bulk_copy(base, wsrc, unsigned(nvalid * cb), &S.full[slot]);
                if (lane == 1) bulk_copy(base + 16 * RS, sc, unsigned(nvalid * sbytes), &S.full[slot]);
                if (lane == 2) bulk_copy(base + 16 * RS + 16 * SBR, bi, unsigned(nvalid * sbytes), &S.full[slot]);
                if (lane != 0) mbar_arrive(&S.full[slot]);
                it.next(S.nslots);
                continue;
            }
            if (use_cp_async) {  // every lane copies 16-byte pieces of the code rows and 4-byte ones of the scales
                const int pr = cb / 16, npc = nvalid * pr, sw = sbytes / 4;
                for (int i = lane; i < npc; i += 32) {
                    const int r = i / pr, o = (i % pr) * 16;
                    cp_async16(base + r * RS + o, wsrc + int64_t(r) * (K / 2) + o);
                }
                for (int i = lane; i < nvalid * sw; i += 32) {
                    const int r = i / sw, o = (i % sw) * 4;
                    cp_async4(base + 16 * RS + r * SBR + o, sc + int64_t(r) * ngroups * es + o);
                    cp_async4(base + 16 * RS + 16 * SBR + r * SBR + o, bi + int64_t(r) * ngroups * es + o);
                }
                cp_async_arrive(&S.full[slot]);  // (noinc: this lane's one expected arrival)
                it.next(S.nslots);
                continue;
            }
            const bool bulk_sb = ((reinterpret_cast<uintptr_t>(sc) | reinterpret_cast<uintptr_t>(bi)) & 15u) == 0 &&
                                 (ngroups * es) % 16 == 0 && sbytes % 16 == 0;
            const unsigned tx = unsigned(nvalid) * unsigned(cb) + (bulk_sb ? 2u * unsigned(nvalid * sbytes) : 0u);
            if (lane == 0) mbar_arrive_expect_tx(&S.full[slot], tx);
            __syncwarp();
            if (lane < nvalid) {
                bulk_copy(base + lane * RS, wsrc + int64_t(lane) * (K / 2), unsigned(cb), &S.full[slot]);
            } else if (lane >= 16 && lane - 16 < nvalid) {
                const int r = lane - 16;
                uint8_t* ds = base + 16 * RS + r * SBR;
                uint8_t* db = base + 16 * RS + 16 * SBR + r * SBR;
                const uint8_t* ss = sc + int64_t(r) * ngroups * es;
                const uint8_t* sbb = bi + int64_t(r) * ngroups * es;
                if (bulk_sb) {
                    bulk_copy(ds, ss, unsigned(sbytes), &S.full[slot]);
                    bulk_copy(db, sbb, unsigned(sbytes), &S.full[slot]);
                } else if (es == 4) {
                    for (int i = 0; i < gch; ++i) {
                        reinterpret_cast<uint32_t*>(ds)[i] = __ldg(reinterpret_cast<const uint32_t*>(ss) + i);
                        reinterpret_cast<uint32_t*>(db)[i] = __ldg(reinterpret_cast<const uint32_t*>(sbb) + i);
                    }
                } else {
                    for (int i = 0; i < gch; ++i) {
                        reinterpret_cast<uint16_t*>(ds)[i] = __ldg(reinterpret_cast<const unsigned short*>(ss) + i);
                        reinterpret_cast<uint16_t*>(db)[i] = __ldg(reinterpret_cast<const unsigned short*>(sbb) + i);
                    }
                }
            }
            if (lane != 0) mbar_arrive(&S.full[slot]);  // after this lane's plain copies (release)
            it.next(S.nslots);
        }
    }
}

// ---- consumers ----------------------------------------------------------------------------------------------
// Stage x' = pre(x) for all segments: B fragments {b0 hi, b1 hi, b0 lo, b1 lo} of step s and lane t at seg·512 +
// s·64 + t·16, then the group sums X[seg·4 + c] (floats after the fragments). Warp w stages segments w + 8j in
// batches of NB, each batch's loads issued together (one L2 round trip); the RMSNorm weights are loaded before
// the wait for the previous phase (W), and an RMSNorm input fits one batch (K ≤ 8192: the recorder checks), so
// its Σx² comes from the same registers. Ends with a barrier.
template <int PRE, int NB>
__device__ __forceinline__ void stage_x_pre(const PdGemv& op, const Smem& S, int tid, const Waiter& W) {
    constexpr bool norm = PRE == PD_PRE_RMSNORM, glu = PRE == PD_PRE_SWIGLU;
    const int warp = tid >> 5, lane = tid & 31, s = lane >> 2, t = lane & 3;
    const int K = op.K, nseg = (K + 127) / 128, gs = op.gs;
    const int eoff = 32 * t + 8 * (s >> 1) + 2 * (s & 1);  // e0 − seg·128; elements e0, e0+4, e0+1, e0+5
    auto valid = [&](int seg) { return seg < nseg && seg * 128 + 32 * t < K; };  // K % 32 == 0: whole lane blocks
    float nw[norm ? NB : 1][4];
    if constexpr (norm) {
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            const int seg = warp + kConsumerWarps * j, e0 = seg * 128 + eoff;
            const bool ok = valid(seg);
            const float2 a = ok ? __ldg(reinterpret_cast<const float2*>(op.norm_w + e0)) : make_float2(0.f, 0.f);
            const float2 b = ok ? __ldg(reinterpret_cast<const float2*>(op.norm_w + e0 + 4)) : make_float2(0.f, 0.f);
            nw[j][0] = a.x, nw[j][2] = a.y, nw[j][1] = b.x, nw[j][3] = b.y;
        }
    }
    W.wait(tid);
    float* X = reinterpret_cast<float*>(S.work + nseg * 512);
    const int nb = (nseg + kConsumerWarps * NB - 1) / (kConsumerWarps * NB);  // the same for every warp
    for (int b0 = 0; b0 < nb; ++b0) {
        float v[NB][4], u[glu ? NB : 1][4];
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            const int seg = warp + kConsumerWarps * (b0 * NB + j), e0 = seg * 128 + eoff;
            const bool ok = valid(seg);
            const float2 a = ok ? __ldcg(reinterpret_cast<const float2*>(op.x + e0)) : make_float2(0.f, 0.f);
            const float2 c = ok ? __ldcg(reinterpret_cast<const float2*>(op.x + e0 + 4)) : make_float2(0.f, 0.f);
            v[j][0] = a.x, v[j][2] = a.y, v[j][1] = c.x, v[j][3] = c.y;
            if constexpr (glu) {
                const float2 ua = ok ? __ldcg(reinterpret_cast<const float2*>(op.x + K + e0)) : make_float2(0.f, 0.f);
                const float2 uc = ok ? __ldcg(reinterpret_cast<const float2*>(op.x + K + e0 + 4)) : make_float2(0.f, 0.f);
                u[j][0] = ua.x, u[j][2] = ua.y, u[j][1] = uc.x, u[j][3] = uc.y;
            }
        }
        float inv = 1.f;
        if constexpr (norm) {  // one batch (nb == 1)
            float ss = 0.f;
#pragma unroll
            for (int j = 0; j < NB; ++j)
#pragma unroll
                for (int i = 0; i < 4; ++i) ss += v[j][i] * v[j][i];
            inv = 1.0f / sqrtf(consumer_sum(ss, S.misc) / static_cast<float>(K) + op.eps);
        }
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            const int seg = warp + kConsumerWarps * (b0 * NB + j);
            if (seg >= nseg) continue;  // warp-uniform (the shuffles below)
            float x[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                if constexpr (norm) x[i] = v[j][i] * inv * nw[j][i];  // add_rmsnorm's op order
                else if constexpr (glu) x[i] = __fmul_rn(v[j][i] / (1.0f + expf(-v[j][i])), u[j][i]);  // swiglu1
                else x[i] = v[j][i];
            }
            uint32_t b0h, b0l, b1h, b1l;
            float s0, s1, s2, s3;
            split2(x[0], x[1], b0h, b0l, s0, s1);
            split2(x[2], x[3], b1h, b1l, s2, s3);
            *reinterpret_cast<uint4*>(S.work + seg * 512 + s * 64 + t * 16) = make_uint4(b0h, b1h, b0l, b1l);
            float sum = (s0 + s1) + (s2 + s3);
            // lanes of one group: same column 32t / gs, any s
            sum += __shfl_xor_sync(0xffffffffu, sum, 4);
            sum += __shfl_xor_sync(0xffffffffu, sum, 8);
            sum += __shfl_xor_sync(0xffffffffu, sum, 16);
            if (gs >= 64) sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            if (gs >= 128) sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            if (s == 0 && t % (gs / 32) == 0) X[seg * 4 + (32 * t) / gs] = sum;
        }
    }
    consumer_sync();
}

__device__ __forceinline__ void stage_x(const PdGemv& op, const Smem& S, int tid, const Waiter& W) {
    if (op.pre == PD_PRE_RMSNORM) stage_x_pre<PD_PRE_RMSNORM, 8>(op, S, tid, W);  // 8 warps × 8 × 128 = 8192
    else if (op.pre == PD_PRE_SWIGLU) stage_x_pre<PD_PRE_SWIGLU, 4>(op, S, tid, W);
    else stage_x_pre<PD_PRE_NONE, 8>(op, S, tid, W);
}

// A GEMV phase's shape constants, computed once per phase (registers, not reloaded from the phase table).
struct GemvGeo {
    int K, gs, st, es, kc, RS, SBR, nseg, gps, ngroups;
    int gpc, spc;  // groups and 128-column segments per K chunk
    bool act;      // this lane holds a non-zero B column: g == (32·t) / gs
};
__device__ __forceinline__ GemvGeo gemv_geo(const PdGemv& op, int kc, bool allow_contig, int lane) {
    GemvGeo g;
    g.K = op.K, g.gs = op.gs, g.st = op.st, g.es = scale_es(op.st), g.kc = kc;
    const SlotLayout SL = slot_layout(op, kc, allow_contig);
    g.RS = SL.RS, g.SBR = SL.SBR;
    g.nseg = (op.K + 127) / 128, g.gps = 128 / op.gs, g.ngroups = op.K / op.gs;
    g.gpc = kc / op.gs, g.spc = kc / 128;
    g.act = (lane >> 2) == (32 * (lane & 3)) / op.gs;
    return g;
}

// The scales (or biases) of groups c0 and c0 + 1 of one row at p (two: the row's segment has ≥ 2 groups, so both
// are there and the pair is 4- / 8-byte aligned; else only c0).
template <int ST>
__device__ __forceinline__ float2 load_pair(const uint8_t* p, bool two) {
    if constexpr (ST == PD_F32) {
        return two ? *reinterpret_cast<const float2*>(p) : make_float2(*reinterpret_cast<const float*>(p), 0.f);
    } else {
        const uint32_t u = two ? *reinterpret_cast<const uint32_t*>(p) : uint32_t(*reinterpret_cast<const uint16_t*>(p));
        if constexpr (ST == PD_BF16) return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
        else return make_float2(__half2float(__ushort_as_half((unsigned short)(u & 0xffffu))),
                                __half2float(__ushort_as_half((unsigned short)(u >> 16))));
    }
}

// Segments ls0 + 8u (u < NS, all < nsc) of chunk ch of the 16 rows in `slot_base` (each 128 columns), their MMA
// chains interleaved, accumulated into acc0 (row g) and acc1 (row g + 8) of this lane. The scales, biases and
// group sums of the lane's groups c = 2t, 2t + 1 are loaded before the MMAs (their latency under the chains);
// a group past the matrix or the segment contributes exactly nothing (its terms are zero).
template <int ST, int NS>
__device__ __forceinline__ void gemv_segments(const GemvGeo& G, const Smem& S, const uint8_t* slot_base, int ch,
                                              int ls0, int lane, bool epilogue, float& acc0, float& acc1) {
    const int g = lane >> 2, t = lane & 3, c0 = 2 * t;
    const bool two = G.gps >= 2;
    uint4 wg[NS], wg8[NS];
    const uint4* xp[NS];
    float2 sc[NS], sc8[NS], bi[NS], bi8[NS], X[NS];
    const uint8_t* scb = slot_base + 16 * G.RS;
    const uint8_t* bib = scb + 16 * G.SBR;
    const float* Xs = reinterpret_cast<const float*>(S.work + G.nseg * 512);
#pragma unroll
    for (int u = 0; u < NS; ++u) {
        const int ls = ls0 + kConsumerWarps * u, gseg = ch * G.spc + ls;
        const uint8_t* cr = slot_base + g * G.RS + ls * 64 + t * 16;
        wg[u] = *reinterpret_cast<const uint4*>(cr);
        wg8[u] = *reinterpret_cast<const uint4*>(cr + 8 * G.RS);
        // lanes whose B column is unused read zeros (S.zero: 8 steps × 64 bytes) instead of a branch per step
        xp[u] = reinterpret_cast<const uint4*>(G.act ? S.work + gseg * 512 + t * 16 : S.zero);
        // valid groups of this segment: min(gps, groups left in the matrix)
        const int lim = min(G.gps, G.ngroups - (ch * G.gpc + ls * G.gps));
        sc[u] = sc8[u] = bi[u] = bi8[u] = X[u] = make_float2(0.f, 0.f);
        if (c0 < lim) {
            const int off = (ls * G.gps + c0) * G.es;
            sc[u] = load_pair<ST>(scb + g * G.SBR + off, two);
            sc8[u] = load_pair<ST>(scb + (g + 8) * G.SBR + off, two);
            bi[u] = load_pair<ST>(bib + g * G.SBR + off, two);
            bi8[u] = load_pair<ST>(bib + (g + 8) * G.SBR + off, two);
            X[u] = two ? *reinterpret_cast<const float2*>(Xs + gseg * 4 + c0) : make_float2(Xs[gseg * 4 + c0], 0.f);
            if (c0 + 1 >= lim) sc[u].y = sc8[u].y = bi[u].y = bi8[u].y = X[u].y = 0.f;
        }
    }
    float Dh[NS][4], Dl[NS][4];
#pragma unroll
    for (int u = 0; u < NS; ++u)
#pragma unroll
        for (int i = 0; i < 4; ++i) Dh[u][i] = Dl[u][i] = 0.f;
#pragma unroll
    for (int s = 0; s < 8; ++s) {
        const int wi = s >> 1, j = 2 * (s & 1);
#pragma unroll
        for (int u = 0; u < NS; ++u) {
            const uint32_t w0 = wi == 0 ? wg[u].x : wi == 1 ? wg[u].y : wi == 2 ? wg[u].z : wg[u].w;
            const uint32_t w8 = wi == 0 ? wg8[u].x : wi == 1 ? wg8[u].y : wi == 2 ? wg8[u].z : wg8[u].w;
            const uint32_t a0 = pair16(w0, j), a2 = pair16(w0, j + 1), a1 = pair16(w8, j), a3 = pair16(w8, j + 1);
            const uint4 b = xp[u][s * 4];
            mma(Dh[u], a0, a1, a2, a3, b.x, b.y);
            mma(Dl[u], a0, a1, a2, a3, b.z, b.w);
        }
    }
    if (!epilogue) {  // timing only (PdLaunch::debug bit 3)
#pragma unroll
        for (int u = 0; u < NS; ++u) acc0 += Dh[u][0] + Dl[u][1], acc1 += Dh[u][2] + Dl[u][3];
        return;
    }
    // D sums (16 + q)·x': y = s·Σq·x' + b·Σx' = s·D + (b − 16·s)·X
#pragma unroll
    for (int u = 0; u < NS; ++u) {
        acc0 = fmaf(sc[u].x, Dh[u][0] + Dl[u][0], fmaf(fmaf(-16.f, sc[u].x, bi[u].x), X[u].x, acc0));
        acc1 = fmaf(sc8[u].x, Dh[u][2] + Dl[u][2], fmaf(fmaf(-16.f, sc8[u].x, bi8[u].x), X[u].x, acc1));
        acc0 = fmaf(sc[u].y, Dh[u][1] + Dl[u][1], fmaf(fmaf(-16.f, sc[u].y, bi[u].y), X[u].y, acc0));
        acc1 = fmaf(sc8[u].y, Dh[u][3] + Dl[u][3], fmaf(fmaf(-16.f, sc8[u].y, bi8[u].y), X[u].y, acc1));
    }
}

// This warp's segments of one slot: ls0 and ls0 + 8 when both are in the chunk (nsc of them), else ls0 alone.
template <int ST>
__device__ __forceinline__ void gemv_slot(const GemvGeo& G, const Smem& S, const uint8_t* sb, int ch, int ls0, int nsc,
                                          int lane, bool epilogue, float& acc0, float& acc1) {
    if (ls0 + kConsumerWarps < nsc) gemv_segments<ST, 2>(G, S, sb, ch, ls0, lane, epilogue, acc0, acc1);
    else gemv_segments<ST, 1>(G, S, sb, ch, ls0, lane, epilogue, acc0, acc1);
}

__device__ __forceinline__ void consume_gemv(const PdGemv op, const Smem& S, RingPos& it, int tid, int blk,
                                             int grid, const Waiter& W, int debug) {
    stage_x(op, S, tid, W);
    const bool timed = W.tr != nullptr;  // trace: ring waits of thread 0, summed in a register, stored at the end
    uint64_t ring_ns = 0;
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const GemvGeo G = gemv_geo(op, S.kc, (debug & 2) == 0, lane);
    const int K = G.K, kc = G.kc, nch = (K + kc - 1) / kc, rows = op.rows, accum = op.accum;
    float* const y = op.y;
    const int64_t tiles = (rows + 15) / 16;
    int64_t t0, t1;
    task_range(tiles, grid, blk, t0, t1);
    int par = 0;
    for (int64_t tile = t0; tile < t1; ++tile) {
        float acc0 = 0.f, acc1 = 0.f;
        for (int ch = 0; ch < nch; ++ch) {
            const int slot = it.slot;
            const uint64_t w0 = timed ? globaltimer() : 0;
            mbar_wait(&S.full[slot], it.parity);
            if (timed) ring_ns += globaltimer() - w0;
            const int width = min(kc, K - ch * kc), nsc = (width + 127) / 128;  // ≤ 16 segments: ≤ 2 per warp
            const uint8_t* sb = S.ring + size_t(slot) * S.slot_bytes;
            if (warp < nsc && !(debug & 1)) {
                const bool epi = (debug & 8) == 0;
                if (G.st == PD_BF16) gemv_slot<PD_BF16>(G, S, sb, ch, warp, nsc, lane, epi, acc0, acc1);
                else if (G.st == PD_F16) gemv_slot<PD_F16>(G, S, sb, ch, warp, nsc, lane, epi, acc0, acc1);
                else gemv_slot<PD_F32>(G, S, sb, ch, warp, nsc, lane, epi, acc0, acc1);
            }
            mbar_release(&S.empty[slot], lane);
            it.next(S.nslots);
        }
        acc0 += __shfl_xor_sync(0xffffffffu, acc0, 1);
        acc0 += __shfl_xor_sync(0xffffffffu, acc0, 2);
        acc1 += __shfl_xor_sync(0xffffffffu, acc1, 1);
        acc1 += __shfl_xor_sync(0xffffffffu, acc1, 2);
        if (debug & 32) {  // timing only: each warp stores its own partial (wrong results)
            const int row = int(tile * 16) + g;
            if (t == 0 && warp == 0 && row < rows) __stcg(y + row, acc0);
            continue;
        }
        float* red = S.red + par * kConsumerWarps * 16;
        if (t == 0) {
            red[warp * 16 + g] = acc0;
            red[warp * 16 + g + 8] = acc1;
        }
        consumer_sync();
        if (warp == 0 && lane < 16) {
            float sum = 0.f;
#pragma unroll
            for (int w = 0; w < kConsumerWarps; ++w) sum += red[w * 16 + lane];
            const int row = int(tile * 16) + lane;
            if (row < rows) __stcg(y + row, accum ? __ldcg(y + row) + sum : sum);
        }
        par ^= 1;
    }
    if (timed) W.tr[3] = ring_ns;
}

}  // namespace ember::cuda::pd::dev
