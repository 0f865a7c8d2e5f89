// GGUF v3 writer (little-endian): metadata of every value type (nested arrays included), tensors of any
// ggml type given as raw bytes, any power-of-two alignment. Layout as read by io/gguf.h: header, metadata in
// insertion order, tensor infos in insertion order, zero padding to the alignment, then each tensor's bytes
// at an aligned offset (zero padding between tensors). Everything is held in memory until write(): meant
// for tests and small files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/gguf_value.h"
#include "quant/ggml_type.h"

namespace ember {

// An owned metadata value for the writer. Build with the factories; mismatched item types are programmer
// errors (EMBER_CHECK).
struct GgufMetaValue {
    GgufValueType type = GgufValueType::U8;
    uint64_t bits = 0;          // integers (two's complement) and bool
    double f = 0;               // F32 / F64
    std::string str;            // STRING
    GgufValueType array_type = GgufValueType::U8;
    std::vector<GgufMetaValue> items;  // ARRAY

    static GgufMetaValue u8(uint8_t v) { return integer(GgufValueType::U8, v); }
    static GgufMetaValue i8(int8_t v) { return integer(GgufValueType::I8, v); }
    static GgufMetaValue u16(uint16_t v) { return integer(GgufValueType::U16, v); }
    static GgufMetaValue i16(int16_t v) { return integer(GgufValueType::I16, v); }
    static GgufMetaValue u32(uint32_t v) { return integer(GgufValueType::U32, v); }
    static GgufMetaValue i32(int32_t v) { return integer(GgufValueType::I32, v); }
    static GgufMetaValue u64(uint64_t v);
    static GgufMetaValue i64(int64_t v) { return integer(GgufValueType::I64, v); }
    static GgufMetaValue f32(float v);
    static GgufMetaValue f64(double v);
    static GgufMetaValue boolean(bool v);
    static GgufMetaValue string(std::string v);
    // An integer of any integer type; the value must fit it.
    static GgufMetaValue integer(GgufValueType t, int64_t v);
    // An array whose items all have type `elem` (for elem == ARRAY: items are arrays of any item type).
    static GgufMetaValue array(GgufValueType elem, std::vector<GgufMetaValue> items);
    static GgufMetaValue strings(const std::vector<std::string>& v);
    static GgufMetaValue ints(GgufValueType elem, const std::vector<int64_t>& v);
    static GgufMetaValue floats(GgufValueType elem, const std::vector<double>& v);  // elem F32 or F64
};

class GgufWriter {
public:
    GgufWriter() = default;

    // Sets a key (replacing an earlier value, which keeps its position).
    void set(const std::string& key, GgufMetaValue v);
    void set_string(const std::string& key, std::string v) { set(key, GgufMetaValue::string(std::move(v))); }
    void set_u32(const std::string& key, uint32_t v) { set(key, GgufMetaValue::u32(v)); }
    void set_i32(const std::string& key, int32_t v) { set(key, GgufMetaValue::i32(v)); }
    void set_u64(const std::string& key, uint64_t v) { set(key, GgufMetaValue::u64(v)); }
    void set_f32(const std::string& key, float v) { set(key, GgufMetaValue::f32(v)); }
    void set_bool(const std::string& key, bool v) { set(key, GgufMetaValue::boolean(v)); }
    // Power of two; also stored as general.alignment (u32) unless it is the default 32.
    void set_alignment(uint32_t alignment);
    // 3 by default; 2 writes the (identical little-endian) v2 layout.
    void set_version(uint32_t version);

    // A tensor with ne[0] innermost; `nbytes` must equal the size implied by ne and type. Data is copied.
    Status add_tensor(const std::string& name, std::vector<int64_t> ne, GgmlType type, const void* data,
                      size_t nbytes);

    std::vector<uint8_t> serialize() const;
    Status write(const std::string& path) const;

private:
    struct Tensor {
        std::string name;
        std::vector<int64_t> ne;
        GgmlType type;
        std::vector<uint8_t> bytes;
    };
    uint32_t version_ = 3, alignment_ = 32;
    std::vector<std::pair<std::string, GgufMetaValue>> kvs_;
    std::vector<Tensor> tensors_;
};

}  // namespace ember
