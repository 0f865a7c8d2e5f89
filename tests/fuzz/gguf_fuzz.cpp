// Fuzz target: GGUF reader (io/gguf.h) — header, metadata, tensor infos and placement, then every typed getter
// and `ember info`'s metadata text on every key, and every tensor's bytes (ASan checks they lie in the file).
#include "fuzz_util.h"
#include "io/gguf.h"

using namespace ember;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto opened = GgufFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
    if (!opened) return 0;
    const GgufFile& f = **opened;
    (void)describe_metadata(f);
    for (const GgufKv& kv : f.metadata()) {
        if (f.find(kv.key) != &kv.value) fuzz::fail("find() does not return the key's value");
        (void)f.get_string(kv.key);
        (void)f.get_int(kv.key);
        (void)f.get_float(kv.key);
        (void)f.get_bool(kv.key);
        (void)f.get_string_array(kv.key);
        (void)f.get_int_array(kv.key);
        (void)f.get_float_array(kv.key);
        (void)kv.value.to_string(1000, 1000);
    }
    uint64_t sum = 0;
    for (const GgufTensor& t : f.tensors()) {
        if (f.tensor(t.name) != &t) fuzz::fail("tensor() does not return the tensor '" + t.name + "'");
        (void)t.numel();
        (void)t.shape_str();
        (void)f.require_supported(t);
        if (t.nbytes) sum += t.data[0] + t.data[t.nbytes - 1];
    }
    return static_cast<int>(sum & 0);
}
