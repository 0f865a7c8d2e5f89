// bpe.cpp: BPE vocab/merges loading and the priority-queue merge loop.
#include "tokenizer/bpe.h"

#include <nlohmann/json.hpp>
#include <queue>

namespace ember {
namespace {

uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

size_t char_len(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

bool null_or(const nlohmann::json& j, const char* key, bool want) {
    return !j.contains(key) || j[key].is_null() || (j[key].is_boolean() && j[key].get<bool>() == want);
}
bool null_or_empty(const nlohmann::json& j, const char* key) {
    return !j.contains(key) || j[key].is_null() || (j[key].is_string() && j[key].get<std::string>().empty());
}

}  // namespace

Expected<std::unique_ptr<Bpe>> Bpe::from_json(const nlohmann::json& j) {
    EMBER_REQUIRE(j.is_object(), "model: not an object");
    std::string type = j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "BPE";
    EMBER_REQUIRE(type == "BPE", "unsupported model type '%s' (only BPE is supported)", type.c_str());
    EMBER_REQUIRE(j.contains("vocab") && j["vocab"].is_object(), "BPE model: missing \"vocab\" object");
    EMBER_REQUIRE(j.contains("merges") && j["merges"].is_array(), "BPE model: missing \"merges\" array");
    EMBER_REQUIRE(null_or(j, "byte_fallback", false), "BPE model: byte_fallback=true is not supported");
    EMBER_REQUIRE(null_or_empty(j, "continuing_subword_prefix") && null_or_empty(j, "end_of_word_suffix"),
                  "BPE model: continuing_subword_prefix / end_of_word_suffix are not supported");
    EMBER_REQUIRE(!j.contains("dropout") || j["dropout"].is_null() ||
                      (j["dropout"].is_number() && j["dropout"].get<double>() == 0.0),
                  "BPE model: dropout is not supported");

    auto m = std::make_unique<Bpe>();
    m->ignore_merges_ = j.value("ignore_merges", false);
    m->fuse_unk_ = j.contains("fuse_unk") && j["fuse_unk"].is_boolean() && j["fuse_unk"].get<bool>();
    const auto& vocab = j["vocab"];
    m->vocab_.reserve(vocab.size());
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        EMBER_REQUIRE(it.value().is_number_integer() && it.value().get<int64_t>() >= 0 &&
                          it.value().get<int64_t>() < INT32_MAX,
                      "BPE model: bad id for vocab entry '%s'", it.key().c_str());
        m->vocab_.emplace(it.key(), static_cast<int32_t>(it.value().get<int64_t>()));
    }
    if (j.contains("unk_token") && j["unk_token"].is_string()) {
        auto it = m->vocab_.find(j["unk_token"].get<std::string>());
        EMBER_REQUIRE(it != m->vocab_.end(), "BPE model: unk_token is not in the vocab");
        m->unk_id_ = it->second;
    }

    // Merges: "a b" strings (older files; "#version" lines skipped) or ["a", "b"] pairs. Rank = position.
    const auto& merges = j["merges"];
    m->merges_.reserve(merges.size());
    uint32_t rank = 0;
    std::string a, b;
    for (const auto& e : merges) {
        if (e.is_string()) {
            const std::string& line = e.get_ref<const std::string&>();
            if (line.rfind("#version", 0) == 0) continue;
            size_t sp = line.find(' ');
            EMBER_REQUIRE(sp != std::string::npos && line.find(' ', sp + 1) == std::string::npos,
                          "BPE model: merge %u is not of the form \"a b\": '%s'", rank + 1, line.c_str());
            a = line.substr(0, sp);
            b = line.substr(sp + 1);
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
            a = e[0].get<std::string>();
            b = e[1].get<std::string>();
        } else {
            return errorf("BPE model: merge %u is neither \"a b\" nor [\"a\", \"b\"]", rank + 1);
        }
        EMBER_TRY(m->add_merge(a, b, rank++, /*keep_first=*/false));  // later duplicates win, as in HF
    }
    return m;
}

Expected<std::unique_ptr<Bpe>> Bpe::from_vocab(std::unordered_map<std::string, int32_t> vocab,
                                               const std::vector<std::string>& merges, bool ignore_merges) {
    auto m = std::make_unique<Bpe>();
    m->vocab_ = std::move(vocab);
    m->ignore_merges_ = ignore_merges;
    m->merges_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string& line = merges[i];
        size_t sp = line.find(' ', 1);
        EMBER_REQUIRE(sp != std::string::npos && sp + 1 < line.size(), "merge %zu is not of the form \"a b\": '%s'",
                      i, line.c_str());
        EMBER_TRY(m->add_merge(line.substr(0, sp), line.substr(sp + 1), static_cast<uint32_t>(i),
                               /*keep_first=*/true));  // llama.cpp: bpe_ranks.emplace
    }
    return m;
}

