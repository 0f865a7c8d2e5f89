// GGUF reader vs an independent oracle (a file written by gguf-py, described by sample.json — see
// scripts/make_gguf_fixtures.py), typed getters, and GgufWriter → GgufFile round trips.
#include "io/gguf.h"
#include "io/gguf_writer.h"

#include "core/temp_dir.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

namespace ember {
namespace {

using json = nlohmann::json;

std::string fixture_dir() { return std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/gguf/"; }

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::string hex(const uint8_t* p, size_t n) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s += d[p[i] >> 4];
        s += d[p[i] & 15];
    }
    return s;
}

// One item of type `t` at index i of array `v` against its json value.
void expect_item(const GgufValue& v, const std::string& t, size_t i, const json& want, const std::string& where) {
    SCOPED_TRACE(where + "[" + std::to_string(i) + "]");
    if (t == "str") {
        EXPECT_EQ(std::string(v.string_at(i)), want.get<std::string>());
    } else if (t == "bool") {
        EXPECT_EQ(*v.bool_at(i), want.get<bool>());
    } else if (t == "f32") {
        EXPECT_EQ(*v.float_at(i), static_cast<double>(static_cast<float>(want.get<double>())));
    } else if (t == "f64") {
        EXPECT_EQ(*v.float_at(i), want.get<double>());
    } else if (t == "u64") {
        auto x = v.int_at(i);
        if (want.get<uint64_t>() > uint64_t(INT64_MAX)) EXPECT_FALSE(x.has_value());
        else EXPECT_EQ(static_cast<uint64_t>(*x), want.get<uint64_t>());
    } else {
        EXPECT_EQ(*v.int_at(i), want.get<int64_t>());
    }
}

// A value against {"type": T, "value": V} or {"type": "arr", "array_type": T, "items": [...]}.
void expect_value(const GgufValue& v, const json& want, const std::string& where) {
    SCOPED_TRACE(where);
    std::string t = want["type"];
    ASSERT_EQ(gguf_value_type_name(v.type()), t);
    if (t == "arr") {
        std::string et = want["array_type"];
        ASSERT_EQ(gguf_value_type_name(v.array_type()), et);
        ASSERT_EQ(v.size(), want["items"].size());
        for (size_t i = 0; i < v.size(); ++i) {
            if (et == "arr") expect_value(v.array_at(i), want["items"][i], where + "[" + std::to_string(i) + "]");
            else expect_item(v, et, i, want["items"][i], where);
        }
        return;
    }
    const json& x = want["value"];
    if (t == "str") EXPECT_EQ(std::string(*v.as_string()), x.get<std::string>());
    else if (t == "bool") EXPECT_EQ(*v.as_bool(), x.get<bool>());
    else if (t == "f32") EXPECT_EQ(*v.as_float(), static_cast<double>(static_cast<float>(x.get<double>())));
    else if (t == "f64") EXPECT_EQ(*v.as_float(), x.get<double>());
    else if (t == "u64") EXPECT_EQ(*v.as_uint(), x.get<uint64_t>());
    else EXPECT_EQ(*v.as_int(), x.get<int64_t>());
}

TEST(Gguf, MatchesGgufPyFixture) {
    auto f = GgufFile::open(fixture_dir() + "sample.gguf");
    ASSERT_TRUE(f.is_ok()) << f.message();
    const GgufFile& g = **f;
    std::ifstream js(fixture_dir() + "sample.json");
    json want = json::parse(js);

    EXPECT_EQ(g.version(), want["version"].get<uint32_t>());
    EXPECT_EQ(g.alignment(), want["alignment"].get<uint32_t>());
    EXPECT_EQ(g.data_offset(), want["data_offset"].get<uint64_t>());
    EXPECT_EQ(g.file_size(), want["file_size"].get<uint64_t>());

    ASSERT_EQ(g.metadata().size(), want["metadata"].size());
    for (size_t i = 0; i < g.metadata().size(); ++i) {
        const json& w = want["metadata"][i];
        ASSERT_EQ(std::string(g.metadata()[i].key), w["key"].get<std::string>());
        expect_value(g.metadata()[i].value, w, w["key"]);
        EXPECT_EQ(g.find(w["key"].get<std::string>()), &g.metadata()[i].value);
    }

    ASSERT_EQ(g.tensors().size(), want["tensors"].size());
    for (size_t i = 0; i < g.tensors().size(); ++i) {
        const GgufTensor& t = g.tensors()[i];
        const json& w = want["tensors"][i];
        SCOPED_TRACE(t.name);
        EXPECT_EQ(t.name, w["name"].get<std::string>());
        EXPECT_EQ(t.ne, w["ne"].get<std::vector<int64_t>>());
        EXPECT_STREQ(t.type_name(), w["type"].get<std::string>().c_str());
        EXPECT_EQ(static_cast<uint32_t>(t.type), w["type_id"].get<uint32_t>());
        EXPECT_EQ(t.offset, w["offset"].get<uint64_t>());
        EXPECT_EQ(t.nbytes, w["nbytes"].get<uint64_t>());
        EXPECT_EQ(hex(t.data, t.nbytes), w["hex"].get<std::string>());
        EXPECT_EQ(g.tensor(t.name), &t);
    }
    EXPECT_EQ(g.tensor("no.such.tensor"), nullptr);
    EXPECT_EQ(g.find("no.such.key"), nullptr);
}

TEST(Gguf, TypedGetters) {
    auto f = GgufFile::open(fixture_dir() + "sample.gguf");
    ASSERT_TRUE(f.is_ok()) << f.message();
    const GgufFile& g = **f;
    EXPECT_EQ(g.get_string("general.architecture").value(), "embertest");
    EXPECT_EQ(g.get_int("test.u8").value(), 255);
    EXPECT_EQ(g.get_int("test.i64").value(), INT64_MIN);
    EXPECT_EQ(g.get_int("test.u32").value(), 4294967295ll);
    EXPECT_EQ(g.get_int("test.u64_small").value(), 1234567890123ll);
    EXPECT_EQ(g.get_float("test.f32").value(), static_cast<double>(3.14159f));
    EXPECT_EQ(g.get_float("test.i16").value(), -32768.0);
    EXPECT_TRUE(g.get_bool("test.bool_true").value());
    EXPECT_FALSE(g.get_bool("test.bool_false").value());
    EXPECT_EQ(g.get_string("test.string_nul").value(), std::string("a\0b", 3));
    EXPECT_EQ(g.get_int_array("arr.i8").value(), (std::vector<int64_t>{-128, -1, 0, 127}));
    EXPECT_EQ(g.get_int_array("arr.u32").value(), (std::vector<int64_t>{4294967295ll, 0, 42}));
    EXPECT_EQ(g.get_float_array("arr.i16").value(), (std::vector<float>{-32768.f, 32767.f}));
    EXPECT_EQ(g.get_float_array("arr.f32").value().size(), 6u);
    auto toks = g.get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(toks.is_ok()) << toks.message();
    ASSERT_EQ(toks->size(), 50u);
    EXPECT_EQ((*toks)[4], "Ġthe");
    EXPECT_EQ((*toks)[3], "");
    // defaults
    EXPECT_EQ(g.get_int_or("missing.key", 7).value(), 7);
    EXPECT_EQ(g.get_float_or("missing.key", 0.5).value(), 0.5);
    EXPECT_EQ(g.get_bool_or("missing.key", true).value(), true);
    EXPECT_EQ(g.get_string_or("missing.key", "x").value(), "x");
    EXPECT_EQ(g.get_int_or("test.i8", 7).value(), -128);

    auto err = [](const auto& e) { return e.is_ok() ? std::string("(ok)") : e.message(); };
    const std::pair<std::string, const char*> cases[] = {
        {err(g.get_int("missing.key")), "'missing.key' is missing"},
        {err(g.get_int("test.u64")), "does not fit"},
        {err(g.get_int("test.string")), "has type str, expected an integer"},
        {err(g.get_int_or("test.string", 3)), "expected an integer"},
        {err(g.get_float("test.bool_true")), "expected a number"},
        {err(g.get_bool("test.u8")), "expected a bool"},
        {err(g.get_string("test.u8")), "expected a string"},
        {err(g.get_string("tokenizer.ggml.tokens")), "has type array of str, expected a single value"},
        {err(g.get_int_array("test.u8")), "expected an array"},
        {err(g.get_int_array("arr.u64")), "item 0 does not fit"},
        {err(g.get_int_array("arr.f32")), "expected an array of integers"},
        {err(g.get_float_array("tokenizer.ggml.tokens")), "expected an array of numbers"},
        {err(g.get_string_array("arr.i32")), "expected an array of strings"},
        {err(g.get_string_array("nested.strings")), "expected an array of strings"},
    };
    for (const auto& [msg, expect] : cases) {
        EXPECT_NE(msg.find(expect), std::string::npos) << msg;
        EXPECT_NE(msg.find("sample.gguf"), std::string::npos) << msg;
    }

    EXPECT_TRUE(g.require_supported(*g.tensor("token_embd.weight")).is_ok());
    Status s = g.require_supported(*g.tensor("blk.0.ffn_up.weight"));
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("tensor blk.0.ffn_up.weight has type Q2_K, which ember does not support"),
              std::string::npos) << s.message();
}

