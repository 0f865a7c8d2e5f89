// GGUF reader (llama.cpp model files), versions 2 and 3, little-endian. Spec: ggml docs/gguf.md.
//
//   u32 magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv      × { string key | u32 value_type | value }                    (values: io/gguf_value.h)
//   n_tensors × { string name | u32 n_dims (≤ 4) | u64 ne[n_dims] | u32 ggml_type | u64 offset }
//   zero padding up to a multiple of `general.alignment` (default 32, a power of two) | data section
//
// Tensor offsets are relative to the data section and must be multiples of the alignment. ne[0] is the
// innermost (contiguous) dimension: a row-major [rows, cols] matrix has ne = {cols, rows}; ne[0] must be a
// multiple of the type's block size and a tensor occupies ne[0]/block · block_bytes · ne[1] · ne[2] · ne[3]
// bytes. The file is mmap'ed; everything (counts, lengths, types, shapes, offsets, overlaps) is validated on
// open, so accessors never fail on a file that opened. Known-but-unsupported tensor types (Q2_K, IQ*, ...)
// load fine: require_supported() gives the error for the one a model actually needs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "io/gguf_value.h"
#include "io/mmap.h"
#include "quant/ggml_type.h"

namespace ember {

struct GgufTensor {
    std::string name;
    std::vector<int64_t> ne;       // ne[0] innermost; n_dims = ne.size() (0..4)
    GgmlType type = GgmlType::F32;
    uint64_t offset = 0;           // in the data section
    const uint8_t* data = nullptr; // into the mapped file
    uint64_t nbytes = 0;

    int64_t numel() const;
    const char* type_name() const;  // "Q4_K"
    std::string shape_str() const;  // "[4096, 32000]" (ne order)
};

struct GgufKv {
    std::string_view key;  // into the file
    GgufValue value;
};

class GgufFile {
public:
    static Expected<std::unique_ptr<GgufFile>> open(const std::string& path);
    // The same from bytes held in memory (tests, fuzzing); `name` stands for the path in messages.
    static Expected<std::unique_ptr<GgufFile>> from_bytes(std::vector<uint8_t> bytes, const std::string& name);

    uint32_t version() const { return version_; }
    const std::string& path() const { return path_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
    uint64_t file_size() const { return size_; }

    // Metadata, in file order. Views (keys, strings) point into the file and live as long as this object.
    const std::vector<GgufKv>& metadata() const { return kvs_; }
    const GgufValue* find(std::string_view key) const;

    // Typed getters: an error names the file and the key (missing, wrong type, out of range).
    Expected<std::string> get_string(std::string_view key) const;
    Expected<int64_t> get_int(std::string_view key) const;      // any integer type that fits int64
    Expected<double> get_float(std::string_view key) const;     // f32, f64 or any integer type
    Expected<bool> get_bool(std::string_view key) const;
    Expected<std::vector<std::string_view>> get_string_array(std::string_view key) const;  // views into the file
    Expected<std::vector<int64_t>> get_int_array(std::string_view key) const;
    Expected<std::vector<float>> get_float_array(std::string_view key) const;  // f32/f64/integer items
    // As above, but a missing key gives `def` (a present key of the wrong type is still an error).
    Expected<std::string> get_string_or(std::string_view key, std::string def) const;
    Expected<int64_t> get_int_or(std::string_view key, int64_t def) const;
    Expected<double> get_float_or(std::string_view key, double def) const;
    Expected<bool> get_bool_or(std::string_view key, bool def) const;

    const std::vector<GgufTensor>& tensors() const { return tensors_; }  // in file order
    const GgufTensor* tensor(std::string_view name) const;
    // "FILE: tensor X has type Q2_K, which ember does not support" unless ggml_type_traits(t.type).supported.
    Status require_supported(const GgufTensor& t) const;

private:
    GgufFile() = default;
    static Expected<std::unique_ptr<GgufFile>> parse(std::unique_ptr<GgufFile> f, const uint8_t* p, size_t n);
    Status parse_metadata(const uint8_t* p, size_t n, size_t* pos, uint64_t n_kv);
    Status parse_tensor_infos(const uint8_t* p, size_t n, size_t* pos, uint64_t n_tensors);
    Status place_tensors(const uint8_t* p, size_t n);
    Status key_error(std::string_view key, const char* what) const;
    Expected<const GgufValue*> require(std::string_view key, bool array) const;

    std::shared_ptr<MappedFile> file_;
    std::vector<uint8_t> bytes_;  // from_bytes()
    std::string path_;
    uint32_t version_ = 0, alignment_ = 32;
    uint64_t size_ = 0, data_offset_ = 0;
    std::vector<GgufKv> kvs_;
    std::unordered_map<std::string_view, size_t> kv_index_;
    std::vector<GgufTensor> tensors_;
    std::unordered_map<std::string_view, size_t> tensor_index_;  // views into the file bytes
};

// Text for `ember info`: one line per key, "key  type  value" with arrays cut to max_array_items.
std::string describe_metadata(const GgufFile& f, size_t max_array_items = 8);

}  // namespace ember