Status Bpe::add_merge(const std::string& a, const std::string& b, uint32_t rank, bool keep_first) {
    auto ia = vocab_.find(a), ib = vocab_.find(b), in = vocab_.find(a + b);
    EMBER_REQUIRE(ia != vocab_.end(), "BPE model: merge token '%s' is not in the vocab", a.c_str());
    EMBER_REQUIRE(ib != vocab_.end(), "BPE model: merge token '%s' is not in the vocab", b.c_str());
    EMBER_REQUIRE(in != vocab_.end(), "BPE model: merged token '%s' is not in the vocab", (a + b).c_str());
    uint64_t key = pair_key(ia->second, ib->second);
    if (keep_first) merges_.emplace(key, Merge{rank, in->second});
    else merges_[key] = Merge{rank, in->second};
    return Status::ok();
}

std::vector<int32_t> Bpe::merge_word(std::string_view w) const {
    // Symbols form a doubly linked list over the word's characters; len == 0 marks a symbol merged away.
    struct Sym {
        int32_t id;
        int prev, next;
        size_t len;
    };
    std::vector<Sym> syms;
    syms.reserve(w.size());
    auto push = [&syms](int32_t id, size_t len) {
        int n = static_cast<int>(syms.size());
        if (n > 0) syms.back().next = n;
        syms.push_back({id, n - 1, -1, len});
    };
    int32_t unk = -1;  // pending (possibly fused) unknown
    size_t unk_len = 0;
    for (size_t i = 0; i < w.size();) {
        size_t n = std::min(char_len(static_cast<unsigned char>(w[i])), w.size() - i);
        auto it = vocab_.find(std::string(w.substr(i, n)));
        if (it != vocab_.end()) {
            if (unk >= 0) push(unk, unk_len), unk = -1;
            push(it->second, n);
        } else if (unk_id_ >= 0) {  // unknown character: unk token (fused runs if fuse_unk); dropped if no unk
            if (unk >= 0 && fuse_unk_) {
                unk_len += n;
            } else {
                if (unk >= 0) push(unk, unk_len);
                unk = unk_id_, unk_len = n;
            }
        }
        i += n;
    }
    if (unk >= 0) push(unk, unk_len);

    struct Cand {
        uint32_t rank;
        int pos;
        int32_t new_id;
        bool operator<(const Cand& o) const {  // max-heap order: lowest rank, then leftmost, on top
            return rank != o.rank ? rank > o.rank : pos > o.pos;
        }
    };
    std::priority_queue<Cand> q;
    auto consider = [&](int pos) {
        int nx = syms[pos].next;
        if (nx < 0) return;
        auto it = merges_.find(pair_key(syms[pos].id, syms[nx].id));
        if (it != merges_.end()) q.push({it->second.rank, pos, it->second.new_id});
    };
    for (int i = 0; i + 1 < static_cast<int>(syms.size()); ++i) consider(i);
    while (!q.empty()) {
        Cand top = q.top();
        q.pop();
        Sym& s = syms[top.pos];
        if (s.len == 0 || s.next < 0) continue;
        Sym& r = syms[s.next];
        auto it = merges_.find(pair_key(s.id, r.id));
        if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale entry
        s.id = top.new_id;
        s.len += r.len;
        r.len = 0;
        s.next = r.next;
        if (s.next >= 0) syms[s.next].prev = top.pos;
        if (s.prev >= 0) consider(s.prev);
        consider(top.pos);
    }
    std::vector<int32_t> ids;
    for (const Sym& s : syms)
        if (s.len) ids.push_back(s.id);
    return ids;
}

void Bpe::encode(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges_) {
        auto it = vocab_.find(std::string(word));
        if (it != vocab_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    std::string key(word);
    {
        std::lock_guard<std::mutex> lock(cache_mu_);
        auto it = cache_.find(key);
        if (it != cache_.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::vector<int32_t> ids = merge_word(word);
    out.insert(out.end(), ids.begin(), ids.end());
    if (word.size() < kCacheMaxLen) {
        std::lock_guard<std::mutex> lock(cache_mu_);
        if (cache_.size() >= kCacheCapacity) cache_.clear();
        cache_.emplace(std::move(key), std::move(ids));
    }
}

}  // namespace ember
