// GGUF writer implementation: value encoding, tensor layout with alignment padding, file output.
#include "io/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdint>

#include "core/check.h"

namespace ember {

static_assert(std::endian::native == std::endian::little, "the writer emits host-order bytes: little-endian only");

GgufMetaValue GgufMetaValue::integer(GgufValueType t, int64_t v) {
    int64_t lo = 0, hi = 0;
    switch (t) {
        case GgufValueType::U8: hi = 0xff; break;
        case GgufValueType::I8: lo = -128; hi = 127; break;
        case GgufValueType::U16: hi = 0xffff; break;
        case GgufValueType::I16: lo = -32768; hi = 32767; break;
        case GgufValueType::U32: hi = 0xffffffffll; break;
        case GgufValueType::I32: lo = INT32_MIN; hi = INT32_MAX; break;
        case GgufValueType::U64: hi = INT64_MAX; break;  // larger values: u64()
        case GgufValueType::I64: lo = INT64_MIN; hi = INT64_MAX; break;
        default: EMBER_CHECK(false, "%s is not an integer type", gguf_value_type_name(t));
    }
    EMBER_CHECK(v >= lo && v <= hi, "%lld does not fit %s", (long long)v, gguf_value_type_name(t));
    GgufMetaValue m;
    m.type = t;
    m.bits = static_cast<uint64_t>(v);
    return m;
}

GgufMetaValue GgufMetaValue::u64(uint64_t v) {
    GgufMetaValue m;
    m.type = GgufValueType::U64;
    m.bits = v;
    return m;
}

GgufMetaValue GgufMetaValue::f32(float v) {
    GgufMetaValue m;
    m.type = GgufValueType::F32;
    m.f = v;
    return m;
}

GgufMetaValue GgufMetaValue::f64(double v) {
    GgufMetaValue m;
    m.type = GgufValueType::F64;
    m.f = v;
    return m;
}

GgufMetaValue GgufMetaValue::boolean(bool v) {
    GgufMetaValue m;
    m.type = GgufValueType::BOOL;
    m.bits = v ? 1 : 0;
    return m;
}

GgufMetaValue GgufMetaValue::string(std::string v) {
    GgufMetaValue m;
    m.type = GgufValueType::STRING;
    m.str = std::move(v);
    return m;
}

GgufMetaValue GgufMetaValue::array(GgufValueType elem, std::vector<GgufMetaValue> items) {
    for (const auto& it : items)
        EMBER_CHECK(it.type == elem, "array of %s has an item of type %s", gguf_value_type_name(elem),
                    gguf_value_type_name(it.type));
    GgufMetaValue m;
    m.type = GgufValueType::ARRAY;
    m.array_type = elem;
    m.items = std::move(items);
    return m;
}

GgufMetaValue GgufMetaValue::strings(const std::vector<std::string>& v) {
    std::vector<GgufMetaValue> items;
    items.reserve(v.size());
    for (const auto& s : v) items.push_back(string(s));
    return array(GgufValueType::STRING, std::move(items));
}

GgufMetaValue GgufMetaValue::ints(GgufValueType elem, const std::vector<int64_t>& v) {
    std::vector<GgufMetaValue> items;
    items.reserve(v.size());
    for (int64_t x : v) items.push_back(integer(elem, x));
    return array(elem, std::move(items));
}

GgufMetaValue GgufMetaValue::floats(GgufValueType elem, const std::vector<double>& v) {
    EMBER_CHECK(gguf_value_type_is_float(elem), "floats() needs F32 or F64");
    std::vector<GgufMetaValue> items;
    items.reserve(v.size());
    for (double x : v) items.push_back(elem == GgufValueType::F32 ? f32(static_cast<float>(x)) : f64(x));
    return array(elem, std::move(items));
}

// ---------------------------------------------------------------------------------------------------------

namespace {

struct Out {
    std::vector<uint8_t> b;
    template <class T>
    void put(T v) {
        size_t n = b.size();
        b.resize(n + sizeof(T));
        std::memcpy(b.data() + n, &v, sizeof(T));
    }
    void str(const std::string& s) {
        put<uint64_t>(s.size());
        size_t n = b.size();
        b.resize(n + s.size());
        if (!s.empty()) std::memcpy(b.data() + n, s.data(), s.size());
    }
    void pad_to(size_t alignment) { b.resize((b.size() + alignment - 1) / alignment * alignment, 0); }

