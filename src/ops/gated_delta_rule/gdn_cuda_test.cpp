// GPU tests for the fused Gated DeltaNet step (gdn_cuda.h) against the CPU composition of the fp64 references
// (causal_conv1d_silu_ref → split → l2norm_ref → gdn_gates_ref → gated_delta_rule_ref → rmsnorm_gated_ref, as
// layers/gated_delta_net.cpp composes them): decode steps with carried state, prefill lengths, head maps, ragged
// shapes, conv kernel sizes, CUDA-graph replay; the batched-rows variant against single-sequence calls; plus a
// disabled timing test. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
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

// ---- batched rows (gated_delta_net_step_rows) ----

// A pool of n_slots sequence states with padded strides (padding and unused slots poisoned with a NaN pattern
// that must survive untouched), the layer's weights shared by all.
struct Pool {
    int64_t conv_stride, S_stride;
    std::vector<float> conv, S;  // [n_slots][stride]
};

constexpr uint32_t kPoisonBits = 0x7fc0dead;  // a NaN no kernel computes

// The layer's arguments with the state pointers at the pools' bases (the rows call offsets them per slot).
GdnDecodeArgs pool_args(const Layer& W, const DevLayer& dw, const DevInputs& din, DeviceBuffer& conv_d,
                        DeviceBuffer& S_d) {
    GdnDecodeArgs a = make_args(W, dw, din);
    a.conv_state = conv_d.as<float>();
    a.S = S_d.as<float>();
    return a;
}

Pool make_pool(const Layer& W, int n_slots, int64_t conv_pad, int64_t S_pad, uint32_t seed) {
    Pool P{static_cast<int64_t>(W.conv_state.size()) + conv_pad, static_cast<int64_t>(W.S.size()) + S_pad, {}, {}};
    float poison;
    std::memcpy(&poison, &kPoisonBits, sizeof poison);
    P.conv.assign(n_slots * P.conv_stride, poison);
    P.S.assign(n_slots * P.S_stride, poison);
    std::mt19937 gen(seed);
    for (int sl = 0; sl < n_slots; ++sl) {
        const std::vector<float> c = randn(gen, W.conv_state.size(), 0.0f, 1.0f);
        const std::vector<float> st = randn(gen, W.S.size(), 0.0f, 0.5f);
        std::copy(c.begin(), c.end(), P.conv.begin() + sl * P.conv_stride);
        std::copy(st.begin(), st.end(), P.S.begin() + sl * P.S_stride);
    }
    return P;
}

// The layer W with slot sl's state.
Layer slot_layer(const Layer& W, const Pool& P, int sl) {
    Layer L = W;
    std::copy_n(P.conv.begin() + sl * P.conv_stride, L.conv_state.size(), L.conv_state.begin());
    std::copy_n(P.S.begin() + sl * P.S_stride, L.S.size(), L.S.begin());
    return L;
}

// Row r of a batch of inputs, as a one-token batch.
Inputs row_inputs(const Layer& L, const Inputs& in, int64_t r) {
    const int64_t C = L.C(), vd = L.s.nv * L.s.dv, nv = L.s.nv;
    auto sl = [](const std::vector<float>& v, int64_t off, int64_t n) {
        return std::vector<float>(v.begin() + off, v.begin() + off + n);
    };
    return {sl(in.qkv, r * C, C), sl(in.z, r * vd, vd), sl(in.a, r * nv, nv), sl(in.b, r * nv, nv)};
}

struct StepOut {
    std::vector<float> y, S, conv;
};

// The single-sequence GPU call (T = 1) on a fresh device copy of L's state.
StepOut single_call(const Layer& L, const Inputs& in1) {
    DevLayer d(L);
    const size_t ny = L.s.nv * L.s.dv;
    DevInputs din(in1, ny);
    gated_delta_net_step(make_args(L, d, din), 1, nullptr);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    return {download<float>(din.y, ny), download<float>(d.S, L.S.size()),
            download<float>(d.conv_state, L.conv_state.size())};
}

