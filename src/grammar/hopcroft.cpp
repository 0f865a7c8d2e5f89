// DFA minimisation for partial transition functions (hopcroft.h): Valmari & Lehtinen, "Efficient minimization
// of DFAs with partial transition functions" (STACS 2008), in the form of Valmari, "Fast brief practical DFA
// minimization" (IPL 112, 2012), written here in our own code. Two refinable partitions: blocks of states and
// "cords" of transitions (initially one per symbol). Work is O(T log n) in the T transitions that exist: the
// grammars' automata are sparse (most states read a few of the byte classes), and the earlier form with a sink
// state for the missing transitions spent O(n · m) before the first split.
#include "grammar/hopcroft.h"

#include <algorithm>
#include <numeric>

namespace ember::grammar {

namespace {

// A partition of 0..n-1 into sets (ranges [first, past) of elems), refined by marking elements and splitting
// each touched set into its marked and unmarked parts (the smaller part becomes a new set).
struct Refinable {
    int32_t z = 0;                                   // sets
    std::vector<int32_t> elems, loc, set, first, past;
    std::vector<int32_t> marked, touched;
    void init(int32_t n) {
        z = n > 0;
        elems.resize(size_t(n));
        std::iota(elems.begin(), elems.end(), 0);
        loc = elems;
        set.assign(size_t(n), 0);
        first.assign(size_t(n) + 1, 0);
        past.assign(size_t(n) + 1, 0);
        marked.assign(size_t(n) + 1, 0);
        touched.clear();
        past[0] = n;
    }
    // Callers never mark an element twice between splits (each marks distinct transitions / tails).
    void mark(int32_t e) {
        const int32_t s = set[size_t(e)], i = loc[size_t(e)], j = first[size_t(s)] + marked[size_t(s)];
        elems[size_t(i)] = elems[size_t(j)];
        loc[size_t(elems[size_t(i)])] = i;
        elems[size_t(j)] = e;
        loc[size_t(e)] = j;
        if (!marked[size_t(s)]++) touched.push_back(s);
    }
    void split(int64_t* work) {
        while (!touched.empty()) {
            const int32_t s = touched.back(), j = first[size_t(s)] + marked[size_t(s)];
            touched.pop_back();
            if (j == past[size_t(s)]) {
                marked[size_t(s)] = 0;
                continue;
            }
            if (marked[size_t(s)] <= past[size_t(s)] - j) {  // the marked front is the smaller part
                first[size_t(z)] = first[size_t(s)];
                past[size_t(z)] = first[size_t(s)] = j;
            } else {
                past[size_t(z)] = past[size_t(s)];
                first[size_t(z)] = past[size_t(s)] = j;
            }
            for (int32_t i = first[size_t(z)]; i < past[size_t(z)]; ++i) set[size_t(elems[size_t(i)])] = z;
            if (work) *work += past[size_t(z)] - first[size_t(z)];
            marked[size_t(s)] = marked[size_t(z)] = 0;
            ++z;
        }
    }
};

// Puts the elements into sets by key (0..k-1), sets in key order, elements in index order: a counting sort.
void group(Refinable& P, int32_t n, int32_t k, const std::vector<int32_t>& key) {
    std::vector<int32_t> start(size_t(k) + 1, 0);
    for (int32_t e = 0; e < n; ++e) start[size_t(key[size_t(e)]) + 1]++;
    for (int32_t c = 0; c < k; ++c) start[size_t(c) + 1] += start[size_t(c)];
    std::vector<int32_t> set_of(size_t(k), -1);
    P.z = 0;
    for (int32_t c = 0; c < k; ++c)
        if (start[size_t(c) + 1] > start[size_t(c)]) {
            set_of[size_t(c)] = P.z;
            P.first[size_t(P.z)] = start[size_t(c)];
            P.past[size_t(P.z)] = start[size_t(c) + 1];
            ++P.z;
        }
    for (int32_t e = 0; e < n; ++e) {
        const int32_t c = key[size_t(e)], i = start[size_t(c)]++;
        P.elems[size_t(i)] = e;
        P.loc[size_t(e)] = i;
        P.set[size_t(e)] = set_of[size_t(c)];
    }
}

}  // namespace

std::vector<int32_t> hopcroft_classes(int32_t n, int32_t m, const std::vector<int32_t>& delta,
                                      const std::vector<int32_t>& label, int64_t* work) {
    if (n == 0) return {};
    // Transitions that exist: tail, symbol, head.
    std::vector<int32_t> tail, sym, head;
    for (int32_t s = 0; s < n; ++s)
        for (int32_t a = 0; a < m; ++a) {
            const int32_t t = delta[size_t(s) * size_t(m) + size_t(a)];
            if (t < 0) continue;
            tail.push_back(s);
            sym.push_back(a);
            head.push_back(t);
        }
    const int32_t T = int32_t(tail.size());
    // Blocks: the states grouped by label; cords: the transitions grouped by symbol (counting sorts).
    Refinable B;
    B.init(n);
    {
        std::vector<int32_t> labels(label.begin(), label.begin() + n);
        std::sort(labels.begin(), labels.end());
        labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
        std::vector<int32_t> rank(static_cast<size_t>(n));
        for (int32_t s = 0; s < n; ++s)
            rank[size_t(s)] = int32_t(std::lower_bound(labels.begin(), labels.end(), label[size_t(s)]) - labels.begin());
        group(B, n, int32_t(labels.size()), rank);
    }
    Refinable C;
    C.init(T);
    if (T > 0) group(C, T, m, sym);
    // Incoming transitions per state (CSR by head).
    std::vector<int32_t> in_begin(static_cast<size_t>(n) + 1, 0), in(static_cast<size_t>(T));
    for (int32_t t = 0; t < T; ++t) in_begin[size_t(head[size_t(t)]) + 1]++;
    for (int32_t s = 0; s < n; ++s) in_begin[size_t(s) + 1] += in_begin[size_t(s)];
    {
        std::vector<int32_t> fill(in_begin.begin(), in_begin.end() - 1);
        for (int32_t t = 0; t < T; ++t) in[size_t(fill[size_t(head[size_t(t)])]++)] = t;
    }
    // Every block is a splitter once, when created (initial label blocks included); every cord likewise.
    int32_t b = 0, c = 0;
    while (b < B.z || c < C.z) {
        while (b < B.z) {
            for (int32_t i = B.first[size_t(b)]; i < B.past[size_t(b)]; ++i) {
                const int32_t s = B.elems[size_t(i)];
                for (int32_t k = in_begin[size_t(s)]; k < in_begin[size_t(s) + 1]; ++k) C.mark(in[size_t(k)]);
                if (work) *work += 1 + in_begin[size_t(s) + 1] - in_begin[size_t(s)];
            }
            C.split(work);
            ++b;
        }
        if (c < C.z) {
            for (int32_t i = C.first[size_t(c)]; i < C.past[size_t(c)]; ++i) B.mark(tail[size_t(C.elems[size_t(i)])]);
            if (work) *work += 1 + C.past[size_t(c)] - C.first[size_t(c)];
            B.split(work);
            ++c;
        }
    }
    // Classes numbered by first occurrence over the states.
    std::vector<int32_t> cls(static_cast<size_t>(n)), id(static_cast<size_t>(B.z), -1);
    int32_t k = 0;
    for (int32_t s = 0; s < n; ++s) {
        int32_t& x = id[size_t(B.set[size_t(s)])];
        if (x < 0) x = k++;
        cls[size_t(s)] = x;
    }
    return cls;
}

}  // namespace ember::grammar
