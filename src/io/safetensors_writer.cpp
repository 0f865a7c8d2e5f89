// safetensors writer implementation: layout planning, header encoding, pwrite streaming, shards + index.
#include "io/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

namespace ember {

namespace fs = std::filesystem;

namespace {

std::string errno_str(int e) {
    if (e == ENOSPC) return "no space left on device (disk full)";
    if (e == EDQUOT) return "disk quota exceeded";
    return std::strerror(e);
}

}  // namespace

std::vector<size_t> plan_shards(const std::vector<TensorSpec>& tensors, uint64_t max_bytes) {
    std::vector<size_t> out;
    out.reserve(tensors.size());
    size_t shard = 0;
    uint64_t size = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        uint64_t n = tensors[i].nbytes();
        if (i > 0 && size + n > max_bytes) {
            ++shard;
            size = 0;
        }
        out.push_back(shard);
        size += n;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------------------
// SafetensorsWriter

Expected<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::create(const std::string& path,
                                                                       std::vector<TensorSpec> tensors,
                                                                       const SafetensorsWriterOptions& opt) {
    std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
    w->path_ = path;
    std::set<std::string> seen;
    for (const auto& t : tensors) {
        EMBER_REQUIRE(!t.name.empty() && t.name != "__metadata__", "%s: invalid tensor name '%s'", path.c_str(),
                      t.name.c_str());
        EMBER_REQUIRE(seen.insert(t.name).second, "%s: tensor '%s' listed twice", path.c_str(), t.name.c_str());
        for (int64_t d : t.shape)
            EMBER_REQUIRE(d >= 0, "%s: tensor '%s' has a negative dimension", path.c_str(), t.name.c_str());
    }
    if (opt.align_by_dtype)
        std::stable_sort(tensors.begin(), tensors.end(), [](const TensorSpec& a, const TensorSpec& b) {
            return dtype_size(a.dtype) > dtype_size(b.dtype);
        });

    // Header: __metadata__ first, then the tensors in data order (ordered_json keeps that order).
    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    if (!opt.metadata.empty()) {
        nlohmann::ordered_json m = nlohmann::ordered_json::object();
        for (const auto& [k, v] : opt.metadata) m[k] = v;
        h["__metadata__"] = m;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const TensorSpec& t = tensors[i];
        uint64_t n = t.nbytes();
        h[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + n}}};
        w->begin_.push_back(off);
        w->written_.push_back(0);
        w->index_[t.name] = i;
        off += n;
    }
    w->data_size_ = off;
    w->specs_ = std::move(tensors);
    std::string header = h.dump();
    header.append((8 - header.size() % 8) % 8, ' ');  // data section starts 8-byte aligned
    w->data_start_ = 8 + header.size();

    w->fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd_ < 0) return errorf("%s: cannot create: %s", path.c_str(), errno_str(errno).c_str());
    if (opt.preallocate && w->file_size() > 0) {
        int e = ::posix_fallocate(w->fd_, 0, static_cast<off_t>(w->file_size()));
        // Filesystems or devices without fallocate support are fine; only a real shortage is an error.
        if (e == ENOSPC || e == EDQUOT || e == EFBIG)
            return errorf("%s: cannot reserve %llu bytes: %s", path.c_str(), (unsigned long long)w->file_size(),
                          errno_str(e).c_str());
    }
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>((header.size() >> (8 * i)) & 0xff);
    EMBER_TRY(w->pwrite_all(len, 8, 0));
    EMBER_TRY(w->pwrite_all(header.data(), header.size(), 8));
    return w;
}

SafetensorsWriter::~SafetensorsWriter() {
    if (fd_ >= 0) ::close(fd_);
}

Status SafetensorsWriter::pwrite_all(const void* data, size_t n, uint64_t offset) {
    EMBER_REQUIRE(fd_ >= 0, "%s: writer is closed", path_.c_str());
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        ssize_t k = ::pwrite(fd_, p, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
        if (k < 0) {
            if (errno == EINTR) continue;
            return errorf("%s: write failed at offset %llu: %s", path_.c_str(), (unsigned long long)offset,
                          errno_str(errno).c_str());
        }
        if (k == 0) return errorf("%s: write failed at offset %llu: wrote 0 bytes", path_.c_str(),
                                  (unsigned long long)offset);
        p += k;
        n -= static_cast<size_t>(k);
        offset += static_cast<uint64_t>(k);
    }
    return Status::ok();
}

Status SafetensorsWriter::write(const std::string& name, const void* data, size_t nbytes) {
    auto it = index_.find(name);
    EMBER_REQUIRE(it != index_.end(), "%s: tensor '%s' is not in this file's header", path_.c_str(), name.c_str());
    size_t i = it->second;
    uint64_t want = specs_[i].nbytes();
    EMBER_REQUIRE(written_[i] + nbytes <= want, "%s: tensor '%s': writing %llu more bytes would exceed its %llu bytes",
                  path_.c_str(), name.c_str(), (unsigned long long)nbytes, (unsigned long long)want);
    EMBER_TRY(pwrite_all(data, nbytes, data_start_ + begin_[i] + written_[i]));
    written_[i] += nbytes;
    return Status::ok();
}

