// GPU tests for the fused Gated DeltaNet step (gdn_cuda.h) against the CPU composition of the fp64 references
// (causal_conv1d_silu_ref → split → l2norm_ref → gdn_gates_ref → gated_delta_rule_ref → rmsnorm_gated_ref, as
// layers/gated_delta_net.cpp composes them): decode steps with carried state, prefill lengths, head maps, ragged
// shapes, conv kernel sizes, CUDA-graph replay; plus a disabled timing test. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "ops/gated_delta_rule/gdn_cuda_test_util.h"

namespace ember::cuda {
namespace {

using namespace gdntest;

// Qwen3.5 2B, 9B-like (nv = 2 nk), 27B-like (nv = 3 nk), and ragged heads (odd dv: scalar state path; dv = 13
// leaves a partial column group; dk = 40 is not a power of two), each with both key-head maps.
std::vector<ShapeCase> shape_cases() {
    std::vector<ShapeCase> v;
    for (KeyHeadMap m : {KeyHeadMap::GROUPED, KeyHeadMap::TILED}) {
        v.push_back({{16, 16, 128, 128, m}, 4});
        v.push_back({{16, 32, 128, 128, m}, 4});
        v.push_back({{16, 48, 128, 128, m}, 4});
        v.push_back({{2, 6, 32, 24, m}, 4});
        v.push_back({{3, 3, 40, 13, m}, 4});
    }
    v.push_back({{2, 6, 32, 24, KeyHeadMap::TILED}, 3});  // the other conv kernel sizes
    v.push_back({{3, 3, 40, 13, KeyHeadMap::GROUPED}, 2});
    v.push_back({{4, 8, 64, 64, KeyHeadMap::GROUPED}, 2});
    v.push_back({{1, 2, 256, 64, KeyHeadMap::TILED}, 4});  // dk = 256: 256-thread blocks (all 8 warp slots)
    return v;
}

// Runs T tokens on the GPU from the layer's current state and checks y, S and conv_state against the CPU
// composition; advances `L` (the CPU copy) and `d` (the GPU copy) alike.
void step_and_check(Layer& L, DevLayer& d, int64_t T, uint32_t seed, int64_t tokens_so_far, double* worst) {
    const Inputs in = make_inputs(L, T, seed);
    DevInputs din(in, T * L.s.nv * L.s.dv);
    gated_delta_net_step(make_args(L, d, din), T, nullptr);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> y_want = ref_step(L, in, T);
    const double tol = budget(L.s, L.K, tokens_so_far + T);
    expect_close("y", download<float>(din.y, y_want.size()), y_want, tol, worst);
    expect_close("S", download<float>(d.S, L.S.size()), L.S, tol, worst);
    expect_equal("conv_state", download<float>(d.conv_state, L.conv_state.size()), L.conv_state);
}

TEST(GdnCuda, DecodeStepsMatchCpu) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 100;
    double worst = 0;
    for (const ShapeCase& sc : shape_cases()) {
        Layer L = make_layer(sc.s, sc.K, seed++);
        DevLayer d(L);
        for (int step = 0; step < 5; ++step) {  // state carried on both sides
            SCOPED_TRACE(testing::Message() << shape_str(sc.s, sc.K) << " step " << step << " seed " << seed);
            step_and_check(L, d, 1, seed++, step, &worst);
            if (HasFatalFailure()) return;
        }
    }
    std::printf("decode: worst error / budget = %.3f\n", worst);
}

TEST(GdnCuda, PrefillMatchesCpu) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 1000;
    double worst = 0;
    for (const ShapeCase& sc : shape_cases())
        for (int64_t T : {1, 2, 17, 64, 130}) {
            SCOPED_TRACE(testing::Message() << shape_str(sc.s, sc.K) << " T=" << T << " seed " << seed);
            Layer L = make_layer(sc.s, sc.K, seed++);
            DevLayer d(L);
            step_and_check(L, d, T, seed++, 0, &worst);
            if (HasFatalFailure()) return;
        }
    std::printf("prefill: worst error / budget = %.3f\n", worst);
}

// Prefill of 7 tokens then 3 decode steps: the conv state handed from prefill to decode (T ≥ K−1 and T < K−1).
TEST(GdnCuda, PrefillThenDecode) {
    SKIP_WITHOUT_GPU();
    for (int64_t T0 : {7, 2}) {
        const GdnShape s{16, 32, 128, 128, KeyHeadMap::TILED};
        SCOPED_TRACE(testing::Message() << "T0=" << T0);
        Layer L = make_layer(s, 4, 77);
        DevLayer d(L);
        step_and_check(L, d, T0, 78, 0, nullptr);
        for (int step = 0; step < 3; ++step) step_and_check(L, d, 1, 79 + step, T0 + step, nullptr);
    }
}

