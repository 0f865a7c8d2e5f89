// Saved-session files (session_file.h): encoding, and decoding that trusts nothing in the file.
#include "runtime/session_file.h"

#include <cstdio>
#include <cstring>
#include <sys/stat.h>

#include "models/state_io.h"

namespace ember {

namespace {

const char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'S', 'E', 'S'};
constexpr size_t kMaxArch = 256, kMaxName = 64, kMaxDims = 4;

uint64_t layout_fingerprint(const CausalLM& m) {
    Fingerprint f;
    f.str(m.info().architecture);
    f.i64(m.info().vocab_size);
    for (const StateTensor& t : m.state_layout(1)) {
        f.str(t.name);
        for (int64_t d : t.shape) f.i64(d);
    }
    return f.value();
}

class Writer {
public:
    std::vector<uint8_t> b;
    void raw(const void* p, size_t n) { b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); }
    template <class T> void put(T v) { raw(&v, sizeof v); }
    void str(const std::string& s) { put<uint32_t>(static_cast<uint32_t>(s.size())); raw(s.data(), s.size()); }
    void ids(const std::vector<int32_t>& v) { put<int64_t>(static_cast<int64_t>(v.size())); raw(v.data(), v.size() * 4); }
};

// Bounds-checked reads; every failure names the file and the field.
class Reader {
public:
    Reader(const std::vector<uint8_t>& b, size_t end, const std::string& what) : b_(b), end_(end), what_(what) {}
    Status raw(void* p, size_t n, const char* field) {
        EMBER_REQUIRE(n <= end_ - at_, "%s: truncated saved session (%s at byte %zu needs %zu bytes, %zu left)",
                      what_.c_str(), field, at_, n, end_ - at_);
        if (n > 0) std::memcpy(p, b_.data() + at_, n);  // an empty vector's data() may be null (UBSan, fuzz_session)
        at_ += n;
        return Status::ok();
    }
    template <class T> Status get(T& v, const char* field) { return raw(&v, sizeof v, field); }
    Status str(std::string& s, size_t max, const char* field) {
        uint32_t n = 0;
        EMBER_TRY(get(n, field));
        EMBER_REQUIRE(n <= max, "%s: corrupt saved session (%s of %u bytes, at most %zu)", what_.c_str(), field, n, max);
        s.resize(n);
        return raw(s.data(), n, field);
    }
    Status ids(std::vector<int32_t>& v, int64_t max, int64_t vocab, const char* field) {
        int64_t n = 0;
        EMBER_TRY(get(n, field));
        EMBER_REQUIRE(n >= 0 && n <= max, "%s: corrupt saved session (%lld %s, at most %lld)", what_.c_str(),
                      (long long)n, field, (long long)max);
        EMBER_REQUIRE(static_cast<size_t>(n) * 4 <= end_ - at_, "%s: truncated saved session (%lld %s, %zu bytes left)",
                      what_.c_str(), (long long)n, field, end_ - at_);
        v.resize(static_cast<size_t>(n));
        EMBER_TRY(raw(v.data(), v.size() * 4, field));
        for (int32_t t : v)
            EMBER_REQUIRE(t >= 0 && t < vocab, "%s: corrupt saved session (token %d in %s outside [0, %lld))",
                          what_.c_str(), t, field, (long long)vocab);
        return Status::ok();
    }
    size_t at() const { return at_; }

private:
    const std::vector<uint8_t>& b_;
    size_t end_, at_ = 0;
    const std::string& what_;
};

}  // namespace

uint64_t session_checksum(const uint8_t* p, size_t n) {
    Fingerprint f;
    f.bytes(p, n);
    return f.value();
}

