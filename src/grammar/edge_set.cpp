// Edge sets (runtime.h EdgeSet): the tokens that leave a frame, grouped by their suffix after the pop, in a trie.
// Many states share one list (every position inside a free string ends it with the same tokens: `",`, `"}`,
// `": "`, …; a few thousand at 248k), so each distinct list is built once per grammar.
#include <algorithm>
#include <string_view>

#include "grammar/runtime.h"

namespace ember::grammar {

std::shared_ptr<const EdgeSet> Runtime::edge_set(std::vector<int32_t> pairs) {
    auto it = edge_sets_.find(pairs);
    if (it != edge_sets_.end()) return it->second;
    auto es = std::make_shared<EdgeSet>();
    std::vector<std::pair<std::string_view, int32_t>> sfx;  // (suffix, token), views into the vocabulary
    sfx.reserve(pairs.size() / 2);
    for (size_t i = 0; i < pairs.size(); i += 2)
        sfx.push_back({std::string_view(t_->bytes(pairs[i])).substr(size_t(pairs[i + 1])), pairs[i]});
    std::sort(sfx.begin(), sfx.end());
    sfx.erase(std::unique(sfx.begin(), sfx.end()), sfx.end());
    std::vector<std::pair<std::string_view, int32_t>> entries;  // (suffix, group)
    for (size_t i = 0; i < sfx.size();) {
        const int32_t gid = int32_t(es->group_begin.size());
        es->group_begin.push_back(uint32_t(es->group_toks.size()));
        size_t k = i;
        while (k < sfx.size() && sfx[k].first == sfx[i].first) es->group_toks.push_back(sfx[k++].second);
        entries.push_back({sfx[i].first, gid});
        i = k;
    }
    es->group_begin.push_back(uint32_t(es->group_toks.size()));
    es->suffixes = Trie::build_sorted(entries);
    stats_.edge_sets_built++;
    edge_sets_.emplace(std::move(pairs), es);
    return es;
}

}  // namespace ember::grammar