TEST(Gguf, DescribeMetadata) {
    auto f = GgufFile::open(fixture_dir() + "sample.gguf");
    ASSERT_TRUE(f.is_ok()) << f.message();
    std::string d = describe_metadata(**f, 3);
    EXPECT_NE(d.find("\"héllo wörld ✓ 中文 🙂 \\\"quoted\\\"\\nline2\\x09tab\""), std::string::npos) << d;
    EXPECT_NE(d.find("GGUF v3: 7 tensors, 37 metadata keys, alignment 64"), std::string::npos) << d;
    EXPECT_NE(d.find("arr[str,50]"), std::string::npos) << d;
    EXPECT_NE(d.find("[\"<unk>\", \"<s>\", \"</s>\", ... (50 items)]"), std::string::npos) << d;
    EXPECT_NE(d.find("[[1, 2, 3], [4], [-5, 6]]"), std::string::npos) << d;
    EXPECT_NE(d.find("18446744073709551615"), std::string::npos) << d;
    EXPECT_NE(d.find("\"a\\x00b\""), std::string::npos) << d;
    EXPECT_NE(d.find("\\\"quoted\\\"\\nline2\\x09tab"), std::string::npos) << d;
}

TEST(Gguf, ValueTextCutsWholeCharacters) {
    GgufWriter w;
    std::string s;
    for (int i = 0; i < 100; ++i) s += "é";
    w.set_string("s", s);
    w.set("a", GgufMetaValue::ints(GgufValueType::I32, {1, 2, 3, 4}));
    auto f = GgufFile::from_bytes(w.serialize(), "mem");
    ASSERT_TRUE(f.is_ok()) << f.message();
    EXPECT_EQ((*f)->find("s")->to_string(8, 5), "\"ééééé...\"");
    EXPECT_EQ((*f)->find("a")->to_string(2), "[1, 2, ... (4 items)]");
    EXPECT_EQ((*f)->find("a")->to_string(0), "[... (4 items)]");
}

