// Timing of the chunked GDN prefill (gdn_chunked_cuda.h) beside the token-sequential step kernel (gdn_cuda.h):
// µs per call and per 512 tokens for the Qwen3.5 2B / 9B / 27B layer shapes, T = 1 … 8192, and the three
// kernels one by one at T = 512 (both state-kernel column blocks). Each timed graph runs 8 "layers" (own
// recurrent and conv state each) back to back, the workspace shared as in the model; median of 5 replays.
// Disabled by default:
//   test_cuda --gtest_also_run_disabled_tests --gtest_filter='*GdnChunkedCuda*Bench*'
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "../bench/gpu/bench_timing.cuh"  // (via the src/ include path)
#include "ops/gated_delta_rule/gdn_chunked.cuh"
#include "ops/gated_delta_rule/gdn_chunked_cuda.h"
#include "ops/gated_delta_rule/gdn_cuda_test_util.h"

namespace ember::cuda {
namespace {

using namespace gdntest;

constexpr int kLayers = 8;

// µs per call: a graph of kLayers calls, replayed (bench/gpu/bench_timing.cuh, the GPU benchmarks' method).
template <class F>
double time_us(cudaStream_t st, F&& enqueue) {
    return bench::graph_seconds_per_launch(st, kLayers, enqueue) * 1e6;
}

TEST(GdnChunkedCuda, DISABLED_PrefillBench) {
    SKIP_WITHOUT_GPU();
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    std::printf("device %s; %d layers per timed graph\n", device_name().c_str(), kLayers);
    struct B {
        const char* name;
        GdnShape s;
    };
    for (const B& b : {B{"2B", {16, 16, 128, 128}}, B{"9B", {16, 32, 128, 128}}, B{"27B", {16, 48, 128, 128}}}) {
        const Layer L = make_layer(b.s, 4, 3);
        const size_t state_f = L.S.size(), conv_f = L.conv_state.size();
        DeviceBuffer S_all = dev_alloc(state_f * kLayers), conv_all = dev_alloc(conv_f * kLayers);
        for (int l = 0; l < kLayers; ++l) {
            copy_to_device(S_all.as<float>() + l * state_f, L.S.data(), state_f * 4);
            copy_to_device(conv_all.as<float>() + l * conv_f, L.conv_state.data(), conv_f * 4);
        }
        DevLayer d(L);
        const int64_t Tmax = 8192;
        Inputs in = make_inputs(L, 1024, 4);  // repeated up to Tmax tokens (the values do not matter here)
        for (std::vector<float>* v : {&in.qkv, &in.z, &in.a, &in.b}) {
            const size_t n = v->size();
            v->resize(n * (Tmax / 1024));
            for (size_t i = n; i < v->size(); ++i) (*v)[i] = (*v)[i - n];
        }
        DevInputs din(in, Tmax * b.s.nv * b.s.dv);
        const size_t ws_bytes = gated_delta_net_prefill_workspace_bytes(b.s, Tmax);
        DeviceBuffer ws = dev_alloc(ws_bytes / 4);
        GdnDecodeArgs a = make_args(L, d, din);
        auto layer_args = [&](int l) {
            GdnDecodeArgs al = a;
            al.S = S_all.as<float>() + l * state_f;
            al.conv_state = conv_all.as<float>() + l * conv_f;
            return al;
        };
        const gdn_chunked::StatePlan plan = gdn_chunked::state_plan(b.s);
        std::printf("\n%s (nk=%lld nv=%lld 128x128), workspace %.1f MB; state kernel: %d columns, %d stage(s)\n",
                    b.name, (long long)b.s.nk, (long long)b.s.nv, ws_bytes / 1e6, plan.cb, plan.stages);
        std::printf("%6s %14s %14s %14s %16s %9s\n", "T", "step us/call", "chunk us/call", "chunk us/512t",
                    "step us/512t", "speedup");
        gated_delta_net_prefill(layer_args(0), 64, ws.get(), ws_bytes, st);  // (attributes set outside a capture)
        for (int64_t T : {1, 2, 4, 8, 16, 32, 64, 128, 512, 2048, 8192}) {
            const double chunk =
                time_us(st, [&](int l) { gated_delta_net_prefill(layer_args(l), T, ws.get(), ws_bytes, st); });
            double step = -1;
            if (T <= 2048) step = time_us(st, [&](int l) { gated_delta_net_step(layer_args(l), T, st); });
            std::printf("%6lld %14.2f %14.2f %14.2f %16.2f %9.2f\n", (long long)T, step, chunk, chunk * 512.0 / T,
                        step * 512.0 / T, step > 0 ? step / chunk : 0.0);
        }
        // the three kernels alone at T = 512 (their inputs: what the previous timed calls left in the workspace)
        gdn_chunked::Piece pc;
        pc.t0 = 0, pc.T = 512, pc.T_all = 512, pc.nc = 8, pc.last = true, pc.vec = true;
        pc.ws = gdn_chunked::make_layout(b.s, pc.nc, ws.as<float>());
        gated_delta_net_prefill(layer_args(0), 512, ws.get(), ws_bytes, st);
        const gdn_chunked::StatePlan plans[] = {{16, 1}, {16, 2}, {32, 1}, {32, 2}};
        for (const auto& sp : plans)  // (first launches outside a capture: they set the shared-memory attribute)
            gdn_chunked::launch_state(layer_args(0), pc, sp, st);
        const double t1 = time_us(st, [&](int l) { gdn_chunked::launch_prep(layer_args(l), pc, st); });
        const double t3 = time_us(st, [&](int l) { gdn_chunked::launch_out(layer_args(l), pc, st); });
        std::printf("T=512 kernels alone: prep %.2f us | out %.2f us | state:", t1, t3);
        for (const auto& sp : plans)
            std::printf(" %.2f us (%d col, %d st)",
                        time_us(st, [&](int l) { gdn_chunked::launch_state(layer_args(l), pc, sp, st); }), sp.cb,
                        sp.stages);
        std::printf("\n");
        std::printf("T=512 prep kernel up to step:");  // (steps in gdn_chunked_prep.cu)
        for (int stop : {1, 2, 4, 5, 0}) {
            gdn_chunked::Piece cut = pc;
            cut.stop_after = stop;
            std::printf(" %d: %.2f us", stop ? stop : 6,
                        time_us(st, [&](int l) { gdn_chunked::launch_prep(layer_args(l), cut, st); }));
        }
        std::printf("\n");
    }
    CUDA_CHECK(cudaStreamDestroy(st));
}

// One 2B-shaped prefill of 512 tokens after a warm-up call, for a profiler:
//   ncu -k regex:gdn_ --launch-skip 3 --launch-count 3 test_cuda --gtest_also_run_disabled_tests
//       --gtest_filter='*GdnChunkedCuda*PrefillOnce*'
TEST(GdnChunkedCuda, DISABLED_PrefillOnce) {
    SKIP_WITHOUT_GPU();
    const GdnShape s{16, 16, 128, 128};
    const Layer L = make_layer(s, 4, 3);
    DevLayer d(L);
    DevInputs din(make_inputs(L, 512, 4), 512 * s.nv * s.dv);
    const size_t bytes = gated_delta_net_prefill_workspace_bytes(s, 512);
    DeviceBuffer ws = dev_alloc(bytes / 4);
    for (int i = 0; i < 2; ++i) gated_delta_net_prefill(make_args(L, d, din), 512, ws.get(), bytes, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace ember::cuda
