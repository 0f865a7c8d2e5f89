// bench/gpu/gemm_bench.cu: the GEMM scoreboard of the prefill issue — ember::cuda::gemm_q (the tensor-core affine
// GEMM, linear_gemm_q.h) in both precisions beside cuBLAS bf16 on dense bf16 weights of the same shape (the
// dequantized weights, the peer), and the exact GEMV in 8-token chunks (linear()'s path before gemm_q) for
// M ≤ 512, on Qwen3.5 2B / 9B / 27B projection shapes, MLX 4-bit g64 bf16 (and 8-bit g64 on a few), at
// M = 16, 64, 128, 512, 2048 tokens.
//
// Method: random data (hashed bits, never zeros); per (shape, M, kernel) a CUDA graph of `per` launches rotating
// through weight copies that together exceed 3× the L2, replayed (bench_timing.cuh), median per launch.
// TFLOP/s = 2·M·N·K / time (the GEMM's useful work; the default precision issues two tensor products per code).
// ratio = cuBLAS time / gemm_q time. Build: target gemm_bench (-DEMBER_CUDA=ON). Run: gemm_bench [--quick] [--split: only the split GEMM table].
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "bench_fill.cuh"
#include "bench_timing.cuh"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_gemm_q.h"
#include "ops/linear/linear_gemm_split.h"
#include "quant/ggml_type.h"

using namespace ember;
using namespace ember::bench;
using ember::cuda::GemmPlan;
using ember::cuda::GemmPrecision;

namespace {

struct Shape {
    const char* model;
    const char* name;
    int64_t rows, cols;
};
const Shape kShapes[] = {
    {"2B", "gdn qkv", 6144, 2048},    {"2B", "z / out", 2048, 2048},    {"2B", "mlp gate|up", 12288, 2048},
    {"2B", "mlp down", 2048, 6144},   {"9B", "gdn qkv", 8192, 4096},    {"9B", "mlp gate|up", 24576, 4096},
    {"9B", "mlp down", 4096, 12288},  {"27B", "gdn qkv", 10240, 5120},  {"27B", "mlp gate|up", 34816, 5120},
    {"27B", "mlp down", 5120, 17408},
};

struct Copies {
    std::vector<Weight> w;
    std::vector<void*> bufs;
    ~Copies() {
        for (void* p : bufs) cudaFree(p);
    }
};

Copies make_affine(int64_t rows, int64_t cols, int bits, int gs, int64_t min_bytes) {
    Copies c;
    const int64_t code = rows * cols * bits / 8, sb = rows * (cols / gs) * 2;
    const int n = int(std::max<int64_t>(2, (min_bytes + code - 1) / code));
    for (int i = 0; i < n; ++i) {
        Weight w;
        w.format = WeightFormat::AFFINE, w.rows = rows, w.cols = cols, w.bits = bits, w.group_size = gs;
        w.sb_dtype = DType::BF16;
        void* d = dmalloc(size_t(code));
        void* s = dmalloc(size_t(sb));
        void* b = dmalloc(size_t(sb));
        fill_bytes<<<1024, 256>>>(static_cast<uint8_t*>(d), size_t(code), 11 + i);
        fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(s), size_t(sb / 2), 21 + i, 0.01f);
        fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(b), size_t(sb / 2), 31 + i, 0.05f);
        w.data = d, w.scales = s, w.biases = b;
        c.w.push_back(w);
        c.bufs.insert(c.bufs.end(), {d, s, b});
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    return c;
}

Copies make_dense_bf16(int64_t rows, int64_t cols, int64_t min_bytes) {
    Copies c;
    const int64_t bytes = rows * cols * 2;
    const int n = int(std::max<int64_t>(2, (min_bytes + bytes - 1) / bytes));
    for (int i = 0; i < n; ++i) {
        Weight w;
        w.format = WeightFormat::DENSE, w.dtype = DType::BF16, w.rows = rows, w.cols = cols;
        void* d = dmalloc(size_t(bytes));
        fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(d), size_t(rows * cols), 41 + i, 0.02f);
        w.data = d;
        c.w.push_back(w);
        c.bufs.push_back(d);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    return c;
}

