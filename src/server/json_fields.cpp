// json_fields.cpp: strict JSON field reading for the request parsers.
#include "server/json_fields.h"

#include <cmath>

namespace ember::server {

const char* json_type_name(const ojson& v) {
    switch (v.type()) {
        case ojson::value_t::null: return "null";
        case ojson::value_t::object: return "an object";
        case ojson::value_t::array: return "an array";
        case ojson::value_t::string: return "a string";
        case ojson::value_t::boolean: return "a boolean";
        case ojson::value_t::number_integer:
        case ojson::value_t::number_unsigned: return "an integer";
        case ojson::value_t::number_float: return "a number";
        default: return "an unsupported value";
    }
}

bool Fields::fail(std::string message, const std::string& key, std::string code) {
    if (!error_) error_ = bad_request(std::move(message), name(key), std::move(code));
    return false;
}

const ojson* Fields::get(const char* key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
}

bool Fields::number(const char* key, double lo, double hi, float& out) {
    const ojson* v = get(key);
    if (!v) return true;
    if (!v->is_number()) return fail(strfmt("'%s' must be a number, not %s", name(key).c_str(), json_type_name(*v)), key);
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi))
        return fail(strfmt("'%s' must be in [%g, %g], got %g", name(key).c_str(), lo, hi, d), key);
    out = static_cast<float>(d);
    return true;
}

bool Fields::integer(const char* key, int64_t lo, int64_t hi, std::optional<int64_t>& out) {
    const ojson* v = get(key);
    if (!v) return true;
    double d = 0;
    if (v->is_number_integer()) {
        if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
            return fail(strfmt("'%s' is too large", name(key).c_str()), key);
        const int64_t i = v->get<int64_t>();
        if (i < lo || i > hi)
            return fail(strfmt("'%s' must be in [%lld, %lld], got %lld", name(key).c_str(), (long long)lo,
                               (long long)hi, (long long)i), key);
        out = i;
        return true;
    }
    if (v->is_number_float()) d = v->get<double>();
    if (!v->is_number_float() || d != std::floor(d))
        return fail(strfmt("'%s' must be an integer, not %s", name(key).c_str(), json_type_name(*v)), key);
    if (!(d >= double(lo) && d <= double(hi)))
        return fail(strfmt("'%s' must be in [%lld, %lld], got %g", name(key).c_str(), (long long)lo, (long long)hi, d),
                    key);
    out = static_cast<int64_t>(d);
    return true;
}

bool Fields::boolean(const char* key, bool& out) {
    const ojson* v = get(key);
    if (!v) return true;
    if (!v->is_boolean()) return fail(strfmt("'%s' must be a boolean, not %s", name(key).c_str(), json_type_name(*v)), key);
    out = v->get<bool>();
    return true;
}

bool Fields::string(const char* key, size_t max_bytes, std::string& out) {
    const ojson* v = get(key);
    if (!v) return true;
    if (!v->is_string()) return fail(strfmt("'%s' must be a string, not %s", name(key).c_str(), json_type_name(*v)), key);
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > max_bytes)
        return fail(strfmt("'%s' is longer than %zu bytes", name(key).c_str(), max_bytes), key);
    out = s;
    return true;
}

bool Fields::refuse(const char* key, const char* why, const ojson& ok) {
    const ojson* v = get(key);
    if (!v || (!ok.is_null() && *v == ok)) return true;
    return fail(strfmt("'%s' is not supported: %s", name(key).c_str(), why), key, "unsupported_parameter");
}

bool Fields::no_unknown(const char* what) {
    if (failed()) return false;
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
        if (!seen_.count(it.key()))
            return fail(strfmt("unknown %s '%s'", what, name(it.key()).c_str()), it.key(), "unknown_parameter");
    return true;
}

}  // namespace ember::server
