// Thread count selection for parallel_for.
#include "core/parallel.h"

#include <cstdlib>
#include <thread>

namespace ember {

namespace {
int g_threads = 0;
}

int num_threads() {
    if (g_threads > 0) return g_threads;
    if (const char* e = std::getenv("EMBER_THREADS")) {
        int n = std::atoi(e);
        if (n > 0) return g_threads = n;
    }
    unsigned hc = std::thread::hardware_concurrency();
    return g_threads = hc ? static_cast<int>(hc) : 1;
}

void set_num_threads(int n) { g_threads = n > 0 ? n : 0; }

}  // namespace ember
