// ops/linear/linear_cuda_test_util.h: shared pieces of the CUDA linear tests (linear_cuda_test.cpp,
// linear_fused_cuda_test.cpp): a random weight of any format with host and device copies, random x, the fp64
// reference and the per-output error budget (derivation: linear_cuda_test.cpp), and the NaN-poisoned check.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "ops/linear/linear.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/weight_tiles.h"
#include "quant/affine.h"

namespace ember::cuda::lintest {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

struct Fmt {
    bool affine = false;
    DType dt = DType::F32;  // dense element type, or scale/bias type
    int bits = 0, gs = 0;
};

inline std::string fmt_name(const Fmt& f) {
    std::string s = f.affine ? "q" : "dense_";  // (+= only: GCC 12 -Wrestrict false positive on "lit" + string)
    if (f.affine) {
        s += std::to_string(f.bits);
        s += "_g";
        s += std::to_string(f.gs);
        s += "_sb";
    }
    s += dtype_name(f.dt);
    return s;
}

inline DeviceBuffer dalloc(size_t bytes) {
    auto b = DeviceBuffer::alloc(bytes, "test");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}

// A random weight with host and device copies, random x for `ntok` tokens, and the reference.
struct Case {
    Fmt f;
    int64_t rows = 0, cols = 0, ntok = 0;
    std::vector<uint32_t> packed;
    std::vector<uint8_t> sc, bi, dense;  // raw bytes in the stored dtype
    Weight hw, dw;                       // host / device views
    DeviceBuffer d_data, d_sc, d_bi, d_x;
    std::vector<float> x, ref;           // x [ntok, cols], ref [ntok, rows]
    std::vector<double> A, Q;            // error-budget magnitudes per output
};

inline void fill_float(std::vector<uint8_t>& dst, DType t, size_t count, std::mt19937& rng, float sd) {
    std::normal_distribution<float> nd(0.f, sd);
    dst.resize(count * dtype_size(t));
    for (size_t i = 0; i < count; ++i) store_float(dst.data(), t, i, nd(rng));
}

void set_x(Case& c, std::vector<float> x, bool with_ref = true);

// with_ref false: no reference or budgets (ref, A, Q empty) — for shapes too large for the single-threaded
// reference; the caller checks sampled rows itself (affine_row_values).
inline std::unique_ptr<Case> make_case(const Fmt& f, int64_t rows, int64_t cols, int64_t ntok, uint32_t seed,
                                int data_offset = 0, bool with_ref = true) {
    auto c = std::make_unique<Case>();
    c->f = f, c->rows = rows, c->cols = cols, c->ntok = ntok;
    std::mt19937 rng(seed);
    Weight& W = c->hw;
    W.rows = rows, W.cols = cols;
    if (f.affine) {
        W.format = WeightFormat::AFFINE, W.bits = f.bits, W.group_size = f.gs, W.sb_dtype = f.dt;
        c->packed.resize(size_t(rows * affine_row_words(cols, f.bits)));
        for (uint32_t& v : c->packed) v = rng();  // random codes, every bit pattern
        const size_t ng = size_t(rows * (cols / f.gs));
        fill_float(c->sc, f.dt, ng, rng, 0.05f);                                  // either sign
        fill_float(c->bi, f.dt, ng, rng, 0.05f * float(1 << f.bits) / 2.f);
        W.data = c->packed.data(), W.scales = c->sc.data(), W.biases = c->bi.data();
    } else {
        W.format = WeightFormat::DENSE, W.dtype = f.dt;
        fill_float(c->dense, f.dt, size_t(rows * cols), rng, 1.f / std::sqrt(float(cols)));
        W.data = c->dense.data();
    }
    // Device copy (16-byte aligned allocations).
    c->dw = W;
    auto up = [](DeviceBuffer& b, const void* src, size_t bytes, int offset = 0) {
        b = dalloc(bytes + 16);
        copy_to_device(static_cast<uint8_t*>(b.get()) + offset, src, bytes);
        return static_cast<void*>(static_cast<uint8_t*>(b.get()) + offset);
    };
    if (f.affine) {
        c->dw.data = up(c->d_data, c->packed.data(), c->packed.size() * 4, data_offset);
        c->dw.scales = up(c->d_sc, c->sc.data(), c->sc.size());
        c->dw.biases = up(c->d_bi, c->bi.data(), c->bi.size());
    } else {
        c->dw.data = up(c->d_data, c->dense.data(), c->dense.size());
    }
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(size_t(ntok * cols));
    for (float& v : x) v = nd(rng);
    set_x(*c, std::move(x), with_ref);
    return c;
}

// Row r of an affine case's weight in fp64: w[col] = s·q + b and a[col] = |s|·q + |b| (the budget's magnitudes).
inline void affine_row_values(const Case& c, int64_t r, double* w, double* a) {
    const int64_t K = c.cols, ng = K / c.f.gs;
    const uint32_t* row = c.packed.data() + r * affine_row_words(K, c.f.bits);
    for (int64_t col = 0; col < K; ++col) {
        const double s = load_float(c.hw.scales, c.f.dt, size_t(r * ng + col / c.f.gs));
        const double b = load_float(c.hw.biases, c.f.dt, size_t(r * ng + col / c.f.gs));
        const int q = affine_get(row, col, c.f.bits);
        w[col] = s * q + b, a[col] = std::fabs(s) * q + std::fabs(b);
    }
}

// Replaces x (host and device) and recomputes the reference and the error-budget magnitudes.
inline void set_x(Case& cr, std::vector<float> x, bool with_ref) {
    Case* c = &cr;
    const Fmt& f = c->f;
    const Weight& W = c->hw;
    const int64_t rows = c->rows, cols = c->cols, ntok = c->ntok;
    EMBER_CHECK(int64_t(x.size()) == ntok * cols, "set_x: %zu values", x.size());
    c->x = std::move(x);
    c->d_x = dalloc(c->x.size() * 4 + 16);
    copy_to_device(c->d_x.get(), c->x.data(), c->x.size() * 4);
    if (!with_ref) {
        c->ref.clear(), c->A.clear(), c->Q.clear();
        return;
    }
    // Reference and budgets.
    c->ref.resize(size_t(ntok * rows));
    linear_ref(W, c->x.data(), ntok, c->ref.data());
    c->A.assign(size_t(ntok * rows), 0.0), c->Q.assign(size_t(ntok * rows), 0.0);
    std::vector<double> w(static_cast<size_t>(cols)), a(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        if (f.affine) {
            affine_row_values(*c, r, w.data(), a.data());
        } else {
            for (int64_t col = 0; col < cols; ++col)
                w[size_t(col)] = load_float(W.data, f.dt, size_t(r * cols + col)), a[size_t(col)] = std::fabs(w[size_t(col)]);
        }
        for (int64_t t = 0; t < ntok; ++t) {
            double sa = 0, sq = 0;
            const float* xt = c->x.data() + t * cols;
            for (int64_t col = 0; col < cols; ++col) {
                const double p = w[size_t(col)] * xt[col];
                sa += a[size_t(col)] * std::fabs(xt[col]), sq += p * p;
            }
            c->A[size_t(t * rows + r)] = sa, c->Q[size_t(t * rows + r)] = std::sqrt(sq);
        }
    }
}

enum class Path { GEMV, GEMM };

inline double budget(Path p, const Case& c, size_t i) {
    if (p == Path::GEMV || (!c.f.affine && c.f.dt == DType::F32)) return 2e-5 * c.A[i] + 1e-6;
    return std::min(0.0079 * c.A[i], 0.0192 * c.Q[i]) + 0x1p-20 * c.A[i] + 1e-6;
}

// Runs fn(y) on a NaN-poisoned y of ny floats with a poisoned guard after it; compares y[i] with ref[i] within
// budget(i) (at most 5 failures reported, y[i / rows, i % rows]) and checks that the guard is untouched.
template <class Budget, class Fn>
inline void check_poisoned(size_t ny, int64_t rows, const std::vector<float>& ref, Budget&& budget, Fn&& fn) {
    const size_t guard = 64;
    DeviceBuffer dy = dalloc((ny + guard) * 4);
    CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.bytes()));
    fn(dy.as<float>());
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> got(ny + guard);
    copy_to_host(got.data(), dy.get(), got.size() * 4);
    int bad = 0;
    for (size_t i = 0; i < ny && bad < 5; ++i) {
        const double err = std::fabs(double(got[i]) - double(ref[i])), b = budget(i);
        if (!(err <= b)) {
            ADD_FAILURE() << "y[" << i / size_t(rows) << ", " << i % size_t(rows) << "] = " << got[i] << ", want "
                          << ref[i] << " (err " << err << ", budget " << b << ")";
            ++bad;
        }
    }
    uint32_t g;
    for (size_t i = ny; i < ny + guard; ++i) {
        std::memcpy(&g, &got[i], 4);
        if (g != 0xffffffffu) {
            ADD_FAILURE() << "write past y at " << i;
            break;
        }
    }
}

