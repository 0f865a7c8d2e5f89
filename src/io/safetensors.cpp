// safetensors reader implementation: header parsing and validation, sharded index resolution.
#include "io/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/json_file.h"

namespace ember {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string TensorInfo::shape_str() const {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

namespace {

// The safetensors library's own MAX_HEADER_SIZE: a JSON header takes several times its size as a DOM.
constexpr uint64_t kMaxHeader = 100'000'000;

Status parse_entry(const std::string& path, const std::string& name, const json& e, const uint8_t* base,
                   uint64_t data_size, TensorInfo* out) {
    auto fail = [&](const std::string& what) {
        return errorf("%s: tensor '%s': %s", path.c_str(), name.c_str(), what.c_str());
    };
    if (!e.is_object()) return fail("header entry is not an object");
    if (!e.contains("dtype") || !e["dtype"].is_string()) return fail("missing or non-string 'dtype'");
    std::string dt = e["dtype"].get<std::string>();
    if (!dtype_from_name(dt, &out->dtype)) return fail("unsupported dtype '" + dt + "'");
    if (!e.contains("shape") || !e["shape"].is_array()) return fail("missing or non-array 'shape'");
    if (e["shape"].size() > 8) return fail("too many dimensions");
    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0) return fail("shape has a non-integer or negative dim");
        uint64_t v = d.get<uint64_t>();
        if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / v) return fail("shape overflows");
        numel *= v;
        out->shape.push_back(static_cast<int64_t>(v));
    }
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
        return fail("missing 'data_offsets' [begin, end]");
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() && !off[0].is_number_integer()) return fail("bad data_offsets");
    if (!off[1].is_number_unsigned() && !off[1].is_number_integer()) return fail("bad data_offsets");
    if (off[0].get<int64_t>() < 0 || off[1].get<int64_t>() < 0) return fail("negative data_offsets");
    uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en) return fail("data_offsets begin > end");
    if (en > data_size)
        return fail(strfmt("data_offsets end %llu is past the end of the data section (%llu bytes; file truncated?)",
                           (unsigned long long)en, (unsigned long long)data_size));
    uint64_t want = numel * dtype_size(out->dtype);
    if (en - b != want)
        return fail(strfmt("byte size %llu does not match shape %s x %s (%llu bytes)", (unsigned long long)(en - b),
                           out->shape_str().c_str(), dt.c_str(), (unsigned long long)want));
    out->name = name;
    out->data = base + b;
    out->nbytes = static_cast<size_t>(want);
    out->file = path;
    return Status::ok();
}

}  // namespace

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
    EMBER_ASSIGN(auto mf, MappedFile::open(path));
    SafetensorsFile f;
    f.owner_ = mf;
    f.path_ = path;
    return parse(std::move(f), mf->data(), mf->size());
}

Expected<SafetensorsFile> SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, const std::string& name) {
    auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
    SafetensorsFile f;
    f.owner_ = owned;
    f.path_ = name;
    return parse(std::move(f), owned->data(), owned->size());
}

Expected<SafetensorsFile> SafetensorsFile::parse(SafetensorsFile f, const uint8_t* p, uint64_t size) {
    const std::string& path = f.path_;
    EMBER_REQUIRE(size >= 8, "%s: file too small for a safetensors header (%llu bytes)", path.c_str(),
                  (unsigned long long)size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | p[i];
    EMBER_REQUIRE(n <= kMaxHeader, "%s: header length %llu is beyond the limit of %llu bytes (corrupt file?)",
                  path.c_str(), (unsigned long long)n, (unsigned long long)kMaxHeader);
    EMBER_REQUIRE(n <= size - 8, "%s: header length %llu exceeds the file size %llu (truncated?)", path.c_str(),
                  (unsigned long long)n, (unsigned long long)size);
    auto parsed = parse_json_text(std::string_view(reinterpret_cast<const char*>(p + 8), n), path);
    if (!parsed) return errorf("%s (the header)", parsed.message().c_str());
    const json& h = *parsed;
    EMBER_REQUIRE(h.is_object(), "%s: header is not a JSON object", path.c_str());
    const uint8_t* base = p + 8 + n;
    uint64_t data_size = size - 8 - n;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (auto it = h.begin(); it != h.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (!it.value().is_object()) return errorf("%s: __metadata__ is not an object", path.c_str());
            for (auto m = it.value().begin(); m != it.value().end(); ++m)
                if (m.value().is_string()) f.metadata_[m.key()] = m.value().get<std::string>();
            continue;
        }
        TensorInfo t;
        EMBER_TRY(parse_entry(path, it.key(), it.value(), base, data_size, &t));
        uint64_t b = static_cast<uint64_t>(t.data - base);
        if (t.nbytes) ranges.push_back({b, b + t.nbytes});
        f.tensors_.emplace(it.key(), std::move(t));
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
        EMBER_REQUIRE(ranges[i].first >= ranges[i - 1].second, "%s: tensors overlap in the data section",
                      path.c_str());
    return f;
}

Status TensorStore::add_file(SafetensorsFile f) {
    for (const auto& [name, t] : f.tensors()) {
        auto [it, inserted] = tensors_.emplace(name, t);
        if (!inserted)
            return errorf("tensor '%s' appears in both %s and %s", name.c_str(), it->second.file.c_str(),
                          f.path().c_str());
    }
    files_.push_back(std::move(f));
    return Status::ok();
}

Expected<TensorStore> TensorStore::open(const std::string& path) {
    TensorStore st;
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
        EMBER_ASSIGN(auto f, SafetensorsFile::open(path));
        EMBER_TRY(st.add_file(std::move(f)));
        return st;
    }
    fs::path dir(path);
    fs::path index = dir / "model.safetensors.index.json";
    if (fs::exists(index, ec)) {
        std::ifstream in(index);
        json j = json::parse(in, nullptr, false);
        EMBER_REQUIRE(!j.is_discarded() && j.is_object(), "%s: not valid JSON", index.c_str());
        EMBER_REQUIRE(j.contains("weight_map") && j["weight_map"].is_object(), "%s: missing 'weight_map' object",
                      index.c_str());
        std::map<std::string, std::vector<std::string>> by_file;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            EMBER_REQUIRE(it.value().is_string(), "%s: weight_map['%s'] is not a file name", index.c_str(),
                          it.key().c_str());
            std::string file = it.value().get<std::string>();
            EMBER_REQUIRE(file.find('/') == std::string::npos && file.find("..") == std::string::npos,
                          "%s: weight_map['%s'] names a file outside the directory: '%s'", index.c_str(),
                          it.key().c_str(), file.c_str());
            by_file[file].push_back(it.key());
        }
        for (const auto& [file, names] : by_file) {
            EMBER_ASSIGN(auto f, SafetensorsFile::open((dir / file).string()));
            for (const auto& n : names)
                EMBER_REQUIRE(f.tensors().count(n), "%s: tensor '%s' listed in the index is missing from %s",
                              index.c_str(), n.c_str(), f.path().c_str());
            EMBER_TRY(st.add_file(std::move(f)));
        }
        return st;
    }
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    EMBER_REQUIRE(!files.empty(), "%s: no .safetensors files in this directory", path.c_str());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
        EMBER_ASSIGN(auto f, SafetensorsFile::open(file));
        EMBER_TRY(st.add_file(std::move(f)));
    }
    return st;
}

const TensorInfo* TensorStore::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace ember
