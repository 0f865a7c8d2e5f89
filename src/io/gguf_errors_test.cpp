// GGUF reader on broken files: every truncation, random corruption and each kind of lying field gives an
// error that names the file and the field — never a crash (these tests also run under ASan+UBSan; files are
// parsed from exact-size heap buffers so any overread is caught).
#include "io/gguf.h"
#include "io/gguf_writer.h"

#include "core/temp_dir.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

namespace ember {
namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Raw bytes of a hand-made (possibly invalid) GGUF file.
struct Raw {
    std::vector<uint8_t> b;
    Raw& u8(uint8_t v) { b.push_back(v); return *this; }
    Raw& u32(uint32_t v) { for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i))); return *this; }
    Raw& u64(uint64_t v) { for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i))); return *this; }
    Raw& str(const std::string& s) { u64(s.size()); b.insert(b.end(), s.begin(), s.end()); return *this; }
    Raw& key(const std::string& k, uint32_t type) { str(k); return u32(type); }
    Raw& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
        str(name);
        u32(static_cast<uint32_t>(ne.size()));
        for (uint64_t d : ne) u64(d);
        u32(type);
        return u64(offset);
    }
};

// Header + body (metadata and tensor infos), zero padding to `alignment`, then `data_bytes` of data.
std::vector<uint8_t> gguf(uint64_t n_tensors, uint64_t n_kv, const Raw& body, size_t data_bytes = 0,
                          size_t alignment = 32, uint32_t version = 3) {
    Raw r;
    r.b = {'G', 'G', 'U', 'F'};
    r.u32(version).u64(n_tensors).u64(n_kv);
    r.b.insert(r.b.end(), body.b.begin(), body.b.end());
    r.b.resize((r.b.size() + alignment - 1) / alignment * alignment, 0);
    for (size_t i = 0; i < data_bytes; ++i) r.u8(uint8_t(i * 37 + 11));
    return r.b;
}

constexpr uint32_t kF32 = 0, kQ4_0 = 2, kQ8_0 = 8, kF64 = 28;
constexpr uint32_t kU8 = 0, kU32 = 4, kI32 = 5, kBool = 7, kStr = 8, kArr = 9;

struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* expect;
};

