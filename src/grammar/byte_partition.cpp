// Byte partition refinement (byte_partition.h).
#include "grammar/byte_partition.h"

#include <algorithm>

namespace ember::grammar {

namespace {
// Renumbers the classes after splitting by key[b] (bytes stay together iff same class and same key), by
// first byte.
template <class Key>
void split(BytePartition& p, const Key* key) {
    struct Slot {
        Key k;
        int id, next;  // next: the previous slot of the same old class (-1: none)
    };
    Slot slots[256];
    int head[256];
    std::fill(head, head + 256, -1);
    int n_slots = 0;
    uint8_t next_cls[256];
    int n = 0;
    for (int b = 0; b < 256; ++b) {
        const uint8_t c = p.cls[b];
        int id = -1;
        for (int s = head[c]; s >= 0; s = slots[s].next)
            if (slots[s].k == key[b]) { id = slots[s].id; break; }
        if (id < 0) {
            id = n++;
            slots[n_slots] = {key[b], id, head[c]};
            head[c] = n_slots++;
            p.rep[id] = uint8_t(b);
        }
        next_cls[b] = uint8_t(id);
    }
    std::copy(next_cls, next_cls + 256, p.cls);
    p.n = n;
}
}  // namespace

void BytePartition::refine_by_row(const int32_t* row) {
    if (n == 256) return;
    int32_t diff = 0;
    for (int b = 0; b < 256; ++b) diff |= row[b] ^ row[rep[cls[b]]];
    if (diff) split(*this, row);
}

void BytePartition::refine_by_set(const ByteSet& s) {
    if (n == 256) return;
    bool in[256];
    bool diff = false;
    for (int b = 0; b < 256; ++b) in[b] = s.has(uint8_t(b));
    for (int b = 0; b < 256; ++b) diff |= in[b] != in[rep[cls[b]]];
    if (diff) split(*this, in);
}

}  // namespace ember::grammar
