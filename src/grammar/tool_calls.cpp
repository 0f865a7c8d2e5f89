// Tool-call parsing (incremental) and tool_choice grammars (tool_calls.h).
#include "grammar/tool_calls.h"

#include <nlohmann/json.hpp>

#include "grammar/json_schema_impl.h"

namespace ember::grammar {

namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>", kPythonTag = "<|python_tag|>";

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_suffix(std::string_view s, std::string_view tag) {
    for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
        if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
    return 0;
}

// Scans a JSON value starting at s[i] (after whitespace); returns the index past it, or npos if incomplete.
size_t value_end(std::string_view s, size_t i) {
    while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i >= s.size()) return std::string_view::npos;
    int depth = 0;
    bool str = false, esc = false;
    const bool container = s[i] == '{' || s[i] == '[';
    for (size_t k = i; k < s.size(); ++k) {
        const char c = s[k];
        if (str) {
            if (esc) esc = false;
            else if (c == '\\') esc = true;
            else if (c == '"') {
                str = false;
                if (!container && depth == 0) return k + 1;
            }
            continue;
        }
        if (c == '"') { str = true; continue; }
        if (!container) {  // a scalar ends at a delimiter
            if (c == ',' || c == '}' || c == ']' || isspace(static_cast<unsigned char>(c))) return k;
            continue;
        }
        if (c == '{' || c == '[') ++depth;
        else if (c == '}' || c == ']') {
            if (--depth == 0) return k + 1;
        }
    }
    return std::string_view::npos;
}

// Finds the value of a top-level key of the (possibly incomplete) object text: returns its start offset, or npos.
size_t key_value_start(std::string_view s, std::string_view key) {
    size_t i = 0;
    while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i >= s.size() || s[i] != '{') return std::string_view::npos;
    ++i;
    while (true) {
        while (i < s.size() && (isspace(static_cast<unsigned char>(s[i])) || s[i] == ',')) ++i;
        if (i >= s.size() || s[i] != '"') return std::string_view::npos;
        const size_t kend = value_end(s, i);
        if (kend == std::string_view::npos) return std::string_view::npos;
        const std::string_view k = s.substr(i + 1, kend - i - 2);
        i = kend;
        while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i >= s.size() || s[i] != ':') return std::string_view::npos;
        ++i;
        while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (k == key) return i < s.size() ? i : std::string_view::npos;
        const size_t vend = value_end(s, i);
        if (vend == std::string_view::npos) return std::string_view::npos;
        i = vend;
    }
}

}  // namespace

ToolCallParser::ToolCallParser(ToolFormat f, std::string id_prefix) : fmt_(f), id_prefix_(std::move(id_prefix)) {}

std::vector<ToolEvent> ToolCallParser::push(std::string_view text) {
    buf_ += text;
    std::vector<ToolEvent> out;
    scan(out, false);
    return out;
}

std::vector<ToolEvent> ToolCallParser::finish() {
    std::vector<ToolEvent> out;
    scan(out, true);
    if (in_call_) {  // an unterminated call: report it, and its text as content
        out.push_back({ToolEvent::ERROR, n_calls_, "", "", "unterminated tool call"});
        const std::string raw = (fmt_ == ToolFormat::QWEN ? std::string(kOpen) : std::string()) + call_text_ + buf_;
        out.push_back({ToolEvent::CONTENT, 0, "", "", raw});
        in_call_ = false;
        buf_.clear();
    }
    return out;
}