TEST(GgufErrors, EachBrokenFieldIsNamed) {
    Raw one_kv;  // a valid key
    one_kv.key("general.name", kStr).str("x");
    auto nest = [](int depth) {  // depth + 1 levels of arrays
        Raw r;
        r.key("deep", kArr);
        for (int i = 0; i < depth; ++i) r.u32(kArr).u64(1);
        r.u32(kU8).u64(0);
        return r;
    };
    std::vector<Case> cases = {
        {"empty file", {}, "too small"},
        {"bad magic", {'G', 'G', 'M', 'L', 3, 0, 0, 0}, "not a GGUF file"},
        {"short header", {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0}, "header truncated"},
        {"version 1", gguf(0, 0, {}, 0, 32, 1), "unsupported GGUF version 1"},
        {"version 4", gguf(0, 0, {}, 0, 32, 4), "unsupported GGUF version 4"},
        {"big-endian", gguf(0, 0, {}, 0, 32, 0x03000000u), "big-endian"},
        {"huge kv count", gguf(0, uint64_t(1) << 60, one_kv), "metadata key count 1152921504606846976 cannot fit"},
        {"huge tensor count", gguf(uint64_t(1) << 62, 0, {}), "tensor count 4611686018427387904 cannot fit"},
        {"kv count lies", gguf(0, 3, one_kv), "metadata key #1 of 3"},
        {"key length huge", gguf(0, 1, Raw().u64(uint64_t(1) << 62).u32(kU8).u8(1)), "string length"},
        {"value type unknown", gguf(0, 1, Raw().key("k.bad", 13).u32(0)), "metadata 'k.bad': unknown value type 13"},
        {"bool not 0/1", gguf(0, 1, Raw().key("k.b", kBool).u8(2)), "bool value is 2"},
        {"string value huge", gguf(0, 1, Raw().key("k.s", kStr).u64(uint64_t(1) << 40)), "'k.s': string length"},
        {"array item type unknown", gguf(0, 1, Raw().key("k.a", kArr).u32(99).u64(1)),
         "'k.a': array of unknown value type 99"},
        {"array count huge", gguf(0, 1, Raw().key("k.a", kArr).u32(kI32).u64(uint64_t(1) << 61)),
         "'k.a': array of 2305843009213693952 i32 items cannot fit"},
        {"string item huge", gguf(0, 1, Raw().key("k.t", kArr).u32(kStr).u64(2).str("ok").u64(999999)),
         "'k.t': string item 1: length 999999"},
        {"bool item bad", gguf(0, 1, Raw().key("k.bb", kArr).u32(kBool).u64(3).u8(0).u8(1).u8(7)),
         "bool item 2 is 7"},
        {"nested too deep", gguf(0, 1, nest(8)),
         "'deep': item [0][0][0][0][0][0][0][0]: arrays nested more than 8 deep"},
        {"nested item broken", gguf(0, 1, Raw().key("k.n", kArr).u32(kArr).u64(2).u32(kU8).u64(0).u32(77).u64(0)),
         "'k.n': item [1]: array of unknown value type 77"},
        {"duplicate key", gguf(0, 2, Raw(one_kv).key("general.name", kU32).u32(1)), "'general.name' appears twice"},
        {"alignment not pow2", gguf(0, 1, Raw().key("general.alignment", kU32).u32(48)),
         "general.alignment is 48, expected a power of two"},
        {"alignment zero", gguf(0, 1, Raw().key("general.alignment", kU32).u32(0)), "general.alignment is 0"},
        {"alignment negative", gguf(0, 1, Raw().key("general.alignment", kI32).u32(uint32_t(-64))),
         "general.alignment has type i32, expected an unsigned"},
        {"alignment string", gguf(0, 1, Raw().key("general.alignment", kStr).str("32")),
         "general.alignment has type str"},
        {"tensor infos missing", gguf(2, 0, Raw().tensor("a", {4}, kF32, 0), 16), "tensor info #1 of 2"},
        {"n_dims 5", gguf(1, 0, Raw().tensor("t5", {1, 1, 1, 1, 1}, kF32, 0), 4), "tensor 't5': n_dims is 5"},
        {"ne > int64", gguf(1, 0, Raw().tensor("tb", {uint64_t(1) << 63}, kF32, 0)),
         "'tb': ne[0] = 9223372036854775808"},
        {"numel overflow", gguf(1, 0, Raw().tensor("to", {uint64_t(1) << 32, uint64_t(1) << 32}, kF32, 0)),
         "'to': element count of [4294967296, 4294967296] overflows"},
        {"byte size overflow", gguf(1, 0, Raw().tensor("tf", {uint64_t(1) << 62}, kF64, 0)), "'tf': byte size"},
        {"byte size overflow 2d", gguf(1, 0, Raw().tensor("tg", {uint64_t(1) << 40, uint64_t(1) << 21}, kF64, 0)),
         "'tg': byte size"},
        {"unknown type id 4", gguf(1, 0, Raw().tensor("tq", {32}, 4, 0), 32), "'tq': unknown ggml type id 4"},
        {"unknown type id 99", gguf(1, 0, Raw().tensor("tq", {32}, 99, 0), 32), "unknown ggml type id 99"},
        {"ne0 not block multiple", gguf(1, 0, Raw().tensor("q", {33, 2}, kQ4_0, 0), 64),
         "'q': ne[0] = 33 is not a multiple of the Q4_0 block size 32"},
        {"misaligned offset", gguf(1, 0, Raw().tensor("m", {4}, kF32, 16), 64),
         "'m': offset 16 is not a multiple of the alignment 32"},
        {"data past end", gguf(1, 0, Raw().tensor("p", {32}, kQ8_0, 32), 64), "'p': data [32, +34) is past the end"},
        {"offset huge", gguf(1, 0, Raw().tensor("h", {4}, kF32, uint64_t(-32)), 64), "'h': data"},
        {"data section missing", gguf(1, 0, Raw().tensor("d", {4}, kF32, 0), 0, /*pad to*/ 1),
         "data section would start"},
        {"overlap", gguf(2, 0, Raw().tensor("o1", {16}, kF32, 0).tensor("o2", {4}, kF32, 32), 96),
         "tensors 'o1' [0, 64) and 'o2' [32, 48) overlap"},
        {"duplicate tensor", gguf(2, 0, Raw().tensor("dup", {4}, kF32, 0).tensor("dup", {4}, kF32, 32), 64),
         "tensor name 'dup' appears twice"},
    };
    for (auto& c : cases) {
        auto f = GgufFile::from_bytes(c.bytes, "bad.gguf");
        ASSERT_FALSE(f.is_ok()) << c.what;
        EXPECT_NE(f.message().find(c.expect), std::string::npos) << c.what << ": " << f.message();
        EXPECT_EQ(f.message().rfind("bad.gguf: ", 0), 0u) << c.what << ": error must name the file: " << f.message();
    }
    // The same file with each defect removed opens.
    EXPECT_TRUE(GgufFile::from_bytes(gguf(2, 0, Raw().tensor("o1", {8}, kF32, 0).tensor("o2", {4}, kF32, 32), 96),
                                     "ok.gguf").is_ok());
    EXPECT_TRUE(GgufFile::from_bytes(gguf(0, 1, nest(7)), "ok.gguf").is_ok());
    auto empty_tensor = GgufFile::from_bytes(gguf(1, 0, Raw().tensor("z", {0, 5}, kQ4_0, 0)), "ok.gguf");
    ASSERT_TRUE(empty_tensor.is_ok()) << empty_tensor.message();
    EXPECT_EQ((*empty_tensor)->tensors()[0].nbytes, 0u);
}

