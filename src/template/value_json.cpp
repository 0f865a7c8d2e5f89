// value_json.cpp: JSON → Value, and Python json.dumps of a Value.
#include "template/value_json.h"

#include <algorithm>
#include <cmath>

#include "template/py_text.h"

namespace ember::jinja {

namespace {

template <class Json>
Expected<Value> from_json(const Json& j, int depth) {
    if (depth > kMaxNesting) return errorf("JSON input nested deeper than %d levels", kMaxNesting);
    switch (j.type()) {
        case Json::value_t::null: return Value::none();
        case Json::value_t::boolean: return Value::boolean(j.template get<bool>());
        case Json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
        case Json::value_t::number_unsigned: {
            uint64_t u = j.template get<uint64_t>();
            if (u > static_cast<uint64_t>(INT64_MAX)) return Value::real(static_cast<double>(u));
            return Value::integer(static_cast<int64_t>(u));
        }
        case Json::value_t::number_float: return Value::real(j.template get<double>());
        case Json::value_t::string: return Value::string(j.template get<std::string>());
        case Json::value_t::array: {
            ValueList items;
            items.reserve(j.size());
            for (const auto& e : j) {
                EMBER_ASSIGN(Value v, from_json(e, depth + 1));
                items.push_back(std::move(v));
            }
            return Value::list(std::move(items));
        }
        case Json::value_t::object: {
            Dict d;
            for (auto it = j.begin(); it != j.end(); ++it) {
                EMBER_ASSIGN(Value v, from_json(it.value(), depth + 1));
                d.set(Value::string(it.key()), std::move(v));
            }
            return Value::dict(std::move(d));
        }
        default: return errorf("unsupported JSON value (binary) in template context");
    }
}

std::string float_json(double f) {
    if (std::isnan(f)) return "NaN";
    if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
    return py_float_repr(f);
}

Expected<std::string> key_json(const Value& k, bool ensure_ascii) {
    switch (k.kind()) {
        case Kind::STRING: return json_quote(k.as_string(), ensure_ascii);
        case Kind::BOOL: return std::string(k.as_bool() ? "\"true\"" : "\"false\"");
        case Kind::INT: return cat({"\"", std::to_string(k.as_int()), "\""});
        case Kind::FLOAT: return cat({"\"", float_json(k.as_float()), "\""});
        case Kind::NONE: return std::string("\"null\"");
        default: return errorf("keys must be str, int, float, bool or None, not %s", k.type_name());
    }
}

class Dumper {
public:
    explicit Dumper(const JsonDumpOptions& o) : o_(o) {
        item_sep_ = o.item_sep ? *o.item_sep : (o.indent ? "," : ", ");
    }

    Status dump(const Value& v, int level) {
        if (level > kMaxNesting + 8) return errorf("tojson: value nested too deeply (circular?)");
        switch (v.kind()) {
            case Kind::NONE: out += "null"; return Status::ok();
            case Kind::BOOL: out += v.as_bool() ? "true" : "false"; return Status::ok();
            case Kind::INT: out += std::to_string(v.as_int()); return Status::ok();
            case Kind::FLOAT: out += float_json(v.as_float()); return Status::ok();
            case Kind::STRING: out += json_quote(v.as_string(), o_.ensure_ascii); return Status::ok();
            case Kind::LIST: case Kind::TUPLE: {
                const ValueList& items = v.as_list();
                if (items.empty()) { out += "[]"; return Status::ok(); }
                out += '[';
                for (size_t i = 0; i < items.size(); ++i) {
                    if (i) out += item_sep_;
                    newline(level + 1);
                    EMBER_TRY(dump(items[i], level + 1));
                }
                newline(level);
                out += ']';
                return Status::ok();
            }
            case Kind::DICT: {
                const Dict& d = v.as_dict();
                if (d.empty()) { out += "{}"; return Status::ok(); }
                std::vector<const std::pair<Value, Value>*> items;
                for (const auto& kv : d.items()) items.push_back(&kv);
                if (o_.sort_keys) EMBER_TRY(sort(items));
                out += '{';
                for (size_t i = 0; i < items.size(); ++i) {
                    if (i) out += item_sep_;
                    newline(level + 1);
                    EMBER_ASSIGN(std::string k, key_json(items[i]->first, o_.ensure_ascii));
                    out += k + o_.key_sep;
                    EMBER_TRY(dump(items[i]->second, level + 1));
                }
                newline(level);
                out += '}';
                return Status::ok();
            }
            default: return errorf("Object of type %s is not JSON serializable", v.type_name());
        }
    }

    std::string out;

private:
    void newline(int level) {
        if (!o_.indent) return;
        out += '\n';
        for (int i = 0; i < level; ++i) out += *o_.indent;
    }

    static Status sort(std::vector<const std::pair<Value, Value>*>& items) {
        bool all_str = true, all_num = true;
        for (const auto* kv : items) {
            all_str = all_str && kv->first.is_string();
            all_num = all_num && kv->first.is_number();
        }
        if (all_str) {
            std::stable_sort(items.begin(), items.end(),
                             [](auto* a, auto* b) { return a->first.as_string() < b->first.as_string(); });
        } else if (all_num) {
            std::stable_sort(items.begin(), items.end(),
                             [](auto* a, auto* b) { return a->first.as_float() < b->first.as_float(); });
        } else {
            return errorf("tojson(sort_keys=True): keys of different types cannot be ordered");
        }
        return Status::ok();
    }

    const JsonDumpOptions& o_;
    std::string item_sep_;
};

}  // namespace

template <class Json>
Expected<Value> value_from_json(const Json& j) {
    return from_json(j, 0);
}
template Expected<Value> value_from_json<nlohmann::json>(const nlohmann::json&);
template Expected<Value> value_from_json<nlohmann::ordered_json>(const nlohmann::ordered_json&);

Expected<std::string> json_dumps(const Value& v, const JsonDumpOptions& opt) {
    Dumper d(opt);
    EMBER_TRY(d.dump(v, 0));
    return std::move(d.out);
}

Expected<nlohmann::ordered_json> value_to_json(const Value& v) {
    JsonDumpOptions o;
    EMBER_ASSIGN(std::string text, json_dumps(v, o));
    auto j = nlohmann::ordered_json::parse(text, nullptr, false, false);
    if (j.is_discarded()) return errorf("value has no JSON form (NaN or Infinity)");
    return j;
}

}  // namespace ember::jinja