Status SafetensorsWriter::finish() {
    EMBER_REQUIRE(fd_ >= 0, "%s: writer already finished", path_.c_str());
    for (size_t i = 0; i < specs_.size(); ++i)
        EMBER_REQUIRE(written_[i] == specs_[i].nbytes(), "%s: tensor '%s' is incomplete (%llu of %llu bytes written)",
                      path_.c_str(), specs_[i].name.c_str(), (unsigned long long)written_[i],
                      (unsigned long long)specs_[i].nbytes());
    // A preallocated file is already the right size; make sure of it for the no-fallocate path too.
    if (::ftruncate(fd_, static_cast<off_t>(file_size())) != 0 && errno != EINVAL)
        return errorf("%s: cannot set file size: %s", path_.c_str(), errno_str(errno).c_str());
    if (::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS)
        return errorf("%s: flushing to disk failed: %s", path_.c_str(), errno_str(errno).c_str());
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return errorf("%s: close failed: %s", path_.c_str(), errno_str(errno).c_str());
    return Status::ok();
}

// ---------------------------------------------------------------------------------------------------------
// CheckpointWriter

Expected<std::unique_ptr<CheckpointWriter>> CheckpointWriter::create(const std::string& dir,
                                                                     const std::vector<TensorSpec>& tensors,
                                                                     const CheckpointWriterOptions& opt) {
    std::unique_ptr<CheckpointWriter> cw(new CheckpointWriter());
    cw->dir_ = dir;
    cw->opt_ = opt;
    EMBER_REQUIRE(opt.max_shard_bytes > 0, "max shard size must be positive");
    std::error_code ec;
    EMBER_REQUIRE(fs::is_directory(dir, ec), "%s: output directory does not exist", dir.c_str());
    std::vector<size_t> shard = plan_shards(tensors, opt.max_shard_bytes);
    size_t n_shards = tensors.empty() ? 1 : shard.back() + 1;
    std::vector<std::vector<TensorSpec>> per(n_shards);
    for (size_t i = 0; i < tensors.size(); ++i) {
        per[shard[i]].push_back(tensors[i]);
        EMBER_REQUIRE(cw->shard_of_.emplace(tensors[i].name, shard[i]).second, "tensor '%s' listed twice",
                      tensors[i].name.c_str());
        cw->total_size_ += tensors[i].nbytes();
    }
    SafetensorsWriterOptions so;
    so.metadata = opt.metadata;
    so.align_by_dtype = opt.align_by_dtype;
    so.preallocate = opt.preallocate;
    for (size_t s = 0; s < n_shards; ++s) {
        std::string name = n_shards == 1 ? std::string("model.safetensors")
                                         : strfmt("model-%05zu-of-%05zu.safetensors", s + 1, n_shards);
        auto w = SafetensorsWriter::create((fs::path(dir) / name).string(), std::move(per[s]), so);
        if (!w) {
            for (const auto& f : cw->files()) fs::remove(f, ec);
            fs::remove(fs::path(dir) / name, ec);
            return w.status();
        }
        cw->shards_.push_back(std::move(w.value()));
    }
    return cw;
}

Status CheckpointWriter::write(const std::string& name, const void* data, size_t nbytes) {
    auto it = shard_of_.find(name);
    EMBER_REQUIRE(it != shard_of_.end(), "%s: tensor '%s' was not declared", dir_.c_str(), name.c_str());
    return shards_[it->second]->write(name, data, nbytes);
}

std::vector<std::string> CheckpointWriter::files() const {
    std::vector<std::string> out;
    for (const auto& s : shards_) out.push_back(s->path());
    if (opt_.write_index) out.push_back((fs::path(dir_) / "model.safetensors.index.json").string());
    return out;
}

Status CheckpointWriter::finish() {
    for (auto& s : shards_) EMBER_TRY(s->finish());
    if (!opt_.write_index) return Status::ok();
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    meta["total_size"] = total_size_;
    for (auto it = opt_.index_metadata.begin(); it != opt_.index_metadata.end(); ++it) meta[it.key()] = it.value();
    nlohmann::json weight_map = nlohmann::json::object();  // std::map-backed: sorted by name, as mlx-lm writes it
    for (const auto& [name, s] : shard_of_) weight_map[name] = fs::path(shards_[s]->path()).filename().string();
    nlohmann::ordered_json idx = {{"metadata", meta}, {"weight_map", weight_map}};
    std::string path = (fs::path(dir_) / "model.safetensors.index.json").string();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) return errorf("%s: cannot create: %s", path.c_str(), errno_str(errno).c_str());
    f << idx.dump(4);  // no trailing newline, as python json.dump
    f.flush();
    if (!f) return errorf("%s: write failed: %s", path.c_str(), errno_str(errno).c_str());
    return Status::ok();
}

}  // namespace ember
