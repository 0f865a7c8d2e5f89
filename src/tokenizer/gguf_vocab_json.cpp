// GgufVocab from scripts/gguf_vocab_dump.py's JSON.
#include "tokenizer/gguf_vocab_json.h"

namespace ember {

Expected<GgufVocab> gguf_vocab_from_json(const nlohmann::json& j) {
    try {
        GgufVocab v;
        v.model = j.at("model").get<std::string>();
        v.pre = j.at("pre").get<std::string>();
        v.tokens = j.at("tokens").get<std::vector<std::string>>();
        v.token_types = j.at("token_types").get<std::vector<int32_t>>();
        v.merges = j.at("merges").get<std::vector<std::string>>();
        v.bos_id = j.at("bos_id").get<int32_t>();
        v.eos_id = j.at("eos_id").get<int32_t>();
        v.eot_id = j.at("eot_id").get<int32_t>();
        v.eom_id = j.at("eom_id").get<int32_t>();
        v.pad_id = j.at("pad_id").get<int32_t>();
        v.unk_id = j.at("unk_id").get<int32_t>();
        if (j.contains("add_bos") && !j["add_bos"].is_null()) v.add_bos = j["add_bos"].get<bool>();
        if (j.contains("add_eos") && !j["add_eos"].is_null()) v.add_eos = j["add_eos"].get<bool>();
        v.extra_eos = j.value("extra_eos", std::vector<int32_t>{});
        v.scores = j.value("scores", std::vector<float>{});
        if (j.contains("add_space_prefix") && !j["add_space_prefix"].is_null())
            v.add_space_prefix = j["add_space_prefix"].get<bool>();
        return v;
    } catch (const nlohmann::json::exception& e) {
        return errorf("GGUF vocabulary JSON: %s", e.what());
    }
}

}  // namespace ember
