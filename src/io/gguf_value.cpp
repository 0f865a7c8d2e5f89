// GGUF metadata values: bounds-checked parsing from the file bytes, typed access, short text form.
#include "io/gguf_value.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/status.h"

namespace ember {

static_assert(std::endian::native == std::endian::little, "GGUF values are read in place: little-endian hosts only");

const char* gguf_value_type_name(GgufValueType t) {
    switch (t) {
        case GgufValueType::U8: return "u8";
        case GgufValueType::I8: return "i8";
        case GgufValueType::U16: return "u16";
        case GgufValueType::I16: return "i16";
        case GgufValueType::U32: return "u32";
        case GgufValueType::I32: return "i32";
        case GgufValueType::F32: return "f32";
        case GgufValueType::BOOL: return "bool";
        case GgufValueType::STRING: return "str";
        case GgufValueType::ARRAY: return "arr";
        case GgufValueType::U64: return "u64";
        case GgufValueType::I64: return "i64";
        case GgufValueType::F64: return "f64";
    }
    return "?";
}

size_t gguf_value_type_size(GgufValueType t) {
    switch (t) {
        case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
        case GgufValueType::U16: case GgufValueType::I16: return 2;
        case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
        case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
        case GgufValueType::STRING: case GgufValueType::ARRAY: return 0;
    }
    return 0;
}

bool gguf_value_type_is_integer(GgufValueType t) {
    switch (t) {
        case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16: case GgufValueType::I16:
        case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::U64: case GgufValueType::I64:
            return true;
        default: return false;
    }
}

bool gguf_value_type_is_float(GgufValueType t) { return t == GgufValueType::F32 || t == GgufValueType::F64; }

namespace {

constexpr size_t kMaxReserve = size_t{1} << 20;

template <class T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// Integer at p of type t: signed types widen into *s, unsigned into *u. Returns false for non-integers.
bool load_integer(GgufValueType t, const uint8_t* p, bool* is_signed, int64_t* s, uint64_t* u) {
    *is_signed = true;
    switch (t) {
        case GgufValueType::I8: *s = load<int8_t>(p); return true;
        case GgufValueType::I16: *s = load<int16_t>(p); return true;
        case GgufValueType::I32: *s = load<int32_t>(p); return true;
        case GgufValueType::I64: *s = load<int64_t>(p); return true;
        default: break;
    }
    *is_signed = false;
    switch (t) {
        case GgufValueType::U8: *u = load<uint8_t>(p); return true;
        case GgufValueType::U16: *u = load<uint16_t>(p); return true;
        case GgufValueType::U32: *u = load<uint32_t>(p); return true;
        case GgufValueType::U64: *u = load<uint64_t>(p); return true;
        default: return false;
    }
}

std::optional<int64_t> int_of(GgufValueType t, const uint8_t* p) {
    bool sg;
    int64_t s = 0;
    uint64_t u = 0;
    if (!load_integer(t, p, &sg, &s, &u)) return std::nullopt;
    if (sg) return s;
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
}

std::optional<double> float_of(GgufValueType t, const uint8_t* p) {
    if (t == GgufValueType::F32) return static_cast<double>(load<float>(p));
    if (t == GgufValueType::F64) return load<double>(p);
    bool sg;
    int64_t s = 0;
    uint64_t u = 0;
    if (!load_integer(t, p, &sg, &s, &u)) return std::nullopt;
    return sg ? static_cast<double>(s) : static_cast<double>(u);
}

std::string scalar_text(GgufValueType t, const uint8_t* p) {
    if (t == GgufValueType::BOOL) return *p ? "true" : "false";
    if (gguf_value_type_is_float(t)) return strfmt("%.9g", *float_of(t, p));
    bool sg;
    int64_t s = 0;
    uint64_t u = 0;
    load_integer(t, p, &sg, &s, &u);
    return sg ? std::to_string(s) : std::to_string(u);
}

std::string quote(std::string_view s, size_t max_chars) {
    std::string out = "\"";
    size_t n = 0;  // code points so far (UTF-8 continuation bytes do not count, so no character is split)
    for (char c : s) {
        unsigned char uc = static_cast<unsigned char>(c);
        if ((uc & 0xc0) != 0x80 && n++ == max_chars) {
            out += "...";
            break;
        }
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (uc < 0x20 || uc == 0x7f) {
            out += strfmt("\\x%02x", uc);
        } else {
            out += c;
        }
    }
    return out + "\"";
}

}  // namespace

std::optional<int64_t> GgufValue::as_int() const { return raw_ && !is_array() ? int_of(type_, raw_) : std::nullopt; }

std::optional<uint64_t> GgufValue::as_uint() const {
    if (!raw_ || is_array()) return std::nullopt;
    bool sg;
    int64_t s = 0;
    uint64_t u = 0;
    if (!load_integer(type_, raw_, &sg, &s, &u)) return std::nullopt;
    if (sg) return s >= 0 ? std::optional<uint64_t>(static_cast<uint64_t>(s)) : std::nullopt;
    return u;
}

std::optional<double> GgufValue::as_float() const {
    return raw_ && !is_array() ? float_of(type_, raw_) : std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
    if (type_ != GgufValueType::BOOL) return std::nullopt;
    return *raw_ != 0;
}

std::optional<std::string_view> GgufValue::as_string() const {
    if (type_ != GgufValueType::STRING) return std::nullopt;
    return str_;
}

std::optional<int64_t> GgufValue::int_at(size_t i) const {
    EMBER_CHECK(i < count_, "index %zu of %zu", i, count_);
    if (!raw_) return std::nullopt;
    return int_of(array_type_, raw_ + i * gguf_value_type_size(array_type_));
}

std::optional<double> GgufValue::float_at(size_t i) const {
    EMBER_CHECK(i < count_, "index %zu of %zu", i, count_);
    if (!raw_) return std::nullopt;
    return float_of(array_type_, raw_ + i * gguf_value_type_size(array_type_));
}

std::optional<bool> GgufValue::bool_at(size_t i) const {
    EMBER_CHECK(i < count_, "index %zu of %zu", i, count_);
    if (array_type_ != GgufValueType::BOOL) return std::nullopt;
    return raw_[i] != 0;
}

std::string_view GgufValue::string_at(size_t i) const {
    EMBER_CHECK(is_array() && array_type_ == GgufValueType::STRING && i < count_, "not a string item");
    return strings_[i];
}

const GgufValue& GgufValue::array_at(size_t i) const {
    EMBER_CHECK(is_array() && array_type_ == GgufValueType::ARRAY && i < count_, "not an array item");
    return arrays_[i];
}

std::string GgufValue::to_string(size_t max_array_items, size_t max_chars) const {
    if (type_ == GgufValueType::STRING) return quote(str_, max_chars);
    if (!is_array()) return scalar_text(type_, raw_);
    std::string out = "[";
    size_t shown = count_ < max_array_items ? count_ : max_array_items;
    size_t item_size = gguf_value_type_size(array_type_);
    for (size_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        if (array_type_ == GgufValueType::STRING) out += quote(strings_[i], max_chars);
        else if (array_type_ == GgufValueType::ARRAY) out += arrays_[i].to_string(max_array_items, max_chars);
        else out += scalar_text(array_type_, raw_ + i * item_size);
    }
    if (shown < count_) out += strfmt("%s... (%zu items)", shown ? ", " : "", count_);
    return out + "]";
}

// ---------------------------------------------------------------------------------------------------------
// Parsing. Every length is checked against the bytes left before it is used, so a lying count can neither
// read past the end nor make us allocate more than the file could describe.

std::string GgufValueParser::parse(GgufValueType type, size_t* pos, GgufValue* out, int depth) const {
    size_t left = size_ - *pos;
    out->type_ = type;
    if (type == GgufValueType::STRING) {
        if (left < 8) return "unexpected end of file in a string length";
        uint64_t n = load<uint64_t>(base_ + *pos);
        if (n > left - 8)
            return strfmt("string length %llu is beyond the end of the file (%zu bytes left)", (unsigned long long)n,
                          left - 8);
        out->str_ = std::string_view(reinterpret_cast<const char*>(base_ + *pos + 8), static_cast<size_t>(n));
        *pos += 8 + static_cast<size_t>(n);
        return "";
    }
    if (type == GgufValueType::ARRAY) return parse_array(pos, out, depth);
    size_t sz = gguf_value_type_size(type);
    if (sz == 0) return strfmt("unknown value type %u", static_cast<unsigned>(type));
    if (left < sz) return strfmt("unexpected end of file in a %s value", gguf_value_type_name(type));
    if (type == GgufValueType::BOOL && base_[*pos] > 1)
        return strfmt("bool value is %u (must be 0 or 1)", static_cast<unsigned>(base_[*pos]));
    out->raw_ = base_ + *pos;
    *pos += sz;
    return "";
}

std::string GgufValueParser::parse_array(size_t* pos, GgufValue* out, int depth) const {
    if (depth >= kMaxDepth) return strfmt("arrays nested more than %d deep", kMaxDepth);
    size_t left = size_ - *pos;
    if (left < 12) return "unexpected end of file in an array header";
    uint32_t et = load<uint32_t>(base_ + *pos);
    uint64_t n = load<uint64_t>(base_ + *pos + 4);
    *pos += 12;
    left -= 12;
    auto elem = static_cast<GgufValueType>(et);
    size_t min_item = gguf_value_type_size(elem);
    if (elem == GgufValueType::STRING) min_item = 8;
    else if (elem == GgufValueType::ARRAY) min_item = 12;
    else if (min_item == 0) return strfmt("array of unknown value type %u", et);
    if (n > left / min_item)
        return strfmt("array of %llu %s items cannot fit in the %zu bytes left in the file", (unsigned long long)n,
                      gguf_value_type_name(elem), left);
    out->array_type_ = elem;
    out->count_ = static_cast<size_t>(n);
    if (elem == GgufValueType::STRING) {
        // Grow as items are read (a lying count must not allocate up front); reserve a bounded amount.
        out->strings_.reserve(std::min<size_t>(out->count_, kMaxReserve));
        for (size_t i = 0; i < out->count_; ++i) {
            size_t l = size_ - *pos;
            if (l < 8) return strfmt("unexpected end of file in string item %zu of %zu", i, out->count_);
            uint64_t sl = load<uint64_t>(base_ + *pos);
            if (sl > l - 8)
                return strfmt("string item %zu: length %llu is beyond the end of the file", i, (unsigned long long)sl);
            out->strings_.emplace_back(reinterpret_cast<const char*>(base_ + *pos + 8), static_cast<size_t>(sl));
            *pos += 8 + static_cast<size_t>(sl);
        }
        return "";
    }
    if (elem == GgufValueType::ARRAY) {
        if (out->count_ > kMaxNestedItems - nested_items_)
            return strfmt("arrays of arrays hold more than %zu items in all (ember's limit)", kMaxNestedItems);
        nested_items_ += out->count_;
        out->arrays_.reserve(std::min<size_t>(out->count_, kMaxReserve));
        for (size_t i = 0; i < out->count_; ++i) {
            GgufValue item;
            item.type_ = GgufValueType::ARRAY;
            std::string e = parse_array(pos, &item, depth + 1);
            if (!e.empty())  // "item [i][j]: ..." for errors deep inside nested arrays
                return e.rfind("item [", 0) == 0 ? strfmt("item [%zu]%s", i, e.c_str() + 5)
                                                  : strfmt("item [%zu]: %s", i, e.c_str());
            out->arrays_.push_back(std::move(item));
        }
        return "";
    }
    out->raw_ = base_ + *pos;
    if (elem == GgufValueType::BOOL)
        for (size_t i = 0; i < out->count_; ++i)
            if (out->raw_[i] > 1)
                return strfmt("bool item %zu is %u (must be 0 or 1)", i, static_cast<unsigned>(out->raw_[i]));
    *pos += out->count_ * min_item;
    return "";
}

}  // namespace ember
