// `ember serve`: the OpenAI-compatible HTTP server (src/server) on one model; SIGINT / SIGTERM shut it down.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <string>
#include <thread>

#include "args.h"
#include "commands.h"
#include "common.h"
#include "core/parallel.h"
#include "server/server.h"

namespace ember::cli {

namespace {
void usage() {
    std::printf(
        "usage: ember serve -m MODEL [options]\n"
        "  --host H            address to bind (default 127.0.0.1: this machine only)\n"
        "  --port P            port (default 8080; 0 = any free port, printed at start)\n"
        "  --api-key KEY       require 'Authorization: Bearer KEY' on every endpoint but /health and the page\n"
        "  --max-seqs N        sequences generated together (default 4)\n"
        "  --max-queue N       requests waiting beyond those before 503 + Retry-After (default 64)\n"
        "  -c, --ctx-size N    prompt + completion tokens per request (default 4096; the GPU KV capacity)\n"
        "  --prefix-cache-mib N  memory of the exact prefix cache (host; device memory on CUDA; default 1024; 0 = off): a prompt that\n"
        "                      starts like an earlier one (or its reply) resumes from a checkpoint every 256 tokens\n"
        "  --model-id NAME     the model name of /v1/models (default: the file or directory name)\n"
        "  --max-body BYTES    largest request body (default 8 MiB)\n"
        "  --http-threads N    connections served at once (default max-seqs + max-queue + 8); as many more\n"
        "                      may wait for a thread, beyond that a connection gets 503 + Retry-After\n"
        "  --timeout S         read / write timeout of a connection in seconds (default 10)\n"
        "  --request-timeout S a whole request (line, headers, body) must arrive within S seconds (default 30)\n"
        "  --grace S           on SIGINT / SIGTERM, time in-flight replies get to finish (default 30)\n"
        "  --device D          auto (default), cpu or cuda\n"
        "  --threads N         CPU threads\n"
        "%s"
        "Endpoints: POST /v1/chat/completions, /v1/completions, /tokenize, /detokenize; GET /v1/models, /health,\n"
        "/metrics, / (web chat page).\n", kQ8ActivationsHelp);
}
}  // namespace

int cmd_serve(int argc, char** argv) {
    Args a(argc, argv);
    if (a.flag({"--help", "-h"})) { usage(); return 0; }
    server::ServerOptions opt;
    opt.model_path = a.str({"-m", "--model"});
    opt.http.host = a.str({"--host"}, "127.0.0.1");
    opt.http.port = static_cast<int>(a.integer({"--port"}, 8080));
    opt.http.api_key = a.str({"--api-key"});
    opt.queue.max_seqs = static_cast<int>(a.integer({"--max-seqs"}, 4));
    opt.queue.max_queued = static_cast<int>(a.integer({"--max-queue"}, 64));
    opt.ctx_size = a.integer({"--ctx-size", "-c"}, 4096);
    const long prefix_mib = a.integer({"--prefix-cache-mib"}, 1024);
    opt.model_id = a.str({"--model-id"});
    opt.http.max_body_bytes = static_cast<size_t>(a.integer({"--max-body"}, 8 << 20));
    const long threads_http = a.integer({"--http-threads"}, 0);
    const long timeout = a.integer({"--timeout"}, 10), grace = a.integer({"--grace"}, 30);
    const long request_timeout = a.integer({"--request-timeout"}, 30);
    const std::string device = a.str({"--device"}, "auto");
    const long threads = a.integer({"--threads", "-t"}, 0);
    const LoadOptions load = load_options(a);
    if (!a.error().empty()) return fail("serve", a.error());
    if (opt.model_path.empty()) return fail("serve", "give -m MODEL");
    if (opt.http.port < 0 || opt.http.port > 65535) return fail("serve", "--port must be in [0, 65535]");
    if (opt.queue.max_seqs < 1 || opt.queue.max_queued < 0) return fail("serve", "--max-seqs ≥ 1 and --max-queue ≥ 0");
    if (opt.ctx_size < 2) return fail("serve", "--ctx-size must be ≥ 2");
    if (prefix_mib < 0 || prefix_mib > (1L << 22)) return fail("serve", "--prefix-cache-mib must be in [0, 4194304]");
    opt.queue.prefix_cache_bytes = int64_t(prefix_mib) << 20;
    if (timeout < 1 || timeout > 3600 || request_timeout < 1 || request_timeout > 3600 || grace < 0 ||
        opt.http.max_body_bytes < 1024)
        return fail("serve", "--timeout and --request-timeout in [1, 3600], --grace ≥ 0, --max-body ≥ 1024");
    opt.http.read_timeout_s = opt.http.write_timeout_s = static_cast<int>(timeout);
    opt.http.request_timeout_s = static_cast<int>(request_timeout);
    opt.shutdown_grace_ms = static_cast<int>(grace * 1000);
    opt.http.threads = threads_http > 0 ? static_cast<int>(threads_http) : opt.queue.max_seqs + opt.queue.max_queued + 8;
    if (threads > 0) set_num_threads(static_cast<int>(threads));

    // SIGINT / SIGTERM are taken by one thread (sigwait): blocked here, before any thread exists, so every thread
    // inherits the mask and none is interrupted.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    auto m = open_model(opt.model_path, "", device, opt.ctx_size, load);
    if (!m) return fail("serve", m.message());
    auto tok = open_tokenizer(opt.model_path);
    if (!tok) return fail("serve", tok.message());
    auto srv = server::Server::create(std::move(m.value()), std::move(tok.value()), opt);
    if (!srv) return fail("serve", srv.message());
    server::Server& s = *srv.value();
    if (auto st = s.bind(); !st) return fail("serve", st.message());
    const auto& c = s.context();
    // The cache the queue really made: none for a model that cannot snapshot its state, whatever was asked.
    const int64_t cache_bytes = c.metrics.prefix_cache_budget_bytes;
    const std::string cache = cache_bytes > 0 ? strfmt("%lld MiB", (long long)(cache_bytes >> 20))
                              : prefix_mib     ? std::string("off (this model cannot snapshot its state)")
                                               : std::string("off");
    std::fprintf(stderr, "ember serve: %s (%s) on http://%s:%d  context %lld, %d sequences + %d queued, prefix cache %s%s\n",
                 c.model_id.c_str(), c.model.info().architecture.c_str(), opt.http.host.c_str(), s.port(),
                 (long long)c.ctx, opt.queue.max_seqs, opt.queue.max_queued, cache.c_str(),
                 opt.http.api_key.empty() ? "" : ", API key required");
    std::fflush(stderr);
    std::thread on_signal([&s, sigs] {
        int sig = 0;
        sigwait(&sigs, &sig);
        std::fprintf(stderr, "ember serve: %s, shutting down (in-flight replies get their grace time)\n",
                     sig == SIGINT ? "SIGINT" : "SIGTERM");
        s.shutdown();
    });
    s.serve();  // returns once shutdown() has stopped the listener and the handlers are done
    pthread_kill(on_signal.native_handle(), SIGTERM);  // wakes the signal thread if serve() ended on its own
    on_signal.join();
    std::fprintf(stderr, "ember serve: stopped\n");
    return 0;
}

}  // namespace ember::cli