// check_poisoned for a Case: the first n tokens against its reference with the path's budget.
template <class Fn>
inline void check(const Case& c, int64_t n, Path path, const std::string& what, Fn&& fn) {
    SCOPED_TRACE(testing::Message() << fmt_name(c.f) << " rows=" << c.rows << " cols=" << c.cols << " n=" << n << " "
                                    << what);
    check_poisoned(size_t(n * c.rows), c.rows, c.ref, [&](size_t i) { return budget(path, c, i); }, fn);
}

// Runs of n = 1..8 with the default tuning (the fused-GEMV tests' (n, tuning) lists).
inline std::vector<std::pair<int64_t, GemvTuning>> every_n() {
    std::vector<std::pair<int64_t, GemvTuning>> v;
    for (int64_t n = 1; n <= 8; ++n) v.push_back({n, GemvTuning{}});
    return v;
}

inline std::vector<Fmt> all_formats() {
    std::vector<Fmt> v;
    for (int bits : {4, 8})
        for (int gs : {32, 64, 128})
            for (DType t : {DType::BF16, DType::F16, DType::F32}) v.push_back({true, t, bits, gs});
    for (int bits : {2, 3, 5, 6}) v.push_back({true, DType::BF16, bits, 64});  // generic kernel
    for (DType t : {DType::F32, DType::F16, DType::BF16}) v.push_back({false, t, 0, 0});
    return v;
}

