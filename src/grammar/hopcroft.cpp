// Hopcroft partition refinement (hopcroft.h): blocks are ranges of a permutation of the states; splitting a
// block moves its marked states to the block's front. A sink state stands for the missing transitions.
#include "grammar/hopcroft.h"

#include <algorithm>
#include <unordered_map>

namespace ember::grammar {

std::vector<int32_t> hopcroft_classes(int32_t n, int32_t m, const std::vector<int32_t>& delta,
                                      const std::vector<int32_t>& label) {
    const int32_t N = n + 1, sink = n;
    auto tgt = [&](int32_t s, int32_t a) {
        if (s == sink) return sink;
        const int32_t t = delta[size_t(s) * size_t(m) + size_t(a)];
        return t < 0 ? sink : t;
    };
    // Inverse transitions, CSR per symbol: inv[a] lists sources grouped by target.
    std::vector<int32_t> inv_begin(size_t(m) * size_t(N + 1), 0), inv(size_t(m) * size_t(N));
    for (int32_t a = 0; a < m; ++a) {
        int32_t* b = &inv_begin[size_t(a) * size_t(N + 1)];
        for (int32_t s = 0; s < N; ++s) b[tgt(s, a) + 1]++;
        for (int32_t t = 0; t < N; ++t) b[t + 1] += b[t];
        std::vector<int32_t> fill(b, b + N);
        for (int32_t s = 0; s < N; ++s) inv[size_t(a) * size_t(N) + size_t(fill[size_t(tgt(s, a))]++)] = s;
    }
    // Initial partition by label (the sink alone).
    std::vector<int32_t> elems, loc, block;
    elems.resize(size_t(N));
    loc.resize(size_t(N));
    block.resize(size_t(N));
    std::vector<int32_t> bstart, bend, marked;
    {
        std::unordered_map<int64_t, std::vector<int32_t>> groups;
        std::vector<int64_t> order;
        for (int32_t s = 0; s < N; ++s) {
            const int64_t key = s == sink ? INT64_MIN : int64_t(label[size_t(s)]);
            auto it = groups.find(key);
            if (it == groups.end()) { order.push_back(key); it = groups.emplace(key, std::vector<int32_t>()).first; }
            it->second.push_back(s);
        }
        int32_t k = 0;
        for (int64_t key : order) {
            bstart.push_back(k);
            for (int32_t s : groups[key]) {
                elems[size_t(k)] = s;
                loc[size_t(s)] = k++;
                block[size_t(s)] = int32_t(bstart.size()) - 1;
            }
            bend.push_back(k);
        }
    }
    marked.assign(bstart.size(), 0);
    std::vector<std::pair<int32_t, int32_t>> work;
    std::vector<std::vector<bool>> in_work;
    in_work.resize(size_t(m));
    auto ensure = [&]() {
        for (auto& w : in_work) w.resize(bstart.size(), false);
        marked.resize(bstart.size(), 0);
    };
    ensure();
    for (int32_t b = 0; b < int32_t(bstart.size()); ++b)
        for (int32_t a = 0; a < m; ++a) {
            work.push_back({b, a});
            in_work[size_t(a)][size_t(b)] = true;
        }
    std::vector<int32_t> snapshot, touched;
    while (!work.empty()) {
        const auto [B, a] = work.back();
        work.pop_back();
        in_work[size_t(a)][size_t(B)] = false;
        snapshot.assign(elems.begin() + bstart[size_t(B)], elems.begin() + bend[size_t(B)]);
        touched.clear();
        for (int32_t s : snapshot) {
            const int32_t* ib = &inv_begin[size_t(a) * size_t(N + 1)];
            for (int32_t k = ib[s]; k < ib[s + 1]; ++k) {
                const int32_t p = inv[size_t(a) * size_t(N) + size_t(k)];
                const int32_t X = block[size_t(p)];
                const int32_t pos = loc[size_t(p)], front = bstart[size_t(X)] + marked[size_t(X)];
                if (pos < front) continue;  // already marked
                if (marked[size_t(X)] == 0) touched.push_back(X);
                std::swap(elems[size_t(pos)], elems[size_t(front)]);
                loc[size_t(elems[size_t(pos)])] = pos;
                loc[size_t(elems[size_t(front)])] = front;
                marked[size_t(X)]++;
            }
        }
        for (int32_t X : touched) {
            const int32_t size = bend[size_t(X)] - bstart[size_t(X)], mk = marked[size_t(X)];
            marked[size_t(X)] = 0;
            if (mk == size) continue;
            // Split: the marked front becomes block Y.
            const int32_t Y = int32_t(bstart.size());
            bstart.push_back(bstart[size_t(X)]);
            bend.push_back(bstart[size_t(X)] + mk);
            bstart[size_t(X)] += mk;
            ensure();
            for (int32_t k = bstart[size_t(Y)]; k < bend[size_t(Y)]; ++k) block[size_t(elems[size_t(k)])] = Y;
            for (int32_t b2 = 0; b2 < m; ++b2) {
                if (in_work[size_t(b2)][size_t(X)]) {
                    work.push_back({Y, b2});
                    in_work[size_t(b2)][size_t(Y)] = true;
                } else {
                    const int32_t small = (bend[size_t(Y)] - bstart[size_t(Y)]) <= (bend[size_t(X)] - bstart[size_t(X)]) ? Y : X;
                    work.push_back({small, b2});
                    in_work[size_t(b2)][size_t(small)] = true;
                }
            }
        }
    }
    // Classes numbered by first occurrence over states 0..n−1 (the sink's block excluded).
    std::vector<int32_t> cls(static_cast<size_t>(n), 0), id(bstart.size(), -1);
    int32_t k = 0;
    for (int32_t s = 0; s < n; ++s) {
        int32_t& c = id[size_t(block[size_t(s)])];
        if (c < 0) c = k++;
        cls[size_t(s)] = c;
    }
    return cls;
}

}  // namespace ember::grammar