TEST(Gguf, Version2IsAccepted) {
    std::vector<uint8_t> b = read_bytes(fixture_dir() + "sample.gguf");
    ASSERT_GT(b.size(), 8u);
    b[4] = 2;  // v2 has the same little-endian layout
    auto f = GgufFile::from_bytes(std::move(b), "v2.gguf");
    ASSERT_TRUE(f.is_ok()) << f.message();
    EXPECT_EQ((*f)->version(), 2u);
    EXPECT_EQ((*f)->tensors().size(), 7u);
}

// ---------------------------------------------------------------------------------------------------------
// Writer round trip.

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
}

TEST(GgufWriter, RoundTripAllTypes) {
    using V = GgufMetaValue;
    using T = GgufValueType;
    std::mt19937 rng(7);
    for (uint32_t alignment : {1u, 8u, 32u, 64u, 4096u}) {
        SCOPED_TRACE("alignment " + std::to_string(alignment));
        GgufWriter w;
        w.set_string("general.architecture", "llama");
        w.set_alignment(alignment);
        w.set("u8", V::u8(200));
        w.set("i8", V::i8(-7));
        w.set("u16", V::u16(60000));
        w.set("i16", V::i16(-30000));
        w.set_u32("u32", 4000000000u);
        w.set_i32("i32", -2000000000);
        w.set_f32("f32", -0.375f);
        w.set_bool("bool", true);
        w.set_string("str", "");
        w.set_u64("u64", UINT64_MAX);
        w.set("i64", V::i64(INT64_MIN + 1));
        w.set("f64", V::f64(1e-300));
        w.set("a.empty_i32", V::ints(T::I32, {}));
        w.set("a.empty_str", V::strings({}));
        w.set("a.u16", V::ints(T::U16, {1, 65535, 0}));
        w.set("a.i64", V::ints(T::I64, {INT64_MIN, -1, INT64_MAX}));
        w.set("a.f32", V::floats(T::F32, {0.1, -2.5, 1e30}));
        w.set("a.f64", V::floats(T::F64, {0.1, -2.5}));
        w.set("a.bool", V::array(T::BOOL, {V::boolean(false), V::boolean(true)}));
        w.set("a.str", V::strings({"x", "", std::string("\0\xff", 2)}));
        w.set("a.nested", V::array(T::ARRAY, {V::ints(T::U8, {1, 2}), V::strings({"q"}), V::ints(T::I32, {}),
                                              V::array(T::ARRAY, {V::floats(T::F64, {4.5})})}));
        w.set("u8", V::u8(201));  // replaces, keeps position

        struct Spec { std::string name; std::vector<int64_t> ne; GgmlType type; };
        const Spec specs[] = {
            {"f32.scalar", {}, GgmlType::F32},       {"f32.1d", {13}, GgmlType::F32},
            {"f16.2d", {7, 3}, GgmlType::F16},       {"bf16.3d", {5, 1, 2}, GgmlType::BF16},
            {"q4_0", {64, 3}, GgmlType::Q4_0},       {"q8_0.4d", {32, 2, 1, 3}, GgmlType::Q8_0},
            {"q4_k", {256, 2}, GgmlType::Q4_K},      {"q6_k", {512, 1}, GgmlType::Q6_K},
            {"q2_k", {256, 3}, GgmlType::Q2_K},      {"empty", {0, 4}, GgmlType::F32},
            {"i32", {9}, GgmlType::I32},
        };
        std::vector<std::vector<uint8_t>> data;
        for (const auto& s : specs) {
            GgmlTypeTraits tr = ggml_type_traits(s.type);
            int64_t n = (s.ne.empty() ? 1 : s.ne[0] / tr.block_elems) * tr.block_bytes;
            for (size_t d = 1; d < s.ne.size(); ++d) n *= s.ne[d];
            data.push_back(random_bytes(rng, static_cast<size_t>(n)));
            ASSERT_TRUE(w.add_tensor(s.name, s.ne, s.type, data.back().data(), data.back().size()).is_ok());
        }
        TempDir dir;
        std::string path = (dir.path() / "rt.gguf").string();
        ASSERT_TRUE(w.write(path).is_ok());
        auto f = GgufFile::open(path);
        ASSERT_TRUE(f.is_ok()) << f.message();
        const GgufFile& g = **f;
        EXPECT_EQ(g.version(), 3u);
        EXPECT_EQ(g.alignment(), alignment);
        EXPECT_EQ(g.data_offset() % alignment, 0u);
        ASSERT_EQ(g.metadata().size(), alignment == 32 ? 22u : 23u);
        EXPECT_EQ(g.metadata()[0].key, "general.architecture");
        EXPECT_EQ(g.metadata()[alignment == 32 ? 1 : 2].key, "u8");
        EXPECT_EQ(g.get_int("u8").value(), 201);
        EXPECT_EQ(g.get_int("i8").value(), -7);
        EXPECT_EQ(g.get_int("u16").value(), 60000);
        EXPECT_EQ(g.get_int("i16").value(), -30000);
        EXPECT_EQ(g.get_int("u32").value(), 4000000000ll);
        EXPECT_EQ(g.get_int("i32").value(), -2000000000);
        EXPECT_EQ(g.get_float("f32").value(), -0.375);
        EXPECT_TRUE(g.get_bool("bool").value());
        EXPECT_EQ(g.get_string("str").value(), "");
        EXPECT_EQ(*g.find("u64")->as_uint(), UINT64_MAX);
        EXPECT_EQ(g.get_int("i64").value(), INT64_MIN + 1);
        EXPECT_EQ(g.get_float("f64").value(), 1e-300);
        EXPECT_EQ(g.get_int_array("a.empty_i32").value().size(), 0u);
        EXPECT_EQ(g.get_string_array("a.empty_str").value().size(), 0u);
        EXPECT_EQ(g.get_int_array("a.u16").value(), (std::vector<int64_t>{1, 65535, 0}));
        EXPECT_EQ(g.get_int_array("a.i64").value(), (std::vector<int64_t>{INT64_MIN, -1, INT64_MAX}));
        EXPECT_EQ(g.get_float_array("a.f32").value(), (std::vector<float>{0.1f, -2.5f, 1e30f}));
        EXPECT_EQ(*g.find("a.f64")->float_at(0), 0.1);
        EXPECT_EQ(*g.find("a.bool")->bool_at(1), true);
        auto strs = g.get_string_array("a.str").value();
        ASSERT_EQ(strs.size(), 3u);
        EXPECT_EQ(strs[2], std::string_view("\0\xff", 2));
        const GgufValue* nested = g.find("a.nested");
        ASSERT_TRUE(nested && nested->array_type() == T::ARRAY && nested->size() == 4);
        EXPECT_EQ(*nested->array_at(0).int_at(1), 2);
        EXPECT_EQ(nested->array_at(1).string_at(0), "q");
        EXPECT_EQ(nested->array_at(2).size(), 0u);
        EXPECT_EQ(*nested->array_at(3).array_at(0).float_at(0), 4.5);

        ASSERT_EQ(g.tensors().size(), std::size(specs));
        for (size_t i = 0; i < std::size(specs); ++i) {
            const GgufTensor& t = g.tensors()[i];
            EXPECT_EQ(t.name, specs[i].name);
            EXPECT_EQ(t.ne, specs[i].ne);
            EXPECT_EQ(t.type, specs[i].type);
            EXPECT_EQ(t.offset % alignment, 0u);
            ASSERT_EQ(t.nbytes, data[i].size());
            EXPECT_TRUE(std::equal(data[i].begin(), data[i].end(), t.data)) << t.name;
        }
        EXPECT_EQ(g.tensor("f32.scalar")->numel(), 1);
        EXPECT_EQ(g.tensor("q8_0.4d")->numel(), 32 * 2 * 3);
        EXPECT_EQ(g.tensor("bf16.3d")->shape_str(), "[5, 1, 2]");
        // the same bytes through from_bytes
        auto m = GgufFile::from_bytes(w.serialize(), "mem");
        ASSERT_TRUE(m.is_ok()) << m.message();
        EXPECT_EQ((*m)->tensors().size(), std::size(specs));
    }
}

