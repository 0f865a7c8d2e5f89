// safetensors reader: valid files (single, sharded) and every kind of broken file → a clear error, no crash.
#include "io/safetensors.h"

#include "core/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace ember {
namespace {

namespace fs = std::filesystem;

using TmpDir = TempDir;

// Writes header JSON + `data_bytes` bytes of data; the length field may lie (declared_len ≥ 0).
std::string write_st(const fs::path& path, const std::string& header, size_t data_bytes, int64_t declared_len = -1) {
    std::ofstream f(path, std::ios::binary);
    uint64_t n = declared_len >= 0 ? static_cast<uint64_t>(declared_len) : header.size();
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
    f << header;
    for (size_t i = 0; i < data_bytes; ++i) f.put(static_cast<char>(i * 7 + 1));
    return path.string();
}

TEST(Safetensors, ReadsValidFile) {
    TmpDir d;
    auto p = write_st(d.p / "a.safetensors",
                      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                      20);
    auto f = SafetensorsFile::open(p);
    ASSERT_TRUE(f.is_ok()) << f.message();
    ASSERT_EQ(f->tensors().size(), 2u);
    const auto& w = f->tensors().at("w");
    EXPECT_EQ(w.dtype, DType::BF16);
    EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(w.nbytes, 12u);
    EXPECT_EQ(f->tensors().at("b").data - w.data, 12);
    EXPECT_EQ(f->metadata().at("format"), "pt");
}

struct BadCase { const char* what; std::string header; size_t data; int64_t declared; const char* expect; };

TEST(Safetensors, BrokenFilesGiveClearErrors) {
    const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
    const BadCase cases[] = {
        {"truncated data", "{" + ok_entry + "}", 8, -1, "past the end"},
        {"header length lies", "{" + ok_entry + "}", 16, 100000, "exceeds the file size"},
        {"size mismatch", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})", 16, -1, "does not match shape"},
        {"unknown dtype", R"({"w":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}})", 8, -1, "unsupported dtype"},
        {"not json", "{this is not json", 0, -1, "not valid JSON"},
        {"not object", "[1,2,3]", 0, -1, "not a JSON object"},
        {"negative dim", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, -1, "negative"},
        {"begin > end", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8, -1, "begin > end"},
        {"missing offsets", R"({"w":{"dtype":"F32","shape":[2]}})", 8, -1, "data_offsets"},
        {"overlap",
         R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
         12, -1, "overlap"},
        {"huge header", "{}", 0, int64_t{1} << 40, "beyond the limit of 100000000 bytes"},
        {"deep header", "{\"__metadata__\": " + std::string(10000, '[') + std::string(10000, ']') + "}", 0, -1,
         "JSON nested deeper than 512 levels"},
    };
    for (const auto& c : cases) {
        TmpDir d;
        auto p = write_st(d.p / "bad.safetensors", c.header, c.data, c.declared);
        auto f = SafetensorsFile::open(p);
        ASSERT_FALSE(f.is_ok()) << c.what;
        EXPECT_NE(f.message().find(c.expect), std::string::npos) << c.what << ": " << f.message();
        EXPECT_NE(f.message().find("bad.safetensors"), std::string::npos) << "error must name the file: " << f.message();
    }
}

TEST(Safetensors, TinyAndMissingFiles) {
    TmpDir d;
    std::ofstream(d.p / "tiny.safetensors") << "abc";
    auto f = SafetensorsFile::open((d.p / "tiny.safetensors").string());
    ASSERT_FALSE(f.is_ok());
    EXPECT_NE(f.message().find("too small"), std::string::npos);
    auto g = SafetensorsFile::open((d.p / "nope.safetensors").string());
    ASSERT_FALSE(g.is_ok());
    EXPECT_NE(g.message().find("cannot open"), std::string::npos);
}

TEST(Safetensors, ShardedIndex) {
    TmpDir d;
    write_st(d.p / "m-1.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
    write_st(d.p / "m-2.safetensors", R"({"b":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4);
    std::ofstream(d.p / "model.safetensors.index.json")
        << R"({"metadata":{},"weight_map":{"a":"m-1.safetensors","b":"m-2.safetensors"}})";
    auto st = TensorStore::open(d.p.string());
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(st->num_files(), 2u);
    ASSERT_NE(st->find("a"), nullptr);
    ASSERT_NE(st->find("b"), nullptr);
    EXPECT_EQ(st->find("b")->dtype, DType::F16);
    EXPECT_EQ(st->find("zzz"), nullptr);
}

TEST(Safetensors, IndexNamingMissingTensorOrFile) {
    TmpDir d;
    write_st(d.p / "m-1.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
    std::ofstream(d.p / "model.safetensors.index.json")
        << R"({"weight_map":{"a":"m-1.safetensors","c":"m-1.safetensors"}})";
    auto st = TensorStore::open(d.p.string());
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("'c'"), std::string::npos) << st.message();
    std::ofstream(d.p / "model.safetensors.index.json") << R"({"weight_map":{"a":"../etc/passwd"}})";
    auto st2 = TensorStore::open(d.p.string());
    ASSERT_FALSE(st2.is_ok());
    EXPECT_NE(st2.message().find("outside"), std::string::npos) << st2.message();
}

TEST(Safetensors, DuplicateTensorAcrossFiles) {
    TmpDir d;
    write_st(d.p / "x.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
    write_st(d.p / "y.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
    auto st = TensorStore::open(d.p.string());
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("both"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace ember
