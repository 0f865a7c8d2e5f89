// safetensors writer: round trip through the reader (dtype/shape/bytes, single and sharded), header
// alignment, streaming in pieces and out of order, and errors (bad use, cannot create, disk full).
#include "io/safetensors_writer.h"
#include "core/temp_dir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "io/json_file.h"
#include "io/safetensors.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

using TmpDir = TempDir;

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    std::mt19937 rng(seed);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

// Odd sizes on purpose: a 3-element BF16 tensor before a U32 one would misalign it without the dtype ordering.
std::vector<TensorSpec> sample_specs() {
    return {{"b.norm", DType::BF16, {3}},     {"a.weight", DType::U32, {4, 5}}, {"c.f64", DType::F64, {2}},
            {"d.bytes", DType::U8, {7}},      {"e.empty", DType::F32, {0, 4}},  {"f.scalar", DType::F32, {}},
            {"g.f16", DType::F16, {2, 3, 1}}, {"h.i64", DType::I64, {1}}};
}

TEST(SafetensorsWriter, RoundTripThroughReader) {
    TmpDir d;
    auto specs = sample_specs();
    std::string path = (d.p / "x.safetensors").string();
    auto w = SafetensorsWriter::create(path, specs, {.metadata = {{"format", "mlx"}}});
    ASSERT_TRUE(w.is_ok()) << w.message();
    std::map<std::string, std::vector<uint8_t>> data;
    // Write in reverse order, each tensor in two pieces: layout is fixed, so any order works.
    for (size_t i = specs.size(); i-- > 0;) {
        auto bytes = pattern(specs[i].nbytes(), static_cast<uint32_t>(i));
        size_t half = bytes.size() / 2;
        ASSERT_TRUE((*w)->write(specs[i].name, bytes.data(), half).is_ok());
        ASSERT_TRUE((*w)->write(specs[i].name, bytes.data() + half, bytes.size() - half).is_ok());
        data[specs[i].name] = bytes;
    }
    ASSERT_TRUE((*w)->finish().is_ok());
    EXPECT_EQ(fs::file_size(path), (*w)->file_size());

    // Header length is a multiple of 8 and the data section is aligned per element size.
    std::ifstream in(path, std::ios::binary);
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);
    EXPECT_EQ(n % 8, 0u);

    auto f = SafetensorsFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.message();
    EXPECT_EQ(f->metadata().at("format"), "mlx");
    ASSERT_EQ(f->tensors().size(), specs.size());
    const uint8_t* base = nullptr;
    for (const auto& [name, t] : f->tensors())
        if (!base || t.data < base) base = t.data;
    for (const auto& s : specs) {
        const TensorInfo& t = f->tensors().at(s.name);
        EXPECT_EQ(t.dtype, s.dtype) << s.name;
        EXPECT_EQ(t.shape, s.shape) << s.name;
        ASSERT_EQ(t.nbytes, s.nbytes()) << s.name;
        if (t.nbytes > 0) {
            EXPECT_EQ(std::memcmp(t.data, data[s.name].data(), t.nbytes), 0) << s.name;
        }
        EXPECT_EQ((8 + n + static_cast<uint64_t>(t.data - base)) % dtype_size(s.dtype), 0u) << s.name << " misaligned";
    }
}