// Arrays of arrays cost ~100 bytes of memory per 12 bytes of file: their items are bounded over the whole file
// (GgufValueParser::kMaxNestedItems), before any is allocated, so a hostile file cannot take 8× its size.
TEST(GgufErrors, NestedArrayItemsAreBounded) {
    const uint64_t limit = GgufValueParser::kMaxNestedItems;
    Raw over;
    over.key("k.nested", kArr).u32(kArr).u64(limit + 1);
    over.b.resize(over.b.size() + 12 * (limit + 1), 0);  // room for every item: only the limit refuses it
    auto f = GgufFile::from_bytes(gguf(0, 1, over), "nested.gguf");
    ASSERT_FALSE(f.is_ok());
    EXPECT_NE(f.message().find("'k.nested': arrays of arrays hold more than 1048576 items in all"), std::string::npos)
        << f.message();
    Raw two;  // the bound is over the file: two arrays of limit/2 + 1 items each exceed it too
    for (const char* k : {"k.a", "k.b"}) {
        two.key(k, kArr).u32(kArr).u64(limit / 2 + 1);
        for (uint64_t i = 0; i < limit / 2 + 1; ++i) two.u32(kU8).u64(0);
    }
    auto g = GgufFile::from_bytes(gguf(0, 2, two), "nested2.gguf");
    ASSERT_FALSE(g.is_ok());
    EXPECT_NE(g.message().find("'k.b': arrays of arrays hold more than"), std::string::npos) << g.message();
}

TEST(GgufErrors, OpenNamesThePath) {
    TempDir d;
    std::string p = (d.path() / "broken.gguf").string();
    auto bytes = gguf(1, 0, Raw().tensor("m", {4}, kF32, 16), 64);
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    auto f = GgufFile::open(p);
    ASSERT_FALSE(f.is_ok());
    EXPECT_EQ(f.message().rfind(p + ": tensor 'm'", 0), 0u) << f.message();
    auto g = GgufFile::open((d.path() / "missing.gguf").string());
    ASSERT_FALSE(g.is_ok());
    EXPECT_NE(g.message().find("cannot open"), std::string::npos) << g.message();
    std::ofstream(d.path() / "empty.gguf").flush();
    auto e = GgufFile::open((d.path() / "empty.gguf").string());
    ASSERT_FALSE(e.is_ok());
    EXPECT_NE(e.message().find("too small"), std::string::npos) << e.message();
}

