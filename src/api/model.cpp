// model.cpp: ember::Model (include/ember/model.h) — loading (api/open_model.h), the tokenizer and the chat template
// (server/chat_prompt.h, as `ember serve` and `ember generate --chat` render it); Engine::create over a Model.
#include "api/model_impl.h"

#include "api/open_model.h"
#include "core/parallel.h"
#include "runtime/engine_impl.h"

namespace ember {

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Expected<Model> Model::load(const std::string& path, const ModelOptions& opt) {
    EMBER_REQUIRE(!path.empty(), "load: no model path");
    EMBER_REQUIRE(opt.threads >= 0, "load: threads must be ≥ 0 (got %d)", opt.threads);
    if (opt.threads > 0) set_num_threads(opt.threads);
    LoadOptions lo;
    lo.q8_activations = opt.q8_activations;
    lo.prefill_precision = opt.bf16_prefill ? "bf16" : "fp32";
    lo.kv_cache_dtype = opt.kv_cache_dtype;
    auto impl = std::make_shared<Impl>();
    impl->path = path;
    impl->device = lo.q8_activations && opt.device == "auto" ? "cpu" : resolve_device(opt.device);
    EMBER_ASSIGN(impl->lm, open_model(path, "", impl->device, opt.context, lo));
    EMBER_ASSIGN(impl->tok, open_tokenizer(path));
    if (impl->tok) {
        EMBER_ASSIGN(server::ChatFormatter chat, server::ChatFormatter::load(path, *impl->tok));
        impl->chat = std::make_unique<server::ChatFormatter>(std::move(chat));
    }
    return Model(std::move(impl));
}

std::string Model::architecture() const { return impl_->lm->info().architecture; }
std::string Model::device() const { return impl_->device; }
int64_t Model::vocab_size() const { return impl_->lm->info().vocab_size; }
int64_t Model::context() const { return impl_->lm->info().max_context; }
bool Model::has_tokenizer() const { return impl_->tok != nullptr; }

Expected<std::vector<int32_t>> Model::encode(const std::string& text) const {
    EMBER_REQUIRE(impl_->tok, "encode: the model %s has no tokenizer", impl_->path.c_str());
    return server::encode_prompt(*impl_->tok, text);
}

Expected<std::string> Model::decode(const std::vector<int32_t>& ids) const {
    EMBER_REQUIRE(impl_->tok, "decode: the model %s has no tokenizer", impl_->path.c_str());
    const int64_t V = vocab_size();
    for (int32_t id : ids)
        EMBER_REQUIRE(id >= 0 && id < V, "decode: token id %d is outside the vocabulary [0, %lld)", id, (long long)V);
    return impl_->tok->decode(ids);
}

std::vector<int32_t> Model::eos_ids() const { return impl_->tok ? impl_->tok->eos_ids() : std::vector<int32_t>{}; }

Expected<std::string> Model::chat_prompt(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                         bool thinking) const {
    EMBER_REQUIRE(impl_->chat, "chat_prompt: the model %s has no tokenizer (nor chat template)", impl_->path.c_str());
    server::ojson msgs = server::ojson::array();
    for (const ChatMessage& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
    server::ojson kwargs = server::ojson::object();
    if (!thinking) kwargs["enable_thinking"] = false;
    return impl_->chat->render(msgs, add_generation_prompt, kwargs);
}

Expected<Engine> Engine::create(const Model& model, const EngineOptions& opt) {
    return make_engine(*model.impl()->lm, opt, model.impl());
}

}  // namespace ember
