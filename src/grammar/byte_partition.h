// Partitions of the 256 byte values into classes of bytes that behave alike (compile.h byte classes, byte_dfa.h).
#pragma once
#include <cstdint>
#include <vector>

#include "grammar/ir.h"

namespace ember::grammar {

// Classes numbered by their first byte (class 0 holds byte 0); rep[c] is that first byte.
struct BytePartition {
    uint8_t cls[256] = {};
    uint8_t rep[256] = {};
    int n = 1;
    // Splits every class by the target each byte has in row[256] (a DFA state's transitions). A row that
    // splits nothing costs one pass of 256 compares; splits happen at most 255 times in all, so refining by
    // every row of a DFA is linear in its table, read row by row.
    void refine_by_row(const int32_t* row);
    void refine_by_set(const ByteSet& s);  // splits every class into its bytes in s and those not in s
};

}  // namespace ember::grammar