Copies make_ggml(GgmlType t, int64_t rows, int64_t cols, int64_t min_bytes) {
    Copies c;
    const GgmlTypeTraits tr = ggml_type_traits(t);
    const int64_t blocks = rows * cols / tr.block_elems, bytes = blocks * tr.block_bytes;
    const int f0 = t == GgmlType::Q6_K ? 208 : 0, f1 = (t == GgmlType::Q5_K || t == GgmlType::Q4_K) ? 2 : -1;
    const int n = int(std::max<int64_t>(2, (min_bytes + bytes - 1) / bytes));
    for (int i = 0; i < n; ++i) {
        Weight w;
        w.format = WeightFormat::GGML, w.ggml_type = t, w.rows = rows, w.cols = cols;
        void* d = dmalloc(size_t(bytes));
        fill_bytes<<<1024, 256>>>(static_cast<uint8_t*>(d), size_t(bytes), 51 + i);
        fix_halves<<<1024, 256>>>(static_cast<uint8_t*>(d), size_t(blocks), int(tr.block_bytes), f0, f1, 61 + i);
        w.data = d;
        c.w.push_back(w);
        c.bufs.push_back(d);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    return c;
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false, split_only = false, tiles_only = false;  // --tiles [C,C..]: only the forced-tile tables
    bool board = false;  // --board: only the scoreboard beside cuBLAS (GEMV chunks at M ≤ 64 only)
    std::string tile_list;
    int64_t one[5] = {0, 0, 0, -1, 0};  // --one ROWS COLS M [CONFIG SPLIT]: 20 eager calls (for a profiler), no table
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) quick = true;
        if (!std::strcmp(argv[i], "--split")) split_only = true;
        if (!std::strcmp(argv[i], "--board")) board = true;
        if (!std::strcmp(argv[i], "--tiles")) {
            tiles_only = true;
            if (i + 1 < argc && argv[i + 1][0] != '-') tile_list = argv[++i];  // e.g. 4,6,8: those configs only
        }
        if (!std::strcmp(argv[i], "--one"))
            for (int k = 0; k < 5 && i + 1 < argc && argv[i + 1][0] != '-'; ++k) one[k] = std::atoll(argv[++i]);
    }
    if (one[0] > 0) {
        Copies q = make_affine(one[0], one[1], 4, 64, 0);
        const GemmPlan plan{int(one[3]), int(one[4])};
        float* x1 = static_cast<float*>(dmalloc(size_t(one[2] * one[1]) * 4));
        float* y1 = static_cast<float*>(dmalloc(size_t(one[2] * one[0]) * 4));
        fill_f32<<<1024, 256>>>(x1, size_t(one[2] * one[1]), 7, 2.0f);
        const size_t b = ember::cuda::gemm_q_workspace_bytes(q.w[0], one[2], plan);
        void* w1 = dmalloc(b);
        for (int r = 0; r < 20; ++r) ember::cuda::gemm_q(q.w[0], x1, one[2], y1, nullptr, w1, b, GemmPrecision::FP32, plan);
        CUDA_CHECK(cudaDeviceSynchronize());
        char desc[96];
        std::printf("%s\n", ember::cuda::gemm_q_describe(q.w[0], one[2], desc, sizeof desc, plan));
        return 0;
    }
    int l2 = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    const int64_t rot = 3 * int64_t(l2);
    const std::vector<int64_t> Ms = quick ? std::vector<int64_t>{16, 128, 512} : std::vector<int64_t>{16, 64, 128, 512, 2048};
    const int64_t maxM = 2048, maxK = 17408, maxN = 34816;
    float* x = static_cast<float*>(dmalloc(size_t(maxM * maxK) * 4));
    float* y = static_cast<float*>(dmalloc(size_t(maxM * maxN) * 4));
    __nv_bfloat16* xb = static_cast<__nv_bfloat16*>(dmalloc(size_t(maxM * maxK) * 2));
    fill_f32<<<1024, 256>>>(x, size_t(maxM * maxK), 7, 2.0f);
    fill_bf16<<<1024, 256>>>(reinterpret_cast<uint16_t*>(xb), size_t(maxM * maxK), 8, 2.0f);
    size_t ws_bytes = 0;
    void* ws = nullptr;
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreate(&st));
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    CUBLAS_CHECK(cublasSetStream(h, st));
    void* cublas_ws = dmalloc(size_t(32) << 20);
    CUBLAS_CHECK(cublasSetWorkspace(h, cublas_ws, size_t(32) << 20));

    if (tiles_only) {
        // Every block tile forced (split 1 and the rule's split for it) on four shapes, M = 64 .. 2048, both precisions.
        std::printf("## forced tiles (MLX q4 g64): µs fp32-faithful / bf16 mode, TFLOP/s = 2MNK/t\n\n");
        std::printf("| shape | N×K | M | plan | fp32 µs | TFLOP/s | bf16 µs | TFLOP/s |\n|---|---|---|---|---|---|---|---|\n");
        for (const Shape& s : {kShapes[0], kShapes[4], kShapes[6], kShapes[9]}) {
            Copies q = make_affine(s.rows, s.cols, 4, 64, rot);
            for (int64_t M : {int64_t(64), int64_t(512), int64_t(2048)})
                for (int c = 0; c < ember::cuda::gemm_q_configs(); ++c) {
                    if (tile_list.empty() ? (c != 0 && c != 4 && c < 5)  // the old kernel's two best tiles, every wgmma tile
                                          : (("," + tile_list + ",").find("," + std::to_string(c) + ",") == std::string::npos))
                        continue;
                    const GemmPlan plan{c, 0};
                    const size_t need = ember::cuda::gemm_q_workspace_bytes(q.w[0], M, plan);
                    if (need > ws_bytes) {
                        if (ws) cudaFree(ws);
                        ws = dmalloc(need), ws_bytes = need;
                    }
                    auto run_q = [&](GemmPrecision p) {
                        return graph_seconds_per_launch(st, 20, [&](int i) {
                            ember::cuda::gemm_q(q.w[size_t(i) % q.w.size()], x, M, y, st, ws, ws_bytes, p, plan);
                        });
                    };
                    const double t32 = run_q(GemmPrecision::FP32), t16 = run_q(GemmPrecision::BF16);
                    const double fl = 2.0 * double(M) * double(s.rows) * double(s.cols);
                    char desc[96];
                    ember::cuda::gemm_q_describe(q.w[0], M, desc, sizeof desc, plan);
                    std::printf("| %s %s | %lld×%lld | %lld | %s | %.1f | %.1f | %.1f | %.1f |\n", s.model, s.name,
                                (long long)s.rows, (long long)s.cols, (long long)M, desc, t32 * 1e6, fl / t32 * 1e-12,
                                t16 * 1e6, fl / t16 * 1e-12);
                    std::fflush(stdout);
                }
        }
        return 0;
    }
    // The split cuBLAS GEMM (linear_gemm_split.h) on the K-quant tensors of Q4_K_M / Q5_K_M files, beside the exact
    // GEMV chunks it replaces; TFLOP/s = 2MNK/t (the fp32-faithful mode issues three bf16 products).
    if (!board) std::printf("## split GEMM (GGML blocks: dequantized hi + lo panels, cuBLAS bf16) vs the GEMV chunks\n\n");
    if (!board) std::printf("| model | shape | type | N×K | M | fp32-faithful µs | TFLOP/s | bf16-mode µs | TFLOP/s | GEMV chunks µs | chunks/split |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Shape& s : {kShapes[0], kShapes[3], kShapes[6], kShapes[9]}) {
        if (board) break;
        for (GgmlType t : {GgmlType::Q6_K, GgmlType::Q5_K}) {
            Copies g = make_ggml(t, s.rows, s.cols, rot);
            for (int64_t M : {int64_t(64), int64_t(512), int64_t(2048)}) {
                const size_t need = ember::cuda::gemm_split_workspace_bytes(g.w[0], M);
                if (need > ws_bytes) {
                    if (ws) cudaFree(ws);
                    ws = dmalloc(need), ws_bytes = need;
                }
                // (one eager call first: the per-thread cuBLAS handle cannot be created inside a graph capture)
                ember::cuda::gemm_split(g.w[0], x, M, y, st, ws, ws_bytes, GemmPrecision::FP32);
                CUDA_CHECK(cudaStreamSynchronize(st));
                auto run_s = [&](GemmPrecision p) {
                    return graph_seconds_per_launch(st, 10, [&](int i) {
                        ember::cuda::gemm_split(g.w[size_t(i) % g.w.size()], x, M, y, st, ws, ws_bytes, p);
                    });
                };
                const double t32 = run_s(GemmPrecision::FP32), t16 = run_s(GemmPrecision::BF16);
                double tgv = 0;
                if (M <= 512)
                    tgv = graph_seconds_per_launch(st, 2, [&](int i) {
                        const Weight& w = g.w[size_t(i) % g.w.size()];
                        for (int64_t k = 0; k < M; k += 8)
                            ember::cuda::linear_gemv(w, x + k * s.cols, std::min<int64_t>(8, M - k), y + k * s.rows, st);
                    });
                const double fl = 2.0 * double(M) * double(s.rows) * double(s.cols);
                char gv[48] = "—";
                if (tgv > 0) std::snprintf(gv, sizeof gv, "%.1f | %.2f", tgv * 1e6, tgv / t32);
                else std::snprintf(gv, sizeof gv, "— | —");
                std::printf("| %s | %s | %s | %lld×%lld | %lld | %.1f | %.1f | %.1f | %.1f | %s |\n", s.model, s.name,
                            ggml_type_traits(t).name, (long long)s.rows, (long long)s.cols, (long long)M, t32 * 1e6,
                            fl / t32 * 1e-12, t16 * 1e6, fl / t16 * 1e-12, gv);
                std::fflush(stdout);
            }
        }
    }
    if (split_only) return 0;
    std::printf("\n");

    std::printf("## GEMM scoreboard: gemm_q (MLX q4 g64 bf16) vs cuBLAS bf16 (dense bf16 weights), TFLOP/s = 2MNK/t\n\n");
    std::printf("| model | shape | N×K | M | plan | fp32-faithful µs | TFLOP/s | bf16-mode µs | TFLOP/s | cuBLAS bf16 µs | TFLOP/s | cuBLAS/fp32 | GEMV chunks µs |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Shape& s : kShapes) {
        if (quick && std::strcmp(s.model, "2B") && std::strcmp(s.name, "mlp down")) continue;
        Copies q = make_affine(s.rows, s.cols, 4, 64, rot);
        Copies d = make_dense_bf16(s.rows, s.cols, rot);
        for (int64_t M : Ms) {
            const size_t need = ember::cuda::gemm_q_workspace_bytes(q.w[0], M);
            if (need > ws_bytes) {
                if (ws) cudaFree(ws);
                ws = dmalloc(need), ws_bytes = need;
            }
            const int per = 20;
            auto run_q = [&](GemmPrecision p) {
                return graph_seconds_per_launch(st, per, [&](int i) {
                    ember::cuda::gemm_q(q.w[size_t(i) % q.w.size()], x, M, y, st, ws, ws_bytes, p);
                });
            };
            const double t32 = run_q(GemmPrecision::FP32), t16 = run_q(GemmPrecision::BF16);
            const float one = 1.f, zero = 0.f;
            const double tcb = graph_seconds_per_launch(st, per, [&](int i) {
                const Weight& w = d.w[size_t(i) % d.w.size()];
                CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(s.rows), int(M), int(s.cols), &one, w.data,
                                          CUDA_R_16BF, int(s.cols), xb, CUDA_R_16BF, int(s.cols), &zero, y, CUDA_R_32F,
                                          int(s.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            });
            double tgv = 0;
            if (M <= (board ? 64 : 512))
                tgv = graph_seconds_per_launch(st, 4, [&](int i) {
                    const Weight& w = q.w[size_t(i) % q.w.size()];
                    for (int64_t t = 0; t < M; t += 8)
                        ember::cuda::linear_gemv(w, x + t * s.cols, std::min<int64_t>(8, M - t), y + t * s.rows, st);
                });
            const double fl = 2.0 * double(M) * double(s.rows) * double(s.cols);
            char desc[96];
            ember::cuda::gemm_q_describe(q.w[0], M, desc, sizeof desc);
            char gv[32] = "—";
            if (tgv > 0) std::snprintf(gv, sizeof gv, "%.1f", tgv * 1e6);
            std::printf("| %s | %s | %lld×%lld | %lld | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %s |\n", s.model,
                        s.name, (long long)s.rows, (long long)s.cols, (long long)M, desc, t32 * 1e6, fl / t32 * 1e-12,
                        t16 * 1e6, fl / t16 * 1e-12, tcb * 1e6, fl / tcb * 1e-12, tcb / t32, gv);
            std::fflush(stdout);
        }
    }
    if (board) return 0;
    // 8-bit on two shapes.
    std::printf("\n## 8-bit (MLX q8 g64 bf16)\n\n| shape | N×K | M | plan | fp32-faithful µs | TFLOP/s | bf16-mode µs | TFLOP/s |\n|---|---|---|---|---|---|---|---|\n");
    for (const Shape& s : {kShapes[0], kShapes[6]}) {
        Copies q = make_affine(s.rows, s.cols, 8, 64, rot);
        for (int64_t M : {int64_t(128), int64_t(512)}) {
            const size_t need = ember::cuda::gemm_q_workspace_bytes(q.w[0], M);
            if (need > ws_bytes) {
                if (ws) cudaFree(ws);
                ws = dmalloc(need), ws_bytes = need;
            }
            auto run_q = [&](GemmPrecision p) {
                return graph_seconds_per_launch(st, 20, [&](int i) {
                    ember::cuda::gemm_q(q.w[size_t(i) % q.w.size()], x, M, y, st, ws, ws_bytes, p);
                });
            };
            const double t32 = run_q(GemmPrecision::FP32), t16 = run_q(GemmPrecision::BF16);
            const double fl = 2.0 * double(M) * double(s.rows) * double(s.cols);
            char desc[96];
            ember::cuda::gemm_q_describe(q.w[0], M, desc, sizeof desc);
            std::printf("| %s %s | %lld×%lld | %lld | %s | %.1f | %.1f | %.1f | %.1f |\n", s.model, s.name, (long long)s.rows,
                        (long long)s.cols, (long long)M, desc, t32 * 1e6, fl / t32 * 1e-12, t16 * 1e6, fl / t16 * 1e-12);
        }
    }
    // Forced tiles on one shape: what the rule chose against the alternatives.
    std::printf("\n## tiles on 2B gdn qkv 6144×2048, M = 512 (forced config / split)\n\n| plan | µs | TFLOP/s |\n|---|---|---|\n");
    {
        Copies q = make_affine(6144, 2048, 4, 64, rot);
        for (int c = 0; c < ember::cuda::gemm_q_configs(); ++c)
            for (int sp : {1, 2}) {
                const GemmPlan plan{c, sp};
                const size_t need = ember::cuda::gemm_q_workspace_bytes(q.w[0], 512, plan);
                if (need > ws_bytes) {
                    if (ws) cudaFree(ws);
                    ws = dmalloc(need), ws_bytes = need;
                }
                const double t = graph_seconds_per_launch(st, 20, [&](int i) {
                    ember::cuda::gemm_q(q.w[size_t(i) % q.w.size()], x, 512, y, st, ws, ws_bytes, GemmPrecision::FP32, plan);
                });
                char desc[96];
                ember::cuda::gemm_q_describe(q.w[0], 512, desc, sizeof desc, plan);
                std::printf("| %s | %.1f | %.1f |\n", desc, t * 1e6, 2.0 * 512 * 6144 * 2048 / t * 1e-12);
            }
    }
    CUBLAS_CHECK(cublasDestroy(h));
    return 0;
}