TEST(SafetensorsWriter, ShardedRoundTripAndIndex) {
    TmpDir d;
    std::vector<TensorSpec> specs;
    for (int i = 0; i < 9; ++i) specs.push_back({strfmt("t%d", i), DType::BF16, {10 + i, 8}});
    specs.push_back({"big", DType::F32, {100, 10}});  // 4000 bytes > shard limit: a shard of its own
    specs.push_back({"tail", DType::BF16, {4}});
    CheckpointWriterOptions opt;
    opt.max_shard_bytes = 600;
    opt.metadata = {{"format", "mlx"}};
    opt.index_metadata = {{"total_parameters", 12345}};
    auto w = CheckpointWriter::create(d.p.string(), specs, opt);
    ASSERT_TRUE(w.is_ok()) << w.message();
    EXPECT_GT((*w)->num_shards(), 2u);
    std::map<std::string, std::vector<uint8_t>> data;
    for (size_t i = 0; i < specs.size(); ++i) {
        data[specs[i].name] = pattern(specs[i].nbytes(), 100 + static_cast<uint32_t>(i));
        ASSERT_TRUE((*w)->write(specs[i].name, data[specs[i].name].data(), specs[i].nbytes()).is_ok());
    }
    ASSERT_TRUE((*w)->finish().is_ok());

    auto idx = read_json_file((d.p / "model.safetensors.index.json").string());
    ASSERT_TRUE(idx.is_ok()) << idx.message();
    uint64_t total = 0;
    for (const auto& s : specs) total += s.nbytes();
    EXPECT_EQ((*idx)["metadata"]["total_size"].get<uint64_t>(), total);
    EXPECT_EQ((*idx)["metadata"]["total_parameters"].get<int>(), 12345);
    EXPECT_EQ((*idx)["weight_map"]["t0"].get<std::string>(),
              strfmt("model-00001-of-%05zu.safetensors", (*w)->num_shards()));
    // "big" exceeds the limit, so it sits in a shard alone.
    std::string big_file = (*idx)["weight_map"]["big"].get<std::string>();
    for (const auto& s : specs) {
        if (s.name != "big") {
            EXPECT_NE((*idx)["weight_map"][s.name].get<std::string>(), big_file);
        }
    }

    auto st = TensorStore::open(d.p.string());
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(st->num_files(), (*w)->num_shards());
    for (const auto& s : specs) {
        const TensorInfo* t = st->find(s.name);
        ASSERT_NE(t, nullptr) << s.name;
        EXPECT_EQ(t->shape, s.shape);
        EXPECT_EQ(std::memcmp(t->data, data[s.name].data(), t->nbytes), 0) << s.name;
    }
}

TEST(SafetensorsWriter, SingleShardIsModelSafetensors) {
    TmpDir d;
    std::vector<TensorSpec> specs = {{"w", DType::BF16, {2, 2}}};
    auto w = CheckpointWriter::create(d.p.string(), specs);
    ASSERT_TRUE(w.is_ok()) << w.message();
    uint16_t v[4] = {1, 2, 3, 4};
    ASSERT_TRUE((*w)->write("w", v, sizeof v).is_ok());
    ASSERT_TRUE((*w)->finish().is_ok());
    EXPECT_TRUE(fs::exists(d.p / "model.safetensors"));
    EXPECT_TRUE(fs::exists(d.p / "model.safetensors.index.json"));
}

TEST(SafetensorsWriter, MisuseAndIoErrors) {
    TmpDir d;
    std::vector<TensorSpec> specs = {{"w", DType::F32, {2}}};
    {
        auto w = SafetensorsWriter::create((d.p / "a.safetensors").string(), specs);
        ASSERT_TRUE(w.is_ok());
        float x[3] = {1, 2, 3};
        Status s = (*w)->write("nope", x, 4);
        EXPECT_NE(s.message().find("not in this file's header"), std::string::npos) << s.message();
        s = (*w)->write("w", x, 12);
        EXPECT_NE(s.message().find("exceed"), std::string::npos) << s.message();
        ASSERT_TRUE((*w)->write("w", x, 4).is_ok());
        s = (*w)->finish();
        EXPECT_NE(s.message().find("incomplete"), std::string::npos) << s.message();
    }
    {
        auto w = SafetensorsWriter::create((d.p / "dup.safetensors").string(),
                                           {{"w", DType::F32, {1}}, {"w", DType::F32, {1}}});
        EXPECT_FALSE(w.is_ok());
        EXPECT_NE(w.message().find("twice"), std::string::npos) << w.message();
    }
    {
        auto w = SafetensorsWriter::create((d.p / "no_such_dir" / "a.safetensors").string(), specs);
        ASSERT_FALSE(w.is_ok());
        EXPECT_NE(w.message().find("cannot create"), std::string::npos) << w.message();
    }
    {
        auto w = CheckpointWriter::create((d.p / "missing").string(), specs);
        ASSERT_FALSE(w.is_ok());
        EXPECT_NE(w.message().find("does not exist"), std::string::npos) << w.message();
    }
    if (fs::exists("/dev/full")) {  // every write fails with ENOSPC
        auto w = SafetensorsWriter::create("/dev/full", specs);
        ASSERT_FALSE(w.is_ok());
        EXPECT_NE(w.message().find("disk full"), std::string::npos) << w.message();
    }
}

}  // namespace
}  // namespace ember
