// safetensors writer: one file or a sharded checkpoint directory (model-0000i-of-0000n.safetensors +
// model.safetensors.index.json), streamed straight to disk.
//
// The whole layout (header: dtype, shape, data_offsets, optional __metadata__) is fixed when the writer is
// created, because every tensor's size follows from its shape. Data can then be streamed: write() appends
// bytes to one tensor at its place in the file (pwrite), so a converter never holds more than the piece it
// is producing, and may fill tensors in any order (each tensor's own bytes in order).
//
// File format (https://github.com/huggingface/safetensors): u64 LE header length N, N bytes of JSON, data.
// The header is padded with spaces so the data section starts 8-byte aligned (as the python writer does);
// the data section has no holes (readers check data_offsets are contiguous). By default the tensors of a
// file are laid out largest element size first (stable), so every tensor starts aligned to its element size.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace ember {

struct TensorSpec {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;

    int64_t numel() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
    }
    uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * dtype_size(dtype); }
};

struct SafetensorsWriterOptions {
    std::map<std::string, std::string> metadata;  // "__metadata__" (string → string), e.g. {"format": "mlx"}
    bool align_by_dtype = true;                   // lay out 8-, 4-, 2-, 1-byte elements in that order (stable)
    bool preallocate = true;                      // posix_fallocate the file: "disk full" before any work
};

// One .safetensors file.
class SafetensorsWriter {
public:
    static Expected<std::unique_ptr<SafetensorsWriter>> create(const std::string& path, std::vector<TensorSpec> tensors,
                                                               const SafetensorsWriterOptions& opt = {});
    ~SafetensorsWriter();
    SafetensorsWriter(const SafetensorsWriter&) = delete;
    SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

    // Appends `nbytes` bytes to tensor `name` (after the bytes already written to it).
    Status write(const std::string& name, const void* data, size_t nbytes);
    // Checks every tensor is complete, then flushes and closes. After an error the file is incomplete.
    Status finish();

    bool has(const std::string& name) const { return index_.count(name) != 0; }
    const std::string& path() const { return path_; }
    uint64_t file_size() const { return data_start_ + data_size_; }
    uint64_t data_size() const { return data_size_; }
    const std::vector<TensorSpec>& tensors() const { return specs_; }  // in file order

private:
    SafetensorsWriter() = default;
    Status pwrite_all(const void* data, size_t n, uint64_t offset);

    std::string path_;
    int fd_ = -1;
    std::vector<TensorSpec> specs_;
    std::vector<uint64_t> begin_, written_;     // per tensor (file order): data-section offset, bytes written
    std::map<std::string, size_t> index_;       // name → position in specs_
    uint64_t data_start_ = 0, data_size_ = 0;
};

struct CheckpointWriterOptions {
    uint64_t max_shard_bytes = 5ull << 30;        // mlx-lm MAX_FILE_SIZE_GB = 5 (a bigger tensor gets a shard alone)
    std::map<std::string, std::string> metadata;  // per file __metadata__
    nlohmann::json index_metadata = nlohmann::json::object();  // extra keys for the index "metadata" object
    bool write_index = true;                      // model.safetensors.index.json (mlx-lm writes it even for 1 file)
    bool align_by_dtype = true;
    bool preallocate = true;
};

// A checkpoint directory: tensors (in the given order) are split into shards of at most max_shard_bytes of
// data, named model.safetensors (one shard) or model-%05d-of-%05d.safetensors (mlx-lm / HF naming).
class CheckpointWriter {
public:
    static Expected<std::unique_ptr<CheckpointWriter>> create(const std::string& dir,
                                                              const std::vector<TensorSpec>& tensors,
                                                              const CheckpointWriterOptions& opt = {});
    Status write(const std::string& name, const void* data, size_t nbytes);
    // Finishes every shard and writes the index {"metadata": {"total_size": N, ...}, "weight_map": {...}}.
    Status finish();

    // Paths of every file this writer created (shards, index) — for cleaning up after an error.
    std::vector<std::string> files() const;
    size_t num_shards() const { return shards_.size(); }
    uint64_t total_size() const { return total_size_; }

private:
    CheckpointWriter() = default;
    std::string dir_;
    CheckpointWriterOptions opt_;
    std::vector<std::unique_ptr<SafetensorsWriter>> shards_;
    std::map<std::string, size_t> shard_of_;     // tensor name → shard index
    uint64_t total_size_ = 0;
};

// Shard index for each tensor (same order as `tensors`) under the mlx-lm rule: start a new shard when the
// current one would exceed max_bytes; a tensor bigger than max_bytes gets a shard of its own.
std::vector<size_t> plan_shards(const std::vector<TensorSpec>& tensors, uint64_t max_bytes);

}  // namespace ember