// Bytes needed for a file to be valid: up to the end of its last tensor (trailing padding is optional).
size_t needed_bytes(const GgufFile& f) {
    uint64_t end = f.tensors().empty() ? 0 : f.data_offset();
    for (const auto& t : f.tensors()) end = std::max(end, f.data_offset() + t.offset + t.nbytes);
    if (f.tensors().empty()) end = f.file_size();
    return static_cast<size_t>(end);
}

void check_every_prefix(const std::vector<uint8_t>& full) {
    auto whole = GgufFile::from_bytes(full, "whole.gguf");
    ASSERT_TRUE(whole.is_ok()) << whole.message();
    size_t need = needed_bytes(**whole);
    ASSERT_LE(need, full.size());
    size_t errors = 0;
    for (size_t n = 0; n < full.size(); ++n) {
        auto f = GgufFile::from_bytes(std::vector<uint8_t>(full.begin(), full.begin() + n), "cut.gguf");
        if (n < need) {
            ASSERT_FALSE(f.is_ok()) << "prefix of " << n << " bytes opened (needs " << need << ")";
            ASSERT_EQ(f.message().rfind("cut.gguf: ", 0), 0u) << f.message();
            ++errors;
        } else {
            ASSERT_TRUE(f.is_ok()) << n << ": " << f.message();
        }
    }
    EXPECT_EQ(errors, need);
}

TEST(GgufErrors, EveryTruncationOfTheGgufPyFixture) {
    auto full = read_bytes(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/gguf/sample.gguf");
    ASSERT_GT(full.size(), 1000u);
    check_every_prefix(full);
}

TEST(GgufErrors, EveryTruncationOfAWriterFile) {
    GgufWriter w;
    w.set_alignment(16);
    w.set_string("general.architecture", "llama");
    w.set("a", GgufMetaValue::array(GgufValueType::ARRAY, {GgufMetaValue::strings({"x", "yz"}),
                                                           GgufMetaValue::ints(GgufValueType::I16, {1, -2})}));
    w.set("f", GgufMetaValue::f64(0.5));
    std::vector<uint8_t> d(34 * 2);
    for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i);
    ASSERT_TRUE(w.add_tensor("q", {32, 2}, GgmlType::Q8_0, d.data(), d.size()).is_ok());
    ASSERT_TRUE(w.add_tensor("v", {3}, GgmlType::F32, d.data(), 12).is_ok());
    check_every_prefix(w.serialize());
}

// Random corruption: flip bytes anywhere; the reader must return (ok or an error), never crash or overread.
TEST(GgufErrors, RandomCorruptionNeverCrashes) {
    auto full = read_bytes(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/gguf/sample.gguf");
    ASSERT_FALSE(full.empty());
    std::mt19937 rng(1234);
    int ok = 0, failed = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::vector<uint8_t> b = full;
        int flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < flips; ++k) {
            size_t at = rng() % b.size();
            switch (rng() % 3) {
                case 0: b[at] ^= uint8_t(1u << (rng() % 8)); break;
                case 1: b[at] = 0xff; break;
                default: b[at] = uint8_t(rng()); break;
            }
        }
        auto f = GgufFile::from_bytes(std::move(b), "fuzz.gguf");
        if (f.is_ok()) {
            ++ok;
            (void)describe_metadata(**f);  // walks every value
            for (const auto& t : (*f)->tensors()) ASSERT_LE(t.offset + t.nbytes + (*f)->data_offset(), full.size());
        } else {
            ++failed;
            EXPECT_EQ(f.message().rfind("fuzz.gguf: ", 0), 0u) << f.message();
        }
    }
    EXPECT_GT(failed, 0);
    EXPECT_GT(ok, 0);  // flips inside tensor data or string bytes keep the file valid
}

}  // namespace
}  // namespace ember