void ToolCallParser::end_call(std::vector<ToolEvent>& out, std::string_view json_text) {
    const ojson j = ojson::parse(json_text, nullptr, false);
    const char* args_key = fmt_ == ToolFormat::LLAMA3 && j.is_object() && j.contains("parameters") ? "parameters" : "arguments";
    const bool ok = j.is_object() && j.contains("name") && j["name"].is_string() && j.contains(args_key) &&
                    (j[args_key].is_object() || j[args_key].is_string());
    if (!ok) {
        out.push_back({ToolEvent::ERROR, n_calls_, "", "", "malformed tool call: " + std::string(json_text.substr(0, 200))});
        const std::string raw = fmt_ == ToolFormat::QWEN ? std::string(kOpen) + std::string(json_text) + std::string(kClose)
                                                          : std::string(json_text);
        out.push_back({ToolEvent::CONTENT, 0, "", "", raw});
        return;
    }
    const std::string id = id_prefix_ + std::to_string(n_calls_);
    std::string args;
    const size_t vs = key_value_start(json_text, args_key);
    const size_t ve = vs == std::string_view::npos ? vs : value_end(json_text, vs);
    if (j[args_key].is_string()) args = j[args_key].get<std::string>();  // arguments given as a JSON string
    else if (ve != std::string_view::npos) args = std::string(json_text.substr(vs, ve - vs));
    else args = j[args_key].dump();
    if (!name_sent_) {
        out.push_back({ToolEvent::CALL_BEGIN, n_calls_, id, j["name"].get<std::string>(), ""});
        out.push_back({ToolEvent::ARGUMENTS, n_calls_, "", "", args});
    } else if (j[args_key].is_string()) {
        // streamed raw text was the quoted string: nothing more to send
    } else if (args_sent_ < args.size()) {
        out.push_back({ToolEvent::ARGUMENTS, n_calls_, "", "", args.substr(args_sent_)});
    }
    out.push_back({ToolEvent::CALL_END, n_calls_, id, j["name"].get<std::string>(), args});
    ++n_calls_;
}

// Streams the name and the arguments of the call being written (call_text_); true when the call's JSON ended
// (LLAMA3: its closing brace).
bool ToolCallParser::scan_call(std::vector<ToolEvent>& out, bool at_end) {
    if (!name_sent_) {
        // The name must be the first key for streaming; otherwise everything is sent at the end.
        const size_t ns = key_value_start(call_text_, "name");
        const size_t as = key_value_start(call_text_, fmt_ == ToolFormat::LLAMA3 ? "parameters" : "arguments");
        const size_t as2 = fmt_ == ToolFormat::LLAMA3 ? key_value_start(call_text_, "arguments") : std::string::npos;
        const size_t a = std::min(as, as2);
        if (ns != std::string::npos && (a == std::string::npos || ns < a)) {
            const size_t ne = value_end(call_text_, ns);
            if (ne != std::string::npos && call_text_[ns] == '"') {
                const ojson name = ojson::parse(call_text_.substr(ns, ne - ns), nullptr, false);
                if (name.is_string()) {
                    out.push_back({ToolEvent::CALL_BEGIN, n_calls_, id_prefix_ + std::to_string(n_calls_),
                                   name.get<std::string>(), ""});
                    name_sent_ = true;
                }
            }
        }
    }
    if (name_sent_) {
        if (args_from_ == std::string::npos) {
            size_t a = key_value_start(call_text_, fmt_ == ToolFormat::LLAMA3 ? "parameters" : "arguments");
            if (a == std::string::npos && fmt_ == ToolFormat::LLAMA3) a = key_value_start(call_text_, "arguments");
            if (a != std::string::npos && call_text_[a] != '"') args_from_ = a;
        }
        if (args_from_ != std::string::npos) {
            const size_t ve = value_end(call_text_, args_from_);
            const size_t upto = ve == std::string::npos ? call_text_.size() : ve;
            if (upto > args_from_ + args_sent_) {
                out.push_back({ToolEvent::ARGUMENTS, n_calls_, "", "", call_text_.substr(args_from_ + args_sent_, upto - args_from_ - args_sent_)});
                args_sent_ = upto - args_from_;
            }
        }
    }
    if (fmt_ == ToolFormat::LLAMA3) return value_end(call_text_, 0) != std::string::npos;
    (void)at_end;
    return false;
}