// Expected outputs of the rows call naming `slots` (row r ↔ slots[r]) on pool P with inputs `in`: y [n_rows, nv·dv]
// and the pool after it, from single-sequence GPU calls on copies of each slot's state; each single call is also
// checked against the CPU composition within the usual budget.
// (`cpu`, when given: the same from the CPU composition.)
struct CpuRows {
    std::vector<float> y;
    Pool after;
};
void expected_rows(const Layer& W, const Pool& P, const Inputs& in, const std::vector<int32_t>& slots,
                   std::vector<float>* y, Pool* after, double* worst, CpuRows* cpu = nullptr) {
    const size_t ny = W.s.nv * W.s.dv;
    *after = P;
    y->assign(slots.size() * ny, 0.f);
    if (cpu) cpu->after = P, cpu->y.assign(slots.size() * ny, 0.f);
    for (size_t r = 0; r < slots.size(); ++r) {
        SCOPED_TRACE(testing::Message() << "row " << r << " slot " << slots[r]);
        Layer L = slot_layer(W, P, slots[r]);
        const Inputs in1 = row_inputs(W, in, static_cast<int64_t>(r));
        const StepOut g = single_call(L, in1);
        const std::vector<float> y_cpu = ref_step(L, in1, 1);  // advances L
        const double tol = budget(W.s, W.K, 1);
        expect_close("single-call y vs CPU", g.y, y_cpu, tol, worst);
        expect_close("single-call S vs CPU", g.S, L.S, tol, worst);
        expect_equal("single-call conv_state vs CPU", g.conv, L.conv_state);
        std::copy(g.y.begin(), g.y.end(), y->begin() + r * ny);
        std::copy(g.S.begin(), g.S.end(), after->S.begin() + slots[r] * P.S_stride);
        std::copy(g.conv.begin(), g.conv.end(), after->conv.begin() + slots[r] * P.conv_stride);
        if (cpu) {
            std::copy(y_cpu.begin(), y_cpu.end(), cpu->y.begin() + r * ny);
            std::copy(L.S.begin(), L.S.end(), cpu->after.S.begin() + slots[r] * P.S_stride);
            std::copy(L.conv_state.begin(), L.conv_state.end(), cpu->after.conv.begin() + slots[r] * P.conv_stride);
        }
    }
}

// A pool after the head kernel against the CPU's: the named slots' states within `tol`, everything else (unused
// slots, padding: the poison) bit for bit.
void expect_pool_close(const std::vector<float>& got, const Pool& want, const std::vector<int32_t>& slots,
                       int64_t S_size, double tol, double* worst) {
    ASSERT_EQ(got.size(), want.S.size());
    std::vector<float> rest_got = got, rest_want = want.S;
    for (int32_t sl : slots) {
        const auto b = static_cast<size_t>(sl * want.S_stride);
        const std::vector<float> g(got.begin() + b, got.begin() + b + S_size),
            w(want.S.begin() + b, want.S.begin() + b + S_size);
        expect_close("S of a named slot vs CPU", g, w, tol, worst);
        std::fill_n(rest_got.begin() + b, S_size, 0.f);
        std::fill_n(rest_want.begin() + b, S_size, 0.f);
    }
    expect_equal("S pool outside the named slots", rest_got, rest_want);
}

// Device rows array of (slot, position) pairs; positions are arbitrary (unused by the GDN step).
std::vector<int32_t> rows_pairs(const std::vector<int32_t>& slots) {
    std::vector<int32_t> v;
    for (size_t r = 0; r < slots.size(); ++r) {
        v.push_back(slots[r]);
        v.push_back(static_cast<int32_t>(100 + 7 * r));
    }
    return v;
}

