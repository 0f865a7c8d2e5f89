// server.h: `ember serve` as a library — the model, its tokenizer and chat template, the engine queue and the
// HTTP server with every endpoint (one file each: routes_*.cpp) — plus what the endpoints share.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "models/model.h"
#include "server/chat_prompt.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/queue.h"
#include "server/structured.h"
#include "tokenizer/tokenizer.h"

namespace ember::server {

struct ServerOptions {
    HttpOptions http;
    QueueOptions queue;
    std::string model_path;  // for the chat template (a .gguf file or a model directory)
    std::string model_id;    // the name /v1/models lists and requests may give ("" → the file's base name)
    int64_t ctx_size = 4096;           // prompt + completion tokens per sequence (capped by the model's own limit)
    int shutdown_grace_ms = 30'000;    // SIGINT / SIGTERM: in-flight requests get this long to finish
    int retry_after_s = 1;             // the Retry-After of a 503 when the queue is full
};

// What every endpoint needs (read-only after start, apart from the queue and the metrics, which are thread-safe).
struct ServerContext {
    const CausalLM& model;
    const Tokenizer& tok;
    const ChatFormatter& chat;
    EngineQueue& queue;
    Metrics& metrics;
    GrammarCache& grammars;
    std::string model_id;
    int64_t ctx = 0;
    int retry_after_s = 1;
    int64_t created = 0;  // unix time the server started (for /v1/models)
};

// The endpoints, registered by their files.
void add_chat_routes(HttpServer& http, ServerContext& ctx);         // POST /v1/chat/completions
void add_completion_routes(HttpServer& http, ServerContext& ctx);   // POST /v1/completions
void add_model_routes(HttpServer& http, ServerContext& ctx);        // GET /v1/models, /v1/models/{id}, /health
void add_tokenize_routes(HttpServer& http, ServerContext& ctx);     // POST /tokenize, /detokenize
void add_metrics_routes(HttpServer& http, ServerContext& ctx);      // GET /metrics
void add_ui_routes(HttpServer& http, ServerContext& ctx);           // GET / (the web chat page)

// ---- shared by the generating endpoints (generation.cpp) ----

// Checks the model name, the prompt ids and the context, and fills the job (seed drawn when none was given).
bool make_job(const ServerContext& ctx, std::vector<int32_t> prompt, const GenerationOptions& gen, JobSpec& job,
              HttpResponse& error);
// spec.constraint ← the grammar of the request's response_format / grammar / json_schema (none: unchanged); false
// with a 400 carrying the compiler's message when the schema or grammar is invalid or unsupported.
// after_reasoning: see structured_constraint().
bool attach_structured(ServerContext& ctx, const GenerationOptions& gen, JobSpec& spec, HttpResponse& error,
                       bool after_reasoning = false);
// The job submitted, or a 503 (queue full: Retry-After; shutting down).
std::shared_ptr<Job> submit_job(ServerContext& ctx, JobSpec job, HttpResponse& error);

struct GenerationResult {
    ReplyDelta reply;                    // the whole reply (content, reasoning, logprobs)
    FinishReason finish = FinishReason::STOP;
    Usage usage;
    bool cancelled = false;              // the client left (or the server shut down) before the end
    std::string error;                   // the engine failed (the reply so far is kept)
};
// Reads the job to its end through the reply pipeline (detokenize, stop strings, reasoning split). on_delta
// (optional) gets every non-empty piece as it comes and returns false when the client is gone; keepalive
// (optional) is called when nothing came for a second and returns false likewise; client_gone (optional) is asked
// after every wait (each step's tokens, each idle second) and returns true once the client has left. Any of them
// cancels the job (the worker frees its slot at its next step) and the result is `cancelled`.
GenerationResult run_generation(ServerContext& ctx, Job& job, const JobSpec& spec, const GenerationOptions& gen,
                                bool reasoning, bool start_in_reasoning,
                                const std::function<bool(const ReplyDelta&)>& on_delta,
                                const std::function<bool()>& keepalive,
                                const std::function<bool()>& client_gone = nullptr);
// How an endpoint writes its replies: a streamed chunk (delta null on the closing chunk; first: the first chunk of
// the stream; fr: set on the closing chunk), the usage chunk (stream_options.include_usage), the whole response.
struct ReplyFormat {
    std::function<ojson(const ReplyDelta* delta, bool first, const FinishReason* fr)> chunk;
    std::function<ojson(const Usage& u)> usage_chunk;
    std::function<ojson(const GenerationResult& r)> whole;
};
// Runs the submitted job and answers: SSE when gen.stream (chunks, the closing chunk, the usage chunk, [DONE]; an
// engine failure mid-stream becomes an error event), else one JSON body (500 on an engine failure, 503 when the
// server shut down first). A client that leaves cancels the job: streamed, seen when a write fails; not streamed,
// seen by client_gone (HttpRequest::client_gone; answered 499, which nobody reads).
HttpResponse respond(ServerContext& ctx, std::shared_ptr<Job> job, JobSpec spec, GenerationOptions gen,
                     bool reasoning, bool start_in_reasoning, ReplyFormat fmt,
                     const std::function<bool()>& client_gone);
// A response id: prefix + 24 random hex digits.
std::string new_id(const char* prefix);
int64_t unix_now();

class Server {
public:
    // Takes the model and tokenizer; loads the chat template; starts the engine worker.
    static Expected<std::unique_ptr<Server>> create(std::unique_ptr<CausalLM> model, std::unique_ptr<Tokenizer> tok,
                                                    const ServerOptions& opt);
    ~Server();
    Status bind();
    int port() const { return http_->port(); }
    void serve();  // blocks until shutdown() has finished
    // Stop accepting, let in-flight generations finish for the grace time, cancel the rest. Any thread.
    void shutdown();
    const ServerContext& context() const { return *ctx_; }

private:
    Server() = default;
    ServerOptions opt_;
    std::unique_ptr<CausalLM> model_;
    std::unique_ptr<Tokenizer> tok_;
    std::unique_ptr<ChatFormatter> chat_;
    Metrics metrics_;
    std::unique_ptr<EngineQueue> queue_;
    std::unique_ptr<GrammarCache> grammars_;
    std::unique_ptr<ServerContext> ctx_;
    std::unique_ptr<HttpServer> http_;
    std::atomic<bool> shut_{false};
};

}  // namespace ember::server
