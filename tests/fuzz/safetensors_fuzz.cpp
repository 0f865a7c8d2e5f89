// Fuzz target: safetensors header (io/safetensors.h) — header length, JSON, every entry's dtype, shape and data
// range, overlaps; then every tensor's first and last byte (ASan checks they lie in the file).
#include "fuzz_util.h"
#include "io/safetensors.h"

using namespace ember;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto f = SafetensorsFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
    if (!f) return 0;
    uint64_t sum = 0;
    for (const auto& [name, t] : f->tensors()) {
        if (name != t.name) fuzz::fail("tensor map key '" + name + "' names tensor '" + t.name + "'");
        if (static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype) != t.nbytes)
            fuzz::fail("tensor '" + name + "': nbytes does not match its shape");
        (void)t.shape_str();
        if (t.nbytes) sum += t.data[0] + t.data[t.nbytes - 1];
    }
    return static_cast<int>(sum & 0);
}