// Both rows kernels. SLICE: every row equals the single-sequence call on that slot's state bit for bit (y, S, conv
// state), which is itself checked against the CPU composition within the budget. HEAD: y and S against the CPU
// composition within the same budget, the conv state bit for bit. Both: unused slots and the padding between
// slots stay untouched (poisoned). Odd S padding on one shape exercises the scalar state path (S_stride % 4 ≠ 0).
TEST(GdnCuda, RowsMatchSingleSequenceCalls) {
    SKIP_WITHOUT_GPU();
    struct Case {
        ShapeCase sc;
        int64_t conv_pad, S_pad;
    };
    const std::vector<Case> cases = {
        {{{16, 16, 128, 128, KeyHeadMap::GROUPED}, 4}, 3, 4},  // 2B
        {{{16, 48, 128, 128, KeyHeadMap::TILED}, 4}, 0, 0},    // 27B-like, packed slots
        {{{16, 32, 128, 128, KeyHeadMap::TILED}, 4}, 5, 1},    // 9B-like, S_stride % 4 ≠ 0: scalar state path
        {{{3, 3, 40, 13, KeyHeadMap::GROUPED}, 4}, 1, 4},      // ragged (odd dv: scalar path anyway)
        {{{2, 6, 32, 24, KeyHeadMap::TILED}, 3}, 2, 8},        // K = 3
        {{{1, 2, 256, 64, KeyHeadMap::TILED}, 4}, 0, 4},       // 256-thread blocks
    };
    const std::vector<std::vector<int32_t>> subsets = {{4}, {5, 0, 3}, {6, 2, 0, 5, 3}};
    constexpr int kSlots = 7;
    uint32_t seed = 5000;
    double worst = 0, worst_head = 0;
    for (GdnRowsKernel kern : {GdnRowsKernel::SLICE, GdnRowsKernel::HEAD})
    for (const Case& c : cases)
        for (const std::vector<int32_t>& slots : subsets) {
            const GdnShape& s = c.sc.s;
            const bool head = kern == GdnRowsKernel::HEAD;
            SCOPED_TRACE(testing::Message() << (head ? "head" : "slice") << " kernel, " << shape_str(s, c.sc.K)
                                            << " pads " << c.conv_pad << "/" << c.S_pad << " n_rows "
                                            << slots.size() << " seed " << seed);
            const Layer W = make_layer(s, c.sc.K, seed++);
            const Pool P = make_pool(W, kSlots, c.conv_pad, c.S_pad, seed++);
            const int64_t n_rows = static_cast<int64_t>(slots.size());
            const Inputs in = make_inputs(W, n_rows, seed++);
            std::vector<float> y_want;
            Pool want;
            CpuRows cpu;
            expected_rows(W, P, in, slots, &y_want, &want, &worst, &cpu);
            if (HasFatalFailure()) return;

            DevLayer dw(W);
            DeviceBuffer conv_d = dev(P.conv), S_d = dev(P.S);
            DevInputs din(in, y_want.size());
            auto rows_b = upload(rows_pairs(slots), "gdn test rows");
            ASSERT_TRUE(rows_b.is_ok());
            const GdnDecodeArgs a = pool_args(W, dw, din, conv_d, S_d);
            gated_delta_net_step_rows(a, rows_b.value().as<int32_t>(), P.conv_stride, P.S_stride, n_rows, nullptr,
                                      kern);
            CUDA_CHECK(cudaGetLastError());
            CUDA_CHECK(cudaDeviceSynchronize());
            if (head) {
                const double tol = budget(W.s, W.K, 1);
                expect_close("y vs CPU", download<float>(din.y, y_want.size()), cpu.y, tol, &worst_head);
                expect_pool_close(download<float>(S_d, P.S.size()), cpu.after, slots,
                                  static_cast<int64_t>(W.S.size()), tol, &worst_head);
            } else {
                expect_equal("y", download<float>(din.y, y_want.size()), y_want);
                expect_equal("S pool", download<float>(S_d, P.S.size()), want.S);
            }
            expect_equal("conv pool", download<float>(conv_d, P.conv.size()), want.conv);
            if (HasFatalFailure()) return;
        }
    std::printf("rows (single calls vs CPU): worst error / budget = %.3f; head kernel vs CPU: %.3f\n", worst,
                worst_head);
}