    // The value only (its type tag is written by the caller).
    void value(const GgufMetaValue& v) {
        switch (v.type) {
            case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL:
                put<uint8_t>(uint8_t(v.bits));
                break;
            case GgufValueType::U16: case GgufValueType::I16: put<uint16_t>(uint16_t(v.bits)); break;
            case GgufValueType::U32: case GgufValueType::I32: put<uint32_t>(uint32_t(v.bits)); break;
            case GgufValueType::U64: case GgufValueType::I64: put<uint64_t>(v.bits); break;
            case GgufValueType::F32: put<float>(static_cast<float>(v.f)); break;
            case GgufValueType::F64: put<double>(v.f); break;
            case GgufValueType::STRING: str(v.str); break;
            case GgufValueType::ARRAY:
                put<uint32_t>(static_cast<uint32_t>(v.array_type));
                put<uint64_t>(v.items.size());
                for (const auto& it : v.items) value(it);
                break;
        }
    }
};

}  // namespace

void GgufWriter::set(const std::string& key, GgufMetaValue v) {
    for (auto& kv : kvs_)
        if (kv.first == key) {
            kv.second = std::move(v);
            return;
        }
    kvs_.emplace_back(key, std::move(v));
}

void GgufWriter::set_alignment(uint32_t alignment) {
    EMBER_CHECK(alignment && (alignment & (alignment - 1)) == 0, "alignment %u is not a power of two", alignment);
    alignment_ = alignment;
    if (alignment != 32) set_u32("general.alignment", alignment);
}

void GgufWriter::set_version(uint32_t version) {
    EMBER_CHECK(version == 2 || version == 3, "GGUF version %u", version);
    version_ = version;
}

Status GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> ne, GgmlType type, const void* data,
                              size_t nbytes) {
    for (const auto& t : tensors_)
        EMBER_REQUIRE(t.name != name, "gguf writer: tensor '%s' added twice", name.c_str());
    GgmlTypeTraits tr = ggml_type_traits(type);
    EMBER_REQUIRE(tr.name, "gguf writer: tensor '%s': unknown ggml type %u", name.c_str(), static_cast<unsigned>(type));
    EMBER_REQUIRE(ne.size() <= 4, "gguf writer: tensor '%s': %zu dims (at most 4)", name.c_str(), ne.size());
    int64_t ne0 = ne.empty() ? 1 : ne[0];
    uint64_t want = 0;
    bool ok = ne0 >= 0 && ne0 % tr.block_elems == 0;
    if (ok) {
        want = static_cast<uint64_t>(ne0 / tr.block_elems) * tr.block_bytes;
        for (size_t d = 1; d < ne.size() && ok; ++d)
            ok = ne[d] >= 0 && !__builtin_mul_overflow(want, static_cast<uint64_t>(ne[d]), &want);
    }
    EMBER_REQUIRE(ok, "gguf writer: tensor '%s': bad shape for %s (ne[0] must be a multiple of %d)", name.c_str(),
                  tr.name, tr.block_elems);
    EMBER_REQUIRE(want == nbytes, "gguf writer: tensor '%s': %zu bytes given, shape and %s need %llu", name.c_str(),
                  nbytes, tr.name, (unsigned long long)want);
    const auto* p = static_cast<const uint8_t*>(data);
    tensors_.push_back({name, std::move(ne), type, std::vector<uint8_t>(p, p + nbytes)});
    return Status::ok();
}

std::vector<uint8_t> GgufWriter::serialize() const {
    Out o;
    o.put<uint32_t>(0x46554747u);  // the bytes "GGUF"
    o.put<uint32_t>(version_);
    o.put<uint64_t>(tensors_.size());
    o.put<uint64_t>(kvs_.size());
    for (const auto& [key, v] : kvs_) {
        o.str(key);
        o.put<uint32_t>(static_cast<uint32_t>(v.type));
        o.value(v);
    }
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
        o.str(t.name);
        o.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) o.put<uint64_t>(static_cast<uint64_t>(d));
        o.put<uint32_t>(static_cast<uint32_t>(t.type));
        o.put<uint64_t>(offset);
        offset += (t.bytes.size() + alignment_ - 1) / alignment_ * alignment_;
    }
    o.pad_to(alignment_);
    for (const auto& t : tensors_) {
        o.b.insert(o.b.end(), t.bytes.begin(), t.bytes.end());
        o.pad_to(alignment_);
    }
    return std::move(o.b);
}

Status GgufWriter::write(const std::string& path) const {
    std::vector<uint8_t> b = serialize();
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return errorf("%s: cannot create: %s", path.c_str(), std::strerror(errno));
    size_t n = std::fwrite(b.data(), 1, b.size(), f);
    int e = errno;
    bool closed = std::fclose(f) == 0;
    if (n != b.size() || !closed)
        return errorf("%s: write failed: %s", path.c_str(), std::strerror(n != b.size() ? e : errno));
    return Status::ok();
}

}  // namespace ember
