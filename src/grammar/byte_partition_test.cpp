// BytePartition against its definition: bytes share a class iff every row (set) treats them alike; classes
// numbered by first byte.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "grammar/byte_partition.h"

namespace ember::grammar {
namespace {

void expect_partition(const BytePartition& p, const std::vector<std::vector<int32_t>>& rows) {
    int next_new = 0;
    for (int b = 0; b < 256; ++b) {
        if (p.cls[b] == next_new) {  // a new class starts at its first byte
            EXPECT_EQ(p.rep[p.cls[b]], b);
            ++next_new;
        }
        EXPECT_LT(p.cls[b], next_new) << "classes not numbered by first byte at " << b;
        for (int c = 0; c < b; ++c) {
            bool same = true;
            for (const auto& r : rows) same = same && r[size_t(b)] == r[size_t(c)];
            EXPECT_EQ(p.cls[b] == p.cls[c], same) << "bytes " << c << ", " << b;
        }
    }
    EXPECT_EQ(p.n, next_new);
}

TEST(BytePartition, RowsMatchColumnEquality) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 40; ++trial) {
        BytePartition p;
        std::vector<std::vector<int32_t>> rows;
        const int n_rows = 1 + int(rng() % 60), n_targets = 1 + int(rng() % 5);
        for (int r = 0; r < n_rows; ++r) {
            std::vector<int32_t> row(256);
            // runs of equal targets (as byte ranges in real automata), sometimes a scattered byte
            int32_t t = int32_t(rng() % size_t(n_targets + 1)) - 1;
            for (int b = 0; b < 256; ++b) {
                if (rng() % 40 == 0) t = int32_t(rng() % size_t(n_targets + 1)) - 1;
                row[size_t(b)] = rng() % 300 == 0 ? int32_t(rng() % 1000) : t;
            }
            p.refine_by_row(row.data());
            rows.push_back(std::move(row));
        }
        expect_partition(p, rows);
    }
}

TEST(BytePartition, SetsAndRowsTogether) {
    BytePartition p;
    std::vector<std::vector<int32_t>> rows;
    const ByteSet sets[] = {ByteSet::range('0', '9'), ByteSet::of('"') | ByteSet::of('\\'), ByteSet::range(0x80, 0xBF),
                            ByteSet::range('a', 'f') | ByteSet::range('A', 'F')};
    for (const ByteSet& s : sets) {
        p.refine_by_set(s);
        std::vector<int32_t> r(256);
        for (int b = 0; b < 256; ++b) r[size_t(b)] = s.has(uint8_t(b));
        rows.push_back(r);
    }
    std::vector<int32_t> row(256, -1);
    for (int b = 'a'; b <= 'z'; ++b) row[size_t(b)] = b < 'n' ? 3 : 4;
    p.refine_by_row(row.data());
    rows.push_back(row);
    expect_partition(p, rows);
    EXPECT_EQ(p.cls[0], 0);
    EXPECT_EQ(p.cls['0'], p.cls['9']);
    EXPECT_NE(p.cls['a'], p.cls['n']);
}

}  // namespace
}  // namespace ember::grammar
