// Checkpoint implementation: prefix canonicalisation, quantized/dense weight extraction with shape checks.
#include "models/checkpoint.h"

namespace ember {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Stored name → canonical name; "" for tensors we skip (vision tower).
std::string canonicalize(const std::string& n, bool* vision, bool* mtp) {
    *vision = *mtp = false;
    static const std::pair<const char*, const char*> kRewrites[] = {
        {"model.language_model.", "model."},        // HF multimodal
        {"language_model.model.", "model."},        // MLX (mlx-vlm / mlx-lm)
        {"language_model.lm_head.", "lm_head."},    // MLX untied head
        {"model.mtp.", "mtp."},
    };
    for (const char* v : {"model.visual.", "visual.", "vision_tower.", "model.vision_tower."})
        if (starts_with(n, v)) { *vision = true; return ""; }
    std::string out = n;
    for (const auto& [from, to] : kRewrites)
        if (starts_with(n, from)) { out = to + n.substr(std::char_traits<char>::length(from)); break; }
    if (starts_with(out, "mtp.")) *mtp = true;
    return out;
}

}  // namespace

Expected<std::shared_ptr<Checkpoint>> Checkpoint::open(const std::string& dir, const QuantConfig& quant) {
    auto ck = std::make_shared<Checkpoint>();
    ck->path_ = dir;
    ck->quant_ = quant;
    EMBER_ASSIGN(ck->store_, TensorStore::open(dir));
    for (const auto& [name, t] : ck->store_.all()) {
        bool vision, mtp;
        std::string c = canonicalize(name, &vision, &mtp);
        if (vision) { ck->n_vision_++; continue; }
        if (mtp) ck->n_mtp_++;
        auto [it, ok] = ck->canon_.emplace(c, name);
        if (!ok)
            return errorf("%s: tensors '%s' and '%s' both map to '%s'", dir.c_str(), it->second.c_str(), name.c_str(),
                          c.c_str());
    }
    return ck;
}

const TensorInfo* Checkpoint::find(const std::string& canonical) const {
    auto it = canon_.find(canonical);
    if (it == canon_.end()) return nullptr;
    used_[canonical] = true;
    return store_.find(it->second);
}

std::vector<std::string> Checkpoint::unused() const {
    std::vector<std::string> out;
    for (const auto& [c, stored] : canon_)
        if (!used_.count(c) && !starts_with(c, "mtp.")) out.push_back(stored);
    return out;
}

Expected<Weight> Checkpoint::linear(const std::string& base, int64_t rows, int64_t cols) const {
    const TensorInfo* w = find(base + ".weight");
    if (!w) return errorf("%s: missing tensor '%s.weight'", path_.c_str(), base.c_str());
    const TensorInfo* s = find(base + ".scales");
    const TensorInfo* b = find(base + ".biases");
    Weight out;
    out.rows = rows;
    out.cols = cols;
    out.data = w->data;
    const char* f = w->file.c_str();
    if (!s) {
        EMBER_REQUIRE(dtype_is_float(w->dtype), "%s: tensor '%s' has dtype %s; expected F32/F16/BF16 (or U32 with .scales)",
                      f, w->name.c_str(), dtype_name(w->dtype));
        EMBER_REQUIRE(w->shape == std::vector<int64_t>({rows, cols}), "%s: tensor '%s' has shape %s, expected [%lld, %lld]",
                      f, w->name.c_str(), w->shape_str().c_str(), (long long)rows, (long long)cols);
        out.format = WeightFormat::DENSE;
        out.dtype = w->dtype;
        return out;
    }
    EMBER_REQUIRE(b, "%s: tensor '%s' has .scales but no .biases (only MLX affine quantization is supported)", f,
                  w->name.c_str());
    // Module path as the config's per-module overrides spell it: the stored name without ".weight".
    std::string module = w->name.substr(0, w->name.size() - 7);
    auto [bits, gs] = quant_.for_module(module);
    EMBER_REQUIRE(quant_.present, "%s: tensor '%s' is quantized but config.json has no 'quantization' block", f,
                  w->name.c_str());
    EMBER_REQUIRE(w->dtype == DType::U32, "%s: quantized tensor '%s' has dtype %s, expected U32", f, w->name.c_str(),
                  dtype_name(w->dtype));
    EMBER_REQUIRE(dtype_is_float(s->dtype) && s->dtype == b->dtype, "%s: '%s' scales/biases must share a float dtype", f,
                  module.c_str());
    EMBER_REQUIRE(cols % gs == 0, "%s: '%s' has %lld input columns, not a multiple of group size %d", f, module.c_str(),
                  (long long)cols, gs);
    EMBER_REQUIRE((cols * bits) % 32 == 0, "%s: '%s': %lld columns × %d bits do not fill whole uint32 words", f,
                  module.c_str(), (long long)cols, bits);
    std::vector<int64_t> want_w = {rows, cols * bits / 32}, want_s = {rows, cols / gs};
    EMBER_REQUIRE(w->shape == want_w, "%s: tensor '%s' has shape %s, expected [%lld, %lld] (%lld×%lld at %d bits)", f,
                  w->name.c_str(), w->shape_str().c_str(), (long long)want_w[0], (long long)want_w[1], (long long)rows,
                  (long long)cols, bits);
    EMBER_REQUIRE(s->shape == want_s && b->shape == want_s,
                  "%s: '%s' scales %s / biases %s, expected [%lld, %lld] (group size %d)", f, module.c_str(),
                  s->shape_str().c_str(), b->shape_str().c_str(), (long long)want_s[0], (long long)want_s[1], gs);
    out.format = WeightFormat::AFFINE;
    out.bits = bits;
    out.group_size = gs;
    out.scales = s->data;
    out.biases = b->data;
    out.sb_dtype = s->dtype;
    return out;
}

Expected<std::vector<float>> Checkpoint::vec(const std::string& name, int64_t numel, float add) const {
    const TensorInfo* t = find(name);
    if (!t) return errorf("%s: missing tensor '%s'", path_.c_str(), name.c_str());
    EMBER_REQUIRE(dtype_is_float(t->dtype), "%s: tensor '%s' has dtype %s, expected a float type", t->file.c_str(),
                  t->name.c_str(), dtype_name(t->dtype));
    EMBER_REQUIRE(t->numel() == numel, "%s: tensor '%s' has shape %s (%lld elements), expected %lld elements",
                  t->file.c_str(), t->name.c_str(), t->shape_str().c_str(), (long long)t->numel(), (long long)numel);
    std::vector<float> v(static_cast<size_t>(numel));
    for (int64_t i = 0; i < numel; ++i) v[i] = load_float(t->data, t->dtype, i) + add;
    return v;
}

}  // namespace ember