// Column counts: one group, three groups, 2048 + one group (ragged 64-byte chunks for small groups).
inline std::vector<int64_t> col_set(const Fmt& f) {
    const int64_t g = f.affine ? f.gs : 64;
    return {g, 3 * g, 2048 + g};
}

// Replaces the device copy of an affine Case by its tiled storage (weight_tiles.h); the host weight and the
// reference stay the affine ones.
inline void to_tiled(Case& c) {
    auto t = tile_weight(c.hw);
    EMBER_CHECK(t.is_ok(), "%s", t.message().c_str());
    c.d_data = dalloc(t.value().codes.size());
    copy_to_device(c.d_data.get(), t.value().codes.data(), t.value().codes.size());
    c.d_sc = dalloc(t.value().sb.size());
    copy_to_device(c.d_sc.get(), t.value().sb.data(), t.value().sb.size());
    c.d_bi = DeviceBuffer();
    c.dw = t.value().w;
    c.dw.data = c.d_data.get(), c.dw.scales = c.d_sc.get(), c.dw.biases = nullptr;
}

// Σ_c |w[r, c]·x[t, c]| for every (token t, row r) of a host weight (the scale of a GEMV's rounding budget).
inline std::vector<float> abs_products(const Weight& W, const std::vector<float>& x, int64_t n) {
    std::vector<float> A(static_cast<size_t>(n * W.rows)), wr(static_cast<size_t>(W.cols));
    for (int64_t r = 0; r < W.rows; ++r) {
        weight_row(W, r, wr.data());
        for (int64_t k = 0; k < n; ++k) {
            double a = 0;
            for (int64_t c = 0; c < W.cols; ++c) a += std::fabs(double(wr[size_t(c)]) * x[size_t(k * W.cols + c)]);
            A[size_t(k * W.rows + r)] = float(a);
        }
    }
    return A;
}

// linear() on D (the device form of host weight W) for 1 and n tokens of random N(0, 1) x (seed) against the fp64
// reference of W, budget 2e-5·Σ|w||x| + 1e-6 (the q kernel's), y NaN-poisoned with a guard after it.
inline void check_device_form(const Weight& W, const Weight& D, int64_t n, uint32_t seed, const std::string& what) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n * W.cols)), ref(static_cast<size_t>(n * W.rows));
    for (float& v : x) v = nd(rng);
    linear_ref(W, x.data(), n, ref.data());
    const std::vector<float> A = abs_products(W, x, n);
    DeviceBuffer dx = dalloc(x.size() * 4);
    copy_to_device(dx.get(), x.data(), x.size() * 4);
    for (int64_t m : {int64_t(1), n}) {
        SCOPED_TRACE(testing::Message() << what << " " << W.rows << "x" << W.cols << " n=" << m);
        check_poisoned(size_t(m * W.rows), W.rows, ref, [&](size_t i) { return 2e-5 * A[i] + 1e-6; },
                       [&](float* y) { linear(D, dx.as<float>(), m, y, nullptr, nullptr, 0); });
    }
}

inline void run_linear(const Case& c, int64_t n, float* y) {
    const size_t ws_bytes = linear_workspace_bytes(c.dw, n);
    DeviceBuffer ws = ws_bytes ? dalloc(ws_bytes) : DeviceBuffer();
    linear(c.dw, c.d_x.as<float>(), n, y, nullptr, ws.get(), ws_bytes);
}

}  // namespace ember::cuda::lintest
