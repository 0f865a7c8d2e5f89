// EMBER_CHECK: always-on invariant check (not compiled out by NDEBUG); aborts with file and line.
#pragma once
#include <cstdio>
#include <cstdlib>

#define EMBER_CHECK(cond, ...)                                                        \
    do {                                                                              \
        if (!(cond)) {                                                                \
            std::fprintf(stderr, "%s:%d: EMBER_CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, "" __VA_ARGS__);                                     \
            std::fprintf(stderr, "\n");                                               \
            std::abort();                                                             \
        }                                                                             \
    } while (0)

#define EMBER_ABORT(...)                                                              \
    do {                                                                              \
        std::fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                          \
        std::fprintf(stderr, __VA_ARGS__);                                            \
        std::fprintf(stderr, "\n");                                                   \
        std::abort();                                                                 \
    } while (0)