std::vector<uint8_t> encode_session(const CausalLM& m, const SessionFile& s) {
    Writer w;
    w.raw(kMagic, 8);
    w.put<uint32_t>(kSessionFileVersion);
    w.put<uint32_t>(0);
    w.put<uint64_t>(m.weights_fingerprint());
    w.put<uint64_t>(layout_fingerprint(m));
    w.str(m.info().architecture);
    w.put<int64_t>(m.info().vocab_size);
    w.put<int64_t>(s.pos);
    w.ids(s.tokens);
    w.ids(s.pending);
    w.put<uint8_t>((s.host_rng ? 1 : 0) | (s.device_rng ? 2 : 0));
    w.put<uint64_t>(s.host_seed);
    for (uint64_t v : s.host_state) w.put<uint64_t>(v);
    w.put<uint64_t>(s.device_seed);
    w.put<uint64_t>(s.device_counter);
    w.put<uint32_t>(static_cast<uint32_t>(s.tensors.size()));
    for (const StateTensor& t : s.tensors) {
        w.str(t.name);
        w.put<uint8_t>(0);
        w.put<uint8_t>(static_cast<uint8_t>(t.shape.size()));
        for (int64_t d : t.shape) w.put<int64_t>(d);
        w.raw(t.data.data(), t.data.size() * sizeof(float));
    }
    w.put<uint64_t>(session_checksum(w.b.data(), w.b.size()));
    return std::move(w.b);
}

Expected<SessionFile> decode_session(const CausalLM& m, const std::vector<uint8_t>& b, const std::string& what) {
    const char* p = what.c_str();
    EMBER_REQUIRE(!m.state_layout(0).empty(), "saved sessions are not supported by this model (%s)",
                  m.info().architecture.c_str());
    EMBER_REQUIRE(b.size() >= 8 && std::memcmp(b.data(), kMagic, 8) == 0,
                  "%s: not an ember saved session (no EMBERSES magic)", p);
    EMBER_REQUIRE(b.size() >= 24, "%s: truncated saved session (%zu bytes)", p, b.size());
    uint32_t version = 0;
    std::memcpy(&version, b.data() + 8, 4);
    EMBER_REQUIRE(version == kSessionFileVersion, "%s: saved session version %u; this build reads version %u", p,
                  version, kSessionFileVersion);
    uint64_t sum = 0;
    std::memcpy(&sum, b.data() + b.size() - 8, 8);
    EMBER_REQUIRE(sum == session_checksum(b.data(), b.size() - 8),
                  "%s: saved session checksum mismatch (the file is truncated or corrupted)", p);
    Reader r(b, b.size() - 8, what);
    uint8_t head[16];
    EMBER_TRY(r.raw(head, 16, "header"));
    uint64_t wfp = 0, lfp = 0;
    std::string arch;
    int64_t vocab = 0;
    EMBER_TRY(r.get(wfp, "weights fingerprint"));
    EMBER_TRY(r.get(lfp, "layout fingerprint"));
    EMBER_TRY(r.str(arch, kMaxArch, "architecture"));
    EMBER_TRY(r.get(vocab, "vocabulary size"));
    EMBER_REQUIRE(lfp == layout_fingerprint(m) && vocab == m.info().vocab_size,
                  "%s: saved by another model (%s, vocabulary %lld); this model is %s, vocabulary %lld", p, arch.c_str(),
                  (long long)vocab, m.info().architecture.c_str(), (long long)m.info().vocab_size);
    const uint64_t mine = m.weights_fingerprint();
    EMBER_REQUIRE(wfp == mine,
                  "%s: saved by a model of the same shape (%s) with other weights (fingerprint %016llx, this model "
                  "%016llx)", p, arch.c_str(), (unsigned long long)wfp, (unsigned long long)mine);
    SessionFile s;
    EMBER_TRY(r.get(s.pos, "position"));
    EMBER_REQUIRE(s.pos >= 0 && s.pos <= m.info().max_context, "%s: corrupt saved session (position %lld, context %lld)",
                  p, (long long)s.pos, (long long)m.info().max_context);
    EMBER_TRY(r.ids(s.tokens, s.pos, vocab, "tokens"));
    EMBER_REQUIRE(static_cast<int64_t>(s.tokens.size()) == s.pos, "%s: corrupt saved session (%zu tokens at position %lld)",
                  p, s.tokens.size(), (long long)s.pos);
    EMBER_TRY(r.ids(s.pending, 1, vocab, "pending tokens"));
    uint8_t flags = 0;
    EMBER_TRY(r.get(flags, "flags"));
    EMBER_REQUIRE(flags <= 3, "%s: corrupt saved session (flags %u)", p, flags);
    s.host_rng = flags & 1, s.device_rng = flags & 2;
    EMBER_TRY(r.get(s.host_seed, "host seed"));
    for (uint64_t& v : s.host_state) EMBER_TRY(r.get(v, "host RNG state"));
    EMBER_TRY(r.get(s.device_seed, "device seed"));
    EMBER_TRY(r.get(s.device_counter, "device RNG counter"));
    uint32_t n = 0;
    EMBER_TRY(r.get(n, "tensor count"));
    std::vector<StateTensor> want = m.state_layout(s.pos);
    EMBER_REQUIRE(n == want.size(), "%s: corrupt saved session (%u state tensors; the model has %zu)", p, n, want.size());
    for (StateTensor& t : want) {
        std::string name;
        EMBER_TRY(r.str(name, kMaxName, "tensor name"));
        uint8_t dtype = 0, ndim = 0;
        EMBER_TRY(r.get(dtype, "tensor dtype"));
        EMBER_TRY(r.get(ndim, "tensor rank"));
        EMBER_REQUIRE(name == t.name && dtype == 0 && ndim == t.shape.size() && ndim <= kMaxDims,
                      "%s: corrupt saved session (tensor '%s' dtype %u rank %u where '%s' f32 rank %zu belongs)", p,
                      name.c_str(), dtype, ndim, t.name.c_str(), t.shape.size());
        for (int64_t want_d : t.shape) {
            int64_t d = 0;
            EMBER_TRY(r.get(d, "tensor shape"));
            EMBER_REQUIRE(d == want_d, "%s: corrupt saved session (tensor '%s': dimension %lld, expected %lld)", p,
                          name.c_str(), (long long)d, (long long)want_d);
        }
        const size_t bytes = static_cast<size_t>(t.numel()) * sizeof(float);
        EMBER_REQUIRE(bytes <= b.size() - 8 - r.at(), "%s: truncated saved session (tensor '%s' needs %zu bytes)", p,
                      name.c_str(), bytes);
        t.data.resize(static_cast<size_t>(t.numel()));
        EMBER_TRY(r.raw(t.data.data(), bytes, "tensor data"));
    }
    EMBER_REQUIRE(r.at() == b.size() - 8, "%s: corrupt saved session (%zu bytes after the last tensor)", p,
                  b.size() - 8 - r.at());
    s.tensors = std::move(want);
    return s;
}

