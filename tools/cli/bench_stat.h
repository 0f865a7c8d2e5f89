// Helpers of the `ember bench` modes (cmd_bench.cpp, bench_batch.cpp, bench_prefix.cpp): the clock and mean ± sd.
#pragma once
#include <chrono>
#include <cmath>
#include <vector>

namespace ember::cli {

inline double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Stat {
    double mean = 0, sd = 0;  // sd: the sample standard deviation (0 for one value)
};
inline Stat stat(const std::vector<double>& v) {
    Stat s;
    if (v.empty()) return s;
    for (double x : v) s.mean += x;
    s.mean /= double(v.size());
    for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
    s.sd = v.size() > 1 ? std::sqrt(s.sd / double(v.size() - 1)) : 0;
    return s;
}

}  // namespace ember::cli
