// CLI helpers implementation.
#include "common.h"

#include <cstdlib>

#ifdef EMBER_HAVE_CUDA
#include "backend/cuda/device.h"
#include "backend/cuda/qwen35_cuda.h"
#endif

namespace ember::cli {

int fail(const char* cmd, const std::string& msg) {
    std::fprintf(stderr, "ember %s: %s\n", cmd, msg.c_str());
    return 1;
}

std::string resolve_device(const std::string& device) {
    if (device != "auto") return device;
#ifdef EMBER_HAVE_CUDA
    if (cuda::gpu_available()) return "cuda";
#endif
    return "cpu";
}

Expected<std::unique_ptr<CausalLM>> open_model(const std::string& path, const std::string& synthetic,
                                               const std::string& device, int64_t context) {
    if (!path.empty() && !synthetic.empty()) return errorf("give either -m MODEL or --synthetic NAME, not both");
    if (path.empty() && synthetic.empty())
        return errorf("no model: give -m MODEL (a directory with config.json) or --synthetic NAME");
    std::string dev = resolve_device(device);
    if (dev != "cpu" && dev != "cuda") return errorf("unknown device '%s' (cpu, cuda or auto)", dev.c_str());
#ifndef EMBER_HAVE_CUDA
    if (dev == "cuda") return errorf("--device cuda: this build has no CUDA backend (configure with -DEMBER_CUDA=ON)");
#endif
    EMBER_ASSIGN(auto m, synthetic.empty() ? load_model(path) : make_synthetic_model(synthetic));
#ifdef EMBER_HAVE_CUDA
    if (dev == "cuda") {
        cuda::CudaOptions opt;
        opt.context = context;
        return cuda::make_qwen35_cuda(std::move(m), opt);
    }
#endif
    return m;
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