TEST(GgufWriter, RejectsBadTensors) {
    GgufWriter w;
    std::vector<uint8_t> b(64);
    ASSERT_TRUE(w.add_tensor("a", {4}, GgmlType::F32, b.data(), 16).is_ok());
    Status dup = w.add_tensor("a", {4}, GgmlType::F32, b.data(), 16);
    EXPECT_NE(dup.message().find("added twice"), std::string::npos) << dup.message();
    Status size = w.add_tensor("b", {4}, GgmlType::F32, b.data(), 12);
    EXPECT_NE(size.message().find("need 16"), std::string::npos) << size.message();
    Status block = w.add_tensor("c", {16}, GgmlType::Q4_0, b.data(), 9);
    EXPECT_NE(block.message().find("multiple of 32"), std::string::npos) << block.message();
    Status dims = w.add_tensor("d", {1, 1, 1, 1, 1}, GgmlType::F32, b.data(), 4);
    EXPECT_NE(dims.message().find("at most 4"), std::string::npos) << dims.message();
    Status type = w.add_tensor("e", {1}, static_cast<GgmlType>(5), b.data(), 4);
    EXPECT_NE(type.message().find("unknown ggml type"), std::string::npos) << type.message();
    Status path = w.write("/nonexistent-dir/x.gguf");
    EXPECT_NE(path.message().find("cannot create"), std::string::npos) << path.message();
}