Status write_session_file(const std::string& path, const CausalLM& m, const SessionFile& s) {
    const std::vector<uint8_t> b = encode_session(m, s);
    const std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    EMBER_REQUIRE(f != nullptr, "%s: cannot write the saved session", tmp.c_str());
    const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
    const bool closed = std::fclose(f) == 0;
    if (!ok || !closed) {
        std::remove(tmp.c_str());
        return errorf("%s: write failed (disk full?)", tmp.c_str());
    }
    EMBER_REQUIRE(std::rename(tmp.c_str(), path.c_str()) == 0, "%s: cannot rename to %s", tmp.c_str(), path.c_str());
    return Status::ok();
}

Expected<SessionFile> read_session_file(const std::string& path, const CausalLM& m) {
    struct stat sb {};
    EMBER_REQUIRE(::stat(path.c_str(), &sb) == 0 && S_ISREG(sb.st_mode), "%s: no such saved session file", path.c_str());
    // The largest state this model can have (a full context) plus the header: a bigger file is not ours.
    int64_t max_bytes = 4096 + 8 * m.info().max_context;
    for (const StateTensor& t : m.state_layout(m.info().max_context)) max_bytes += 128 + 4 * t.numel();
    EMBER_REQUIRE(sb.st_size <= max_bytes, "%s: %lld bytes is larger than any saved session of this model (%lld)",
                  path.c_str(), (long long)sb.st_size, (long long)max_bytes);
    std::vector<uint8_t> b(static_cast<size_t>(sb.st_size));
    FILE* f = std::fopen(path.c_str(), "rb");
    EMBER_REQUIRE(f != nullptr, "%s: cannot open the saved session", path.c_str());
    const size_t got = std::fread(b.data(), 1, b.size(), f);
    std::fclose(f);
    EMBER_REQUIRE(got == b.size(), "%s: read %zu of %zu bytes", path.c_str(), got, b.size());
    return decode_session(m, b, path);
}

}  // namespace ember
