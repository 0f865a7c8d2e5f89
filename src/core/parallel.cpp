// Thread count selection for parallel_for.
#include "core/parallel.h"

#include "core/env.h"

#include <cstdlib>
#include <thread>

namespace ember {

namespace {
int g_threads = 0;
}

int num_threads() {
    if (g_threads > 0) return g_threads;
    if (const int n = env_int("EMBER_THREADS"); n > 0) return g_threads = n;
    unsigned hc = std::thread::hardware_concurrency();
    return g_threads = hc ? static_cast<int>(hc) : 1;
}

void set_num_threads(int n) { g_threads = n > 0 ? n : 0; }

}  // namespace ember
