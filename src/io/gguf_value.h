// GGUF metadata values as read from a file: a type tag plus views into the file's bytes (nothing is copied,
// so a 250k-entry token list loads as 250k string_views). Valid while the GgufFile that made them lives.
//
// Value types (GGUF spec, u32 on disk): 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (1 byte, 0/1),
// 8 string (u64 length + UTF-8 bytes, no NUL), 9 array (u32 item type + u64 count + items; items may be
// arrays, each carrying its own item type and count), 10 u64, 11 i64, 12 f64. All little-endian.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

enum class GgufValueType : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
    U64 = 10, I64 = 11, F64 = 12,
};

// "u8", "i32", "f32", "bool", "str", "arr", ...; "?" for an id outside the spec.
const char* gguf_value_type_name(GgufValueType t);
// Bytes of a fixed-size value type; 0 for STRING, ARRAY and unknown ids.
size_t gguf_value_type_size(GgufValueType t);
bool gguf_value_type_is_integer(GgufValueType t);
bool gguf_value_type_is_float(GgufValueType t);  // F32, F64

class GgufValue {
public:
    GgufValueType type() const { return type_; }
    bool is_array() const { return type_ == GgufValueType::ARRAY; }

    // Scalars; nullopt when the value is of another kind.
    std::optional<int64_t> as_int() const;      // any integer type whose value fits int64_t
    std::optional<uint64_t> as_uint() const;    // any integer type whose value is >= 0
    std::optional<double> as_float() const;     // F32, F64 or any integer type
    std::optional<bool> as_bool() const;        // BOOL only
    std::optional<std::string_view> as_string() const;

    // Arrays (size() is 0 for scalars). The *_at accessors follow the scalar rules above; i < size().
    GgufValueType array_type() const { return array_type_; }
    size_t size() const { return count_; }
    std::optional<int64_t> int_at(size_t i) const;
    std::optional<double> float_at(size_t i) const;
    std::optional<bool> bool_at(size_t i) const;
    std::string_view string_at(size_t i) const;     // array_type() == STRING
    const GgufValue& array_at(size_t i) const;      // array_type() == ARRAY

    // Short text: 42, 1.5, true, "text" (escaped, cut at max_chars), [1, 2, 3, ... (N items)].
    std::string to_string(size_t max_array_items = 8, size_t max_chars = 60) const;

private:
    friend class GgufValueParser;
    GgufValueType type_ = GgufValueType::U8;
    GgufValueType array_type_ = GgufValueType::U8;
    size_t count_ = 0;
    const uint8_t* raw_ = nullptr;            // fixed-size scalar, or first item of a fixed-size array
    std::string_view str_;                    // STRING scalar
    std::vector<std::string_view> strings_;   // array of STRING
    std::vector<GgufValue> arrays_;           // array of ARRAY
};

// Parses one value of type `type` from [*pos, size) of `base`, advancing *pos. Errors are returned as text
// naming the problem (the caller adds the file and key). `depth` bounds array nesting.
class GgufValueParser {
public:
    GgufValueParser(const uint8_t* base, size_t size) : base_(base), size_(size) {}
    // Returns "" on success, else an error description.
    std::string parse(GgufValueType type, size_t* pos, GgufValue* out, int depth = 0) const;
    static constexpr int kMaxDepth = 8;
    // Items of arrays of arrays, over everything one parser reads: each costs a GgufValue (~100 bytes) for 12
    // bytes of file, so without a bound a hostile file would take 8× its size in memory. Real files have none.
    static constexpr size_t kMaxNestedItems = size_t{1} << 20;

private:
    std::string parse_array(size_t* pos, GgufValue* out, int depth) const;
    const uint8_t* base_;
    size_t size_;
    mutable size_t nested_items_ = 0;
};

}  // namespace ember
