// GGUF reader: header, metadata and tensor-info parsing with validation of every field; tensor placement.
#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace ember {

namespace {

constexpr size_t kHeaderBytes = 24;        // magic, version, n_tensors, n_kv
constexpr size_t kMinKvBytes = 8 + 4 + 1;  // empty key, type, 1-byte value
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims = 0, type, offset
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxAlignment = 1ull << 30;
constexpr uint64_t kMaxReserve = 1u << 16;

template <class T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

std::string type_desc(const GgufValue& v) {
    if (!v.is_array()) return gguf_value_type_name(v.type());
    return strfmt("array of %s", gguf_value_type_name(v.array_type()));
}

}  // namespace

int64_t GgufTensor::numel() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;  // cannot overflow: checked on open
    return n;
}

const char* GgufTensor::type_name() const { return ggml_type_traits(type).name; }

std::string GgufTensor::shape_str() const {
    std::string s = "[";
    for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

Expected<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
    EMBER_ASSIGN(auto mf, MappedFile::open(path));
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = path;
    f->file_ = mf;
    return parse(std::move(f), mf->data(), mf->size());
}

Expected<std::unique_ptr<GgufFile>> GgufFile::from_bytes(std::vector<uint8_t> bytes, const std::string& name) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = name;
    f->bytes_ = std::move(bytes);
    const uint8_t* p = f->bytes_.data();
    size_t n = f->bytes_.size();
    return parse(std::move(f), p, n);
}

Expected<std::unique_ptr<GgufFile>> GgufFile::parse(std::unique_ptr<GgufFile> f, const uint8_t* p, size_t n) {
    const char* path = f->path_.c_str();
    f->size_ = n;
    EMBER_REQUIRE(n >= 4, "%s: file too small for a GGUF header (%zu bytes)", path, n);
    EMBER_REQUIRE(std::memcmp(p, "GGUF", 4) == 0,
                  "%s: not a GGUF file (magic bytes %02x %02x %02x %02x, expected \"GGUF\")", path, p[0], p[1], p[2],
                  p[3]);
    EMBER_REQUIRE(n >= kHeaderBytes, "%s: GGUF header truncated (%zu bytes, need %zu)", path, n, kHeaderBytes);
    uint32_t version = load<uint32_t>(p + 4);
    uint32_t swapped = __builtin_bswap32(version);
    EMBER_REQUIRE(!(swapped >= 1 && swapped <= 3), "%s: big-endian GGUF file (version %u): not supported", path,
                  swapped);
    EMBER_REQUIRE(version == 2 || version == 3, "%s: unsupported GGUF version %u (ember reads versions 2 and 3)",
                  path, version);
    f->version_ = version;
    uint64_t n_tensors = load<uint64_t>(p + 8);
    uint64_t n_kv = load<uint64_t>(p + 16);
    size_t left = n - kHeaderBytes;
    EMBER_REQUIRE(n_kv <= left / kMinKvBytes,
                  "%s: metadata key count %llu cannot fit in the file (%zu bytes after the header)", path,
                  (unsigned long long)n_kv, left);
    EMBER_REQUIRE(n_tensors <= left / kMinTensorInfoBytes,
                  "%s: tensor count %llu cannot fit in the file (%zu bytes after the header)", path,
                  (unsigned long long)n_tensors, left);
    size_t pos = kHeaderBytes;
    EMBER_TRY(f->parse_metadata(p, n, &pos, n_kv));
    EMBER_TRY(f->parse_tensor_infos(p, n, &pos, n_tensors));
    f->data_offset_ = (pos + f->alignment_ - 1) / f->alignment_ * f->alignment_;
    EMBER_TRY(f->place_tensors(p, n));
    return f;
}

