// CLI helpers implementation.
#include "common.h"

#include <cstdlib>

namespace ember::cli {

int fail(const char* cmd, const std::string& msg) {
    std::fprintf(stderr, "ember %s: %s\n", cmd, msg.c_str());
    return 1;
}

Expected<std::unique_ptr<CausalLM>> open_model(const std::string& path, const std::string& synthetic) {
    if (!path.empty() && !synthetic.empty()) return errorf("give either -m MODEL or --synthetic NAME, not both");
    if (!synthetic.empty()) return make_synthetic_model(synthetic);
    if (path.empty()) return errorf("no model: give -m MODEL (a directory with config.json) or --synthetic NAME");
    return load_model(path);
}

Expected<std::vector<int32_t>> parse_token_list(const std::string& s) {
    std::vector<int32_t> out;
    size_t i = 0;
    while (i < s.size()) {
        size_t j = s.find(',', i);
        if (j == std::string::npos) j = s.size();
        std::string tok = s.substr(i, j - i);
        char* end = nullptr;
        long v = std::strtol(tok.c_str(), &end, 10);
        if (tok.empty() || !end || *end || v < 0 || v > 0x7fffffff)
            return errorf("bad token id '%s' in --tokens (expected comma-separated non-negative integers)", tok.c_str());
        out.push_back(static_cast<int32_t>(v));
        i = j + 1;
    }
    if (out.empty()) return errorf("--tokens is empty");
    return out;
}

std::string human_bytes(double b) {
    const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int k = 0;
    while (b >= 1024 && k < 4) { b /= 1024; ++k; }
    return strfmt("%.2f %s", b, u[k]);
}

}  // namespace ember::cli