TEST(GdnCuda, ZeroTokensIsNoOp) {
    SKIP_WITHOUT_GPU();
    Layer L = make_layer({2, 6, 32, 24, KeyHeadMap::GROUPED}, 4, 5);
    DevLayer d(L);
    DevInputs din(make_inputs(L, 1, 6), L.s.nv * L.s.dv);
    gated_delta_net_step(make_args(L, d, din), 0, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    expect_equal("S", download<float>(d.S, L.S.size()), L.S);
    expect_equal("conv_state", download<float>(d.conv_state, L.conv_state.size()), L.conv_state);
}

// The T = 1 call captured in a CUDA graph and replayed twice == two direct calls (bit-exact: the kernel is
// deterministic, no atomics).
TEST(GdnCuda, GraphReplayEqualsDirectCalls) {
    SKIP_WITHOUT_GPU();
    for (const GdnShape& s : {GdnShape{16, 16, 128, 128, KeyHeadMap::GROUPED},
                              GdnShape{16, 48, 128, 128, KeyHeadMap::TILED}, GdnShape{3, 3, 40, 13}}) {
        SCOPED_TRACE(shape_str(s, 4));
        const Layer L = make_layer(s, 4, 11);
        const Inputs in = make_inputs(L, 1, 12);
        const size_t ny = s.nv * s.dv;
        cudaStream_t stream;
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

        DevLayer direct(L);
        DevInputs din_direct(in, ny);
        const GdnDecodeArgs a_direct = make_args(L, direct, din_direct);
        gated_delta_net_step(a_direct, 1, stream);
        gated_delta_net_step(a_direct, 1, stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));

        DevLayer graphed(L);
        DevInputs din_graph(in, ny);
        const GdnDecodeArgs a_graph = make_args(L, graphed, din_graph);
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        gated_delta_net_step(a_graph, 1, stream);
        CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        // Capture must not have run anything: the state is still the initial one.
        CUDA_CHECK(cudaStreamSynchronize(stream));
        expect_equal("S after capture", download<float>(graphed.S, L.S.size()), L.S);
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));

        expect_equal("y", download<float>(din_graph.y, ny), download<float>(din_direct.y, ny));
        expect_equal("S", download<float>(graphed.S, L.S.size()), download<float>(direct.S, L.S.size()));
        expect_equal("conv_state", download<float>(graphed.conv_state, L.conv_state.size()),
                     download<float>(direct.conv_state, L.conv_state.size()));
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
        CUDA_CHECK(cudaStreamDestroy(stream));
    }
}

// ---- timing (run with --gtest_also_run_disabled_tests --gtest_filter='*GdnCuda*Bench*') ----

TEST(GdnCuda, DISABLED_DecodeBench) {
    SKIP_WITHOUT_GPU();
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const double bw = copy_bandwidth_gbs().value();  // the engine's probe (backend/cuda/device.h)
    std::printf("device %s, D2D copy bandwidth %.0f GB/s\n", device_name().c_str(), bw);
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::printf("%-6s %-22s %5s %10s %12s %10s %8s %8s\n", "model", "shape", "T", "us/call", "us/token", "floor us",
                "ratio", "GB/s");
    struct B {
        const char* name;
        GdnShape s;
    };
    for (const B& b : {B{"2B", {16, 16, 128, 128}}, B{"9B", {16, 32, 128, 128}}, B{"27B", {16, 48, 128, 128}}}) {
        const Layer L = make_layer(b.s, 4, 3);
        const int64_t C = L.C();
        const size_t state_f = L.S.size(), conv_f = L.conv_state.size();
        // One state per "layer", ≥ 3 × the 60 MB L2 in total, so that every step reads its state from HBM.
        const int n_layers = static_cast<int>(std::max<size_t>(8, (size_t(256) << 20) / (state_f * 4)));
        DeviceBuffer S_all = dev_alloc(state_f * n_layers), conv_all = dev_alloc(conv_f * n_layers);
        {
            std::vector<float> S_host(state_f * n_layers), c_host(conv_f * n_layers);
            for (int l = 0; l < n_layers; ++l) {
                std::copy(L.S.begin(), L.S.end(), S_host.begin() + size_t(l) * state_f);
                std::copy(L.conv_state.begin(), L.conv_state.end(), c_host.begin() + size_t(l) * conv_f);
            }
            copy_to_device(S_all.get(), S_host.data(), S_host.size() * 4);
            copy_to_device(conv_all.get(), c_host.data(), c_host.size() * 4);
        }
        DevLayer d(L);
        for (int64_t T : {1, 16, 512}) {
            DevInputs din(make_inputs(L, T, 4), T * L.s.nv * L.s.dv);
            GdnDecodeArgs a = make_args(L, d, din);
            const int n_calls = T == 1 ? n_layers : 4;
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
            for (int l = 0; l < n_calls; ++l) {
                a.S = S_all.as<float>() + size_t(l) * state_f;
                a.conv_state = conv_all.as<float>() + size_t(l) * conv_f;
                gated_delta_net_step(a, T, stream);
            }
            CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
            CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
            std::vector<float> ms;
            for (int rep = 0; rep < 53; ++rep) {
                CUDA_CHECK(cudaEventRecord(e0, stream));
                CUDA_CHECK(cudaGraphLaunch(exec, stream));
                CUDA_CHECK(cudaEventRecord(e1, stream));
                CUDA_CHECK(cudaEventSynchronize(e1));
                float t = 0;
                CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
                if (rep >= 3) ms.push_back(t);
            }
            const double us = median(ms) * 1e3 / n_calls;
            // Bytes that must move per call: state read + written, conv state read + written, inputs, y.
            const double bytes = 4.0 * (2 * state_f + 2 * conv_f + T * (C + 2 * L.s.nv * L.s.dv + 2 * L.s.nv));
            const double floor_us = bytes / (bw * 1e9) * 1e6;
            char shape[64];
            std::snprintf(shape, sizeof shape, "nk=%lld nv=%lld 128x128", (long long)b.s.nk, (long long)b.s.nv);
            std::printf("%-6s %-22s %5lld %10.2f %12.3f %10.3f %8.1f %8.0f\n", b.name, shape, (long long)T, us,
                        us / T, floor_us, us / floor_us, bytes / (us * 1e-6) / 1e9);
            CUDA_CHECK(cudaGraphExecDestroy(exec));
            CUDA_CHECK(cudaGraphDestroy(graph));
        }
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace ember::cuda