Status GgufFile::parse_metadata(const uint8_t* p, size_t n, size_t* pos, uint64_t n_kv) {
    const char* path = path_.c_str();
    GgufValueParser vp(p, n);
    kvs_.reserve(std::min<uint64_t>(n_kv, kMaxReserve));  // counts may lie: bounded
    for (uint64_t i = 0; i < n_kv; ++i) {
        GgufKv kv;
        GgufValue key;
        std::string e = vp.parse(GgufValueType::STRING, pos, &key);
        if (!e.empty())
            return errorf("%s: metadata key #%llu of %llu: %s", path, (unsigned long long)i, (unsigned long long)n_kv,
                          e.c_str());
        kv.key = *key.as_string();
        std::string k(kv.key);
        if (n - *pos < 4) return errorf("%s: metadata '%s': unexpected end of file in the value type", path, k.c_str());
        uint32_t type = load<uint32_t>(p + *pos);
        *pos += 4;
        e = vp.parse(static_cast<GgufValueType>(type), pos, &kv.value);
        if (!e.empty()) return errorf("%s: metadata '%s': %s", path, k.c_str(), e.c_str());
        if (!kv_index_.emplace(kv.key, kvs_.size()).second)
            return errorf("%s: metadata key '%s' appears twice", path, k.c_str());
        kvs_.push_back(std::move(kv));
    }
    if (const GgufValue* a = find("general.alignment")) {
        auto v = a->as_uint();
        if (!v)
            return errorf("%s: general.alignment has type %s, expected an unsigned integer", path,
                          type_desc(*a).c_str());
        if (*v == 0 || (*v & (*v - 1)) != 0 || *v > kMaxAlignment)
            return errorf("%s: general.alignment is %llu, expected a power of two no larger than 2^30", path,
                          (unsigned long long)*v);
        alignment_ = static_cast<uint32_t>(*v);
    }
    return Status::ok();
}

Status GgufFile::parse_tensor_infos(const uint8_t* p, size_t n, size_t* pos, uint64_t n_tensors) {
    const char* path = path_.c_str();
    GgufValueParser vp(p, n);
    tensors_.reserve(std::min<uint64_t>(n_tensors, kMaxReserve));
    for (uint64_t i = 0; i < n_tensors; ++i) {
        GgufValue name;
        std::string e = vp.parse(GgufValueType::STRING, pos, &name);
        if (!e.empty())
            return errorf("%s: tensor info #%llu of %llu: name: %s", path, (unsigned long long)i,
                          (unsigned long long)n_tensors, e.c_str());
        std::string_view nv = *name.as_string();
        GgufTensor t;
        t.name = std::string(nv);
        const char* tn = t.name.c_str();
        auto truncated = [&](const char* field) {
            return errorf("%s: tensor '%s': unexpected end of file in %s", path, tn, field);
        };
        if (n - *pos < 4) return truncated("n_dims");
        uint32_t n_dims = load<uint32_t>(p + *pos);
        *pos += 4;
        if (n_dims > kMaxDims) return errorf("%s: tensor '%s': n_dims is %u (at most %u)", path, tn, n_dims, kMaxDims);
        if (n - *pos < 8ull * n_dims) return truncated("ne[]");
        int64_t numel = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            uint64_t v = load<uint64_t>(p + *pos);
            *pos += 8;
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                return errorf("%s: tensor '%s': ne[%u] = %llu is out of range", path, tn, d, (unsigned long long)v);
            t.ne.push_back(static_cast<int64_t>(v));
            if (__builtin_mul_overflow(numel, static_cast<int64_t>(v), &numel))
                return errorf("%s: tensor '%s': element count of %s overflows", path, tn, t.shape_str().c_str());
        }
        if (n - *pos < 12) return truncated("type and offset");
        uint32_t type_id = load<uint32_t>(p + *pos);
        t.offset = load<uint64_t>(p + *pos + 4);
        *pos += 12;
        GgmlTypeTraits tr = ggml_type_traits(type_id);
        if (!tr.name) return errorf("%s: tensor '%s': unknown ggml type id %u", path, tn, type_id);
        t.type = static_cast<GgmlType>(type_id);
        int64_t ne0 = n_dims ? t.ne[0] : 1;
        if (ne0 % tr.block_elems != 0)
            return errorf("%s: tensor '%s': ne[0] = %lld is not a multiple of the %s block size %d", path, tn,
                          (long long)ne0, tr.name, tr.block_elems);
        // bytes = ne0/block · block_bytes · ne[1] · ne[2] · ne[3]; each step checked.
        uint64_t bytes = 0;
        bool overflow = __builtin_mul_overflow(static_cast<uint64_t>(ne0 / tr.block_elems),
                                               static_cast<uint64_t>(tr.block_bytes), &bytes);
        for (uint32_t d = 1; d < n_dims; ++d)
            overflow = overflow || __builtin_mul_overflow(bytes, static_cast<uint64_t>(t.ne[d]), &bytes);
        if (overflow)
            return errorf("%s: tensor '%s': byte size of %s %s overflows", path, tn, t.shape_str().c_str(), tr.name);
        t.nbytes = bytes;
        if (!tensor_index_.emplace(nv, tensors_.size()).second)
            return errorf("%s: tensor name '%s' appears twice", path, tn);
        tensors_.push_back(std::move(t));
    }
    return Status::ok();
}

