// server.cpp: Server — wires the model, the engine queue and the endpoints together; shutdown order.
#include "server/server.h"

#include <filesystem>

namespace ember::server {

Expected<std::unique_ptr<Server>> Server::create(std::unique_ptr<CausalLM> model, std::unique_ptr<Tokenizer> tok,
                                                 const ServerOptions& opt) {
    EMBER_REQUIRE(model, "no model");
    EMBER_REQUIRE(tok, "this model has no tokenizer: the server needs one (tokenizer.json or GGUF metadata)");
    EMBER_REQUIRE(opt.ctx_size > 1, "--ctx-size must be at least 2 (got %lld)", (long long)opt.ctx_size);
    std::unique_ptr<Server> s(new Server());
    s->opt_ = opt;
    s->model_ = std::move(model);
    s->tok_ = std::move(tok);
    EMBER_ASSIGN(ChatFormatter chat, ChatFormatter::load(opt.model_path, *s->tok_));
    s->chat_ = std::make_unique<ChatFormatter>(std::move(chat));
    int64_t ctx = opt.ctx_size;
    const int64_t limit = s->model_->info().max_context;
    if (limit > 0 && ctx > limit) ctx = limit;
    std::string id = opt.model_id;
    if (id.empty()) id = opt.model_path.empty() ? "ember" : std::filesystem::path(opt.model_path).filename().string();
    if (id.empty()) id = std::filesystem::path(opt.model_path).parent_path().filename().string();
    s->queue_ = std::make_unique<EngineQueue>(*s->model_, opt.queue, s->metrics_);
    EMBER_TRY(s->queue_->ready());  // the batch pool of --max-seqs slots
    s->grammars_ = std::make_unique<GrammarCache>(*s->tok_, s->model_->info().vocab_size);
    s->ctx_.reset(new ServerContext{*s->model_, *s->tok_, *s->chat_, *s->queue_, s->metrics_, *s->grammars_, id, ctx,
                                    opt.retry_after_s, unix_now()});
    s->http_ = std::make_unique<HttpServer>(opt.http, s->metrics_);
    add_chat_routes(*s->http_, *s->ctx_);
    add_completion_routes(*s->http_, *s->ctx_);
    add_model_routes(*s->http_, *s->ctx_);
    add_tokenize_routes(*s->http_, *s->ctx_);
    add_metrics_routes(*s->http_, *s->ctx_);
    add_ui_routes(*s->http_, *s->ctx_);
    return s;
}

Server::~Server() {
    shutdown();
}

Status Server::bind() { return http_->bind(); }

void Server::serve() { http_->serve(); }

void Server::shutdown() {
    if (shut_.exchange(true)) return;
    if (http_) http_->stop();  // no new connections; serve() returns once the handlers are done
    if (queue_) queue_->shutdown(std::chrono::milliseconds(opt_.shutdown_grace_ms));
}

}  // namespace ember::server