// tokenizer.ggml.tokens of real vocabularies has up to ~250k strings: opening must stay fast.
TEST(Gguf, LargeStringArrayLoadsFast) {
    std::mt19937 rng(3);
    std::vector<std::string> toks(250000);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = "tok" + std::to_string(i) + std::string(rng() % 8, 'x');
    GgufWriter w;
    w.set("tokenizer.ggml.tokens", GgufMetaValue::strings(toks));
    w.set("tokenizer.ggml.merges", GgufMetaValue::strings(std::vector<std::string>(toks.begin(), toks.end())));
    TempDir dir;
    std::string path = (dir.path() / "vocab.gguf").string();
    ASSERT_TRUE(w.write(path).is_ok());
    auto t0 = std::chrono::steady_clock::now();
    auto f = GgufFile::open(path);
    auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(f.is_ok()) << f.message();
    auto arr = (*f)->get_string_array("tokenizer.ggml.tokens");
    auto t2 = std::chrono::steady_clock::now();
    ASSERT_TRUE(arr.is_ok());
    ASSERT_EQ(arr->size(), toks.size());
    EXPECT_EQ((*arr)[123456], toks[123456]);
    double open_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    double get_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
    std::printf("open with 2 x 250k strings: %.1f ms; get_string_array: %.1f ms\n", open_ms, get_ms);
#if !defined(__SANITIZE_ADDRESS__)
    EXPECT_LT(open_ms, 100.0);
#endif
}

}  // namespace
}  // namespace ember