Status GgufFile::place_tensors(const uint8_t* p, size_t n) {
    const char* path = path_.c_str();
    if (tensors_.empty()) return Status::ok();
    if (data_offset_ > n)
        return errorf("%s: the data section would start at offset %llu, past the end of the file (%zu bytes; "
                      "truncated?)", path, (unsigned long long)data_offset_, n);
    uint64_t data_size = n - data_offset_;
    std::vector<size_t> order;
    order.reserve(tensors_.size());
    for (size_t i = 0; i < tensors_.size(); ++i) {
        GgufTensor& t = tensors_[i];
        if (t.offset % alignment_ != 0)
            return errorf("%s: tensor '%s': offset %llu is not a multiple of the alignment %u", path, t.name.c_str(),
                          (unsigned long long)t.offset, alignment_);
        if (t.offset > data_size || t.nbytes > data_size - t.offset)
            return errorf("%s: tensor '%s': data [%llu, +%llu) is past the end of the data section (%llu bytes; "
                          "truncated?)", path, t.name.c_str(), (unsigned long long)t.offset,
                          (unsigned long long)t.nbytes, (unsigned long long)data_size);
        t.data = p + data_offset_ + t.offset;
        if (t.nbytes) order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
        const GgufTensor& a = tensors_[order[k - 1]];
        const GgufTensor& b = tensors_[order[k]];
        if (b.offset < a.offset + a.nbytes)
            return errorf("%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap in the data section", path,
                          a.name.c_str(), (unsigned long long)a.offset, (unsigned long long)(a.offset + a.nbytes),
                          b.name.c_str(), (unsigned long long)b.offset, (unsigned long long)(b.offset + b.nbytes));
    }
    return Status::ok();
}