void ToolCallParser::scan(std::vector<ToolEvent>& out, bool at_end) {
    while (!buf_.empty()) {
        if (fmt_ == ToolFormat::QWEN) {
            if (!in_call_) {
                const size_t p = buf_.find(kOpen);
                if (p == std::string::npos) {
                    const size_t keep = at_end ? 0 : partial_suffix(buf_, kOpen);
                    if (buf_.size() > keep) out.push_back({ToolEvent::CONTENT, 0, "", "", buf_.substr(0, buf_.size() - keep)});
                    buf_.erase(0, buf_.size() - keep);
                    return;
                }
                if (p > 0) out.push_back({ToolEvent::CONTENT, 0, "", "", buf_.substr(0, p)});
                buf_.erase(0, p + kOpen.size());
                in_call_ = true;
                call_text_.clear();
                args_from_ = std::string::npos;
                args_sent_ = 0;
                name_sent_ = false;
                continue;
            }
            const size_t p = buf_.find(kClose);
            if (p == std::string::npos) {
                const size_t keep = at_end ? 0 : partial_suffix(buf_, kClose);
                call_text_ += buf_.substr(0, buf_.size() - keep);
                buf_.erase(0, buf_.size() - keep);
                scan_call(out, at_end);
                return;
            }
            call_text_ += buf_.substr(0, p);
            buf_.erase(0, p + kClose.size());
            scan_call(out, true);
            end_call(out, call_text_);
            in_call_ = false;
            continue;
        }
        // LLAMA3: a call is a message (or ';'-separated part) that starts with '{'.
        if (!in_call_) {
            size_t i = 0;
            while (i < buf_.size() && isspace(static_cast<unsigned char>(buf_[i]))) ++i;
            if (!started_) {
                if (buf_.compare(i, kPythonTag.size(), kPythonTag) == 0) {
                    buf_.erase(0, i + kPythonTag.size());
                    continue;
                }
                if (i == buf_.size() || (!at_end && std::string_view(kPythonTag).substr(0, buf_.size() - i) == std::string_view(buf_).substr(i))) {
                    if (at_end) buf_.clear();
                    return;  // undecided
                }
                started_ = true;
                if (buf_[i] != '{') { n_calls_ = -1; }  // plain content message
            }
            if (n_calls_ < 0) {
                out.push_back({ToolEvent::CONTENT, 0, "", "", buf_});
                buf_.clear();
                return;
            }
            if (i == buf_.size()) { if (at_end) buf_.clear(); return; }
            if (buf_[i] == ';') { buf_.erase(0, i + 1); continue; }
            if (buf_[i] != '{') {  // text after the calls: content
                out.push_back({ToolEvent::CONTENT, 0, "", "", buf_.substr(i)});
                buf_.clear();
                return;
            }
            buf_.erase(0, i);
            in_call_ = true;
            call_text_.clear();
            args_from_ = std::string::npos;
            args_sent_ = 0;
            name_sent_ = false;
        }
        const size_t end = value_end(call_text_ + buf_, 0);
        if (end == std::string::npos) {
            call_text_ += buf_;
            buf_.clear();
            scan_call(out, at_end);
            return;
        }
        const size_t used = end - call_text_.size();
        call_text_ += buf_.substr(0, used);
        buf_.erase(0, used);
        scan_call(out, true);
        end_call(out, call_text_);
        in_call_ = false;
    }
}

ParsedMessage parse_tool_calls(std::string_view text, ToolFormat f) {
    ToolCallParser p(f);
    std::vector<ToolEvent> ev = p.push(text);
    for (auto& e : p.finish()) ev.push_back(std::move(e));
    ParsedMessage m;
    for (const ToolEvent& e : ev) {
        if (e.kind == ToolEvent::CONTENT) m.content += e.text;
        else if (e.kind == ToolEvent::ERROR) m.errors.push_back(e.text);
        else if (e.kind == ToolEvent::CALL_END)
            m.calls.push_back({{"id", e.id}, {"type", "function"}, {"function", {{"name", e.name}, {"arguments", e.text}}}});
    }
    return m;
}

Expected<ToolChoice> parse_tool_choice(const ojson& v) {
    ToolChoice c;
    if (v.is_null()) return c;
    if (v.is_string()) {
        const std::string s = v.get<std::string>();
        if (s == "auto") c.kind = ToolChoice::AUTO;
        else if (s == "none") c.kind = ToolChoice::NONE;
        else if (s == "required") c.kind = ToolChoice::REQUIRED;
        else return errorf("tool_choice '%s' is not one of auto, none, required", s.c_str());
        return c;
    }
    // Compared, never converted: any JSON value gives a choice or an error (value("type", "") would throw on a
    // non-string type).
    EMBER_REQUIRE(v.is_object() && v.contains("type") && v.at("type") == "function" && v.contains("function") &&
                      v.at("function").is_object() && v.at("function").contains("name") &&
                      v.at("function").at("name").is_string(),
                  "tool_choice must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    c.kind = ToolChoice::NAMED;
    c.name = v.at("function").at("name").get<std::string>();
    return c;
}

}  // namespace ember::grammar