TEST(GdnCuda, RowsZeroRowsIsNoOp) {
    SKIP_WITHOUT_GPU();
    const Layer W = make_layer({2, 6, 32, 24, KeyHeadMap::GROUPED}, 4, 9);
    const Pool P = make_pool(W, 2, 0, 0, 10);
    DevLayer dw(W);
    DeviceBuffer conv_d = dev(P.conv), S_d = dev(P.S);
    DevInputs din(make_inputs(W, 1, 11), W.s.nv * W.s.dv);
    const GdnDecodeArgs a = pool_args(W, dw, din, conv_d, S_d);
    gated_delta_net_step_rows(a, nullptr, P.conv_stride, P.S_stride, 0, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    expect_equal("S pool", download<float>(S_d, P.S.size()), P.S);
    expect_equal("conv pool", download<float>(conv_d, P.conv.size()), P.conv);
}

// The rows call captured once in a CUDA graph, replayed with the rows array rewritten in between (other slots):
// each replay advances the slots the array names at launch time (the slots are read at run time, not captured).
TEST(GdnCuda, RowsGraphReadsRowsAtRunTime) {
    SKIP_WITHOUT_GPU();
    const GdnShape s{16, 32, 128, 128, KeyHeadMap::TILED};
    const Layer W = make_layer(s, 4, 21);
    const Pool P0 = make_pool(W, 7, 3, 4, 22);
    const std::vector<int32_t> first = {1, 6, 4}, second = {5, 0, 2};  // disjoint: slot 3 is never named
    const Inputs in = make_inputs(W, 3, 23);
    for (GdnRowsKernel kern : {GdnRowsKernel::SLICE, GdnRowsKernel::HEAD}) {
        SCOPED_TRACE(kern == GdnRowsKernel::HEAD ? "head kernel" : "slice kernel");
        DevLayer dw(W);
        // Expected: direct rows calls of the same kernel on another copy of the pool (the slice kernel's rows are
        // checked against single-sequence calls, the head kernel's against the CPU, in RowsMatchSingleSequenceCalls).
        std::vector<float> y1, y2;
        std::vector<float> S1, S2, c1, c2;
        {
            DeviceBuffer conv_d = dev(P0.conv), S_d = dev(P0.S);
            DevInputs din(in, 3 * s.nv * s.dv);
            auto rb = upload(rows_pairs(first), "gdn test rows");
            ASSERT_TRUE(rb.is_ok());
            const GdnDecodeArgs a = pool_args(W, dw, din, conv_d, S_d);
            gated_delta_net_step_rows(a, rb.value().as<int32_t>(), P0.conv_stride, P0.S_stride, 3, nullptr, kern);
            CUDA_CHECK(cudaDeviceSynchronize());
            y1 = download<float>(din.y, 3 * s.nv * s.dv), S1 = download<float>(S_d, P0.S.size());
            c1 = download<float>(conv_d, P0.conv.size());
            const std::vector<int32_t> p2 = rows_pairs(second);
            copy_to_device(rb.value().get(), p2.data(), p2.size() * sizeof(int32_t));
            gated_delta_net_step_rows(a, rb.value().as<int32_t>(), P0.conv_stride, P0.S_stride, 3, nullptr, kern);
            CUDA_CHECK(cudaDeviceSynchronize());
            y2 = download<float>(din.y, 3 * s.nv * s.dv), S2 = download<float>(S_d, P0.S.size());
            c2 = download<float>(conv_d, P0.conv.size());
        }
        // Each call advanced only its named slots (slot 3, never named, keeps its state).
        {
            const size_t b = 3 * P0.S_stride;
            EXPECT_EQ(std::memcmp(S2.data() + b, P0.S.data() + b, W.S.size() * sizeof(float)), 0);
            EXPECT_NE(std::memcmp(S1.data() + P0.S_stride, P0.S.data() + P0.S_stride, W.S.size() * sizeof(float)), 0);
        }

        cudaStream_t stream;
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        DeviceBuffer conv_d = dev(P0.conv), S_d = dev(P0.S);
        DevInputs din(in, y1.size());
        auto rows_b = upload(rows_pairs(first), "gdn test rows");
        ASSERT_TRUE(rows_b.is_ok());
        const GdnDecodeArgs a = pool_args(W, dw, din, conv_d, S_d);
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        gated_delta_net_step_rows(a, rows_b.value().as<int32_t>(), P0.conv_stride, P0.S_stride, 3, stream, kern);
        CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        expect_equal("S pool after capture", download<float>(S_d, P0.S.size()), P0.S);

        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        expect_equal("y, replay 1", download<float>(din.y, y1.size()), y1);
        expect_equal("S pool, replay 1", download<float>(S_d, P0.S.size()), S1);
        expect_equal("conv pool, replay 1", download<float>(conv_d, P0.conv.size()), c1);

        const std::vector<int32_t> pairs2 = rows_pairs(second);
        CUDA_CHECK(cudaMemcpyAsync(rows_b.value().get(), pairs2.data(), pairs2.size() * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, stream));
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        expect_equal("y, replay 2", download<float>(din.y, y2.size()), y2);
        expect_equal("S pool, replay 2", download<float>(S_d, P0.S.size()), S2);
        expect_equal("conv pool, replay 2", download<float>(conv_d, P0.conv.size()), c2);

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