const GgufValue* GgufFile::find(std::string_view key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status GgufFile::require_supported(const GgufTensor& t) const {
    if (ggml_type_traits(t.type).supported) return Status::ok();
    return errorf("%s: tensor %s has type %s, which ember does not support", path_.c_str(), t.name.c_str(),
                  t.type_name());
}

// ---------------------------------------------------------------------------------------------------------
// Typed getters.

Status GgufFile::key_error(std::string_view key, const char* what) const {
    return errorf("%s: metadata key '%.*s' %s", path_.c_str(), (int)key.size(), key.data(), what);
}

Expected<const GgufValue*> GgufFile::require(std::string_view key, bool array) const {
    const GgufValue* v = find(key);
    if (!v) return key_error(key, "is missing");
    if (v->is_array() != array)
        return key_error(key, strfmt("has type %s, expected %s", type_desc(*v).c_str(),
                                     array ? "an array" : "a single value").c_str());
    return v;
}

Expected<std::string> GgufFile::get_string(std::string_view key) const {
    EMBER_ASSIGN(const GgufValue* v, require(key, false));
    auto s = v->as_string();
    if (!s) return key_error(key, strfmt("has type %s, expected a string", type_desc(*v).c_str()).c_str());
    return std::string(*s);
}

Expected<int64_t> GgufFile::get_int(std::string_view key) const {
    EMBER_ASSIGN(const GgufValue* v, require(key, false));
    if (auto i = v->as_int()) return *i;
    if (gguf_value_type_is_integer(v->type()))
        return key_error(key, strfmt("= %llu does not fit in a signed 64-bit integer",
                                     (unsigned long long)*v->as_uint()).c_str());
    return key_error(key, strfmt("has type %s, expected an integer", type_desc(*v).c_str()).c_str());
}

Expected<double> GgufFile::get_float(std::string_view key) const {
    EMBER_ASSIGN(const GgufValue* v, require(key, false));
    if (auto f = v->as_float()) return *f;
    return key_error(key, strfmt("has type %s, expected a number", type_desc(*v).c_str()).c_str());
}

Expected<bool> GgufFile::get_bool(std::string_view key) const {
    EMBER_ASSIGN(const GgufValue* v, require(key, false));
    if (auto b = v->as_bool()) return *b;
    return key_error(key, strfmt("has type %s, expected a bool", type_desc(*v).c_str()).c_str());
}

Expected<std::vector<std::string_view>> GgufFile::get_string_array(std::string_view key) const {
    EMBER_ASSIGN(const GgufValue* v, require(key, true));
    if (v->array_type() != GgufValueType::STRING)
        return key_error(key, strfmt("has type %s, expected an array of strings", type_desc(*v).c_str()).c_str());
    std::vector<std::string_view> out(v->size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = v->string_at(i);
    return out;
}

Expected<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
    EMBER_ASSIGN(const GgufValue* v, require(key, true));
    if (!gguf_value_type_is_integer(v->array_type()))
        return key_error(key, strfmt("has type %s, expected an array of integers", type_desc(*v).c_str()).c_str());
    std::vector<int64_t> out(v->size());
    for (size_t i = 0; i < out.size(); ++i) {
        auto x = v->int_at(i);
        if (!x) return key_error(key, strfmt("item %zu does not fit in a signed 64-bit integer", i).c_str());
        out[i] = *x;
    }
    return out;
}

Expected<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
    EMBER_ASSIGN(const GgufValue* v, require(key, true));
    GgufValueType et = v->array_type();
    if (!gguf_value_type_is_integer(et) && !gguf_value_type_is_float(et))
        return key_error(key, strfmt("has type %s, expected an array of numbers", type_desc(*v).c_str()).c_str());
    std::vector<float> out(v->size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(*v->float_at(i));
    return out;
}

Expected<std::string> GgufFile::get_string_or(std::string_view key, std::string def) const {
    return find(key) ? get_string(key) : Expected<std::string>(std::move(def));
}

Expected<int64_t> GgufFile::get_int_or(std::string_view key, int64_t def) const {
    return find(key) ? get_int(key) : Expected<int64_t>(def);
}

Expected<double> GgufFile::get_float_or(std::string_view key, double def) const {
    return find(key) ? get_float(key) : Expected<double>(def);
}

Expected<bool> GgufFile::get_bool_or(std::string_view key, bool def) const {
    return find(key) ? get_bool(key) : Expected<bool>(def);
}

// ---------------------------------------------------------------------------------------------------------

std::string describe_metadata(const GgufFile& f, size_t max_array_items) {
    std::string out = strfmt("GGUF v%u: %zu tensors, %zu metadata keys, alignment %u, data at offset %llu\n",
                             f.version(), f.tensors().size(), f.metadata().size(), f.alignment(),
                             (unsigned long long)f.data_offset());
    size_t w = 0;
    for (const auto& kv : f.metadata()) w = std::max(w, std::min<size_t>(kv.key.size(), 40));
    for (const auto& kv : f.metadata()) {
        const GgufValue& v = kv.value;
        std::string type = v.is_array() ? strfmt("arr[%s,%zu]", gguf_value_type_name(v.array_type()), v.size())
                                        : std::string(gguf_value_type_name(v.type()));
        out += strfmt("  %-*.*s  %-16s %s\n", (int)w, (int)kv.key.size(), kv.key.data(), type.c_str(),
                      v.to_string(max_array_items).c_str());
    }
    return out;
}

}  // namespace ember
