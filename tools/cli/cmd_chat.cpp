// `ember chat`: an interactive terminal chat — the model's chat template, the conversation kept (the session's
// state is reused when the new prompt extends it), /reset, /exit, Ctrl-C stops the current reply. Reads lines from
// stdin, so it also works with a pipe or a file (one user message per line).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>

#include "args.h"
#include "commands.h"
#include "common.h"
#include "core/parallel.h"
#include "runtime/session.h"
#include "server/chat_prompt.h"
#include "server/reply_text.h"

namespace ember::cli {

namespace {
std::atomic<bool> g_interrupted{false};
void on_sigint(int) { g_interrupted = true; }

void usage() {
    std::printf(
        "usage: ember chat -m MODEL [options]\n"
        "  --system TEXT     system prompt\n"
        "  -n N              most tokens per reply (default 1024)\n"
        "%s"
        "  --no-think        disable thinking (Qwen templates: enable_thinking=false)\n"
        "  --device D        auto (default), cpu or cuda;  -c, --ctx-size N  context (default 4096)\n"
        "  --threads N       CPU threads\n"
        "Type a message and Enter. /reset starts over, /exit (or end of input) quits; Ctrl-C stops the reply.\n",
        kSamplingHelp);
}

bool starts_with(const std::vector<int32_t>& a, const std::vector<int32_t>& prefix) {
    return prefix.size() < a.size() && std::equal(prefix.begin(), prefix.end(), a.begin());
}
}  // namespace

int cmd_chat(int argc, char** argv) {
    Args a(argc, argv);
    if (a.flag({"--help", "-h"})) { usage(); return 0; }
    const std::string model = a.str({"-m", "--model"}), system = a.str({"--system"}), device = a.str({"--device"}, "auto");
    const long n = a.integer({"-n", "--n-predict"}, 1024), ctx = a.integer({"--ctx-size", "-c"}, 4096);
    const long threads = a.integer({"--threads", "-t"}, 0);
    const SamplingParams sp = sampling_options(a);
    const bool no_think = a.flag({"--no-think"});
    if (!a.error().empty()) return fail("chat", a.error());
    if (model.empty()) return fail("chat", "give -m MODEL");
    if (n < 1 || ctx < 2) return fail("chat", "-n must be ≥ 1 and --ctx-size ≥ 2");
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    auto m = open_model(model, "", device, ctx);
    if (!m) return fail("chat", m.message());
    auto tok_or = open_tokenizer(model);
    if (!tok_or) return fail("chat", tok_or.message());
    if (!tok_or.value()) return fail("chat", "this model has no tokenizer");
    const Tokenizer& tok = *tok_or.value();
    auto chat = server::ChatFormatter::load(model, tok);
    if (!chat) return fail("chat", chat.message());

    struct sigaction sa = {};
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART;  // a Ctrl-C at the prompt must not end the read
    sigaction(SIGINT, &sa, nullptr);

    const bool tty_in = isatty(0), tty_out = isatty(1);
    if (tty_in) std::fprintf(stderr, "ember chat — %s. /reset starts over, /exit quits, Ctrl-C stops a reply.\n",
                             model.c_str());
    server::ojson kwargs = server::ojson::object();
    if (no_think) kwargs["enable_thinking"] = false;
    server::ojson messages = server::ojson::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    const size_t base = messages.size();
    Session session(**m);
    std::string line;
    for (;;) {
        if (tty_in) std::fputs("> ", stdout), std::fflush(stdout);
        if (!std::getline(std::cin, line)) break;
        if (line == "/exit" || line == "/quit") break;
        if (line == "/reset") {
            messages.erase(messages.begin() + long(base), messages.end());
            session.reset();
            std::puts("(conversation cleared)");
            continue;
        }
        if (line.empty()) continue;
        messages.push_back({{"role", "user"}, {"content", line}});
        auto text = chat->render(messages, true, kwargs);
        if (!text) {
            std::fprintf(stderr, "ember chat: %s\n", text.message().c_str());
            messages.erase(messages.end() - 1);
            continue;
        }
        const std::vector<int32_t> ids = server::encode_prompt(tok, text.value());
        if (int64_t(ids.size()) + n > ctx) {
            std::fprintf(stderr, "ember chat: the conversation (%zu tokens) + %ld reply tokens exceeds the context (%ld);"
                         " /reset to start over\n", ids.size(), n, ctx);
            messages.erase(messages.end() - 1);
            continue;
        }
        // Reuse the state when the new prompt extends what it has consumed (the usual case: the previous turn).
        if (!starts_with(ids, session.tokens())) session.reset();
        const std::vector<int32_t> suffix(ids.begin() + long(session.tokens().size()), ids.end());
        server::ReplyText reply(tok, {}, chat->reasoning(), server::prompt_opens_reasoning(text.value()));
        std::string content;
        bool in_reasoning = false;
        auto show = [&](const server::ReplyDelta& d) {
            if (!d.reasoning.empty()) {
                if (!in_reasoning && tty_out) std::fputs("\x1b[2m", stdout);
                in_reasoning = true;
                std::fputs(d.reasoning.c_str(), stdout);
            }
            if (!d.content.empty()) {
                if (in_reasoning) std::fputs(tty_out ? "\x1b[0m\n" : "\n", stdout);
                in_reasoning = false;
                std::fputs(d.content.c_str(), stdout);
                content += d.content;
            }
            std::fflush(stdout);
        };
        g_interrupted = false;
        auto st = session.generate(suffix, n, sp, tok.eos_ids(), [&](int32_t id) {
            if (g_interrupted) return false;
            server::ReplyDelta d;
            reply.push(id, d);
            show(d);
            return true;
        });
        server::ReplyDelta tail;
        reply.finish(tail);
        show(tail);
        if (in_reasoning && tty_out) std::fputs("\x1b[0m", stdout);
        if (g_interrupted) std::fputs(" [stopped]", stdout);
        std::fputs("\n", stdout);
        std::fflush(stdout);
        if (!st) {
            std::fprintf(stderr, "ember chat: %s\n", st.message().c_str());
            session.reset();
        }
        messages.push_back({{"role", "assistant"}, {"content", content}});
    }
    return 0;
}

}  // namespace ember::cli
