// safetensors reader: one file (8-byte LE header length, JSON header, data) or a sharded model directory
// (model.safetensors.index.json). Every header field, shape and byte range is validated on open.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/mmap.h"

namespace ember {

struct TensorInfo {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;   // points into the mapped file
    size_t nbytes = 0;
    std::string file;                // path of the file holding it (for error messages)

    int64_t numel() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
    }
    std::string shape_str() const;   // "[6144, 2048]"
};

class SafetensorsFile {
public:
    static Expected<SafetensorsFile> open(const std::string& path);
    // The same from bytes held in memory (tests, fuzzing); `name` stands for the path in messages.
    static Expected<SafetensorsFile> from_bytes(std::vector<uint8_t> bytes, const std::string& name);
    const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const std::string& path() const { return path_; }

private:
    static Expected<SafetensorsFile> parse(SafetensorsFile f, const uint8_t* p, uint64_t size);
    std::shared_ptr<const void> owner_;  // the MappedFile or the byte vector the tensors point into
    std::string path_;
    std::map<std::string, TensorInfo> tensors_;
    std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint: a single .safetensors file, or a directory holding model.safetensors,
// a sharded set with model.safetensors.index.json, or (failing both) every *.safetensors file in it.
class TensorStore {
public:
    static Expected<TensorStore> open(const std::string& path);
    const TensorInfo* find(const std::string& name) const;
    const std::map<std::string, TensorInfo>& all() const { return tensors_; }
    size_t num_files() const { return files_.size(); }

private:
    Status add_file(SafetensorsFile f);
    std::vector<SafetensorsFile> files_;
    std::map<std::string, TensorInfo> tensors_;
};

}  // namespace ember
