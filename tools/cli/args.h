// Tiny command-line parser for the ember subcommands: "--name value", "-n value", "--flag".
#pragma once
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

namespace ember::cli {

class Args {
public:
    Args(int argc, char** argv) : argv_(argv + 1, argv + argc), used_(argv_.size(), false) {}

    // True if any of the names is present (as a flag without value).
    bool flag(std::initializer_list<const char*> names) {
        for (size_t i = 0; i < argv_.size(); ++i)
            for (const char* n : names)
                if (argv_[i] == n) { used_[i] = true; return true; }
        return false;
    }
    // Value following any of the names; `def` if absent. Sets error() if the value is missing.
    std::string str(std::initializer_list<const char*> names, const std::string& def = "") {
        for (size_t i = 0; i < argv_.size(); ++i)
            for (const char* n : names)
                if (argv_[i] == n) {
                    used_[i] = true;
                    if (i + 1 >= argv_.size()) { err_ = std::string("missing value after ") + n; return def; }
                    used_[i + 1] = true;
                    return argv_[i + 1];
                }
        return def;
    }
    bool has(std::initializer_list<const char*> names) const {
        for (const auto& a : argv_)
            for (const char* n : names)
                if (a == n) return true;
        return false;
    }
    long integer(std::initializer_list<const char*> names, long def) {
        std::string s = str(names);
        if (s.empty()) return def;
        char* end = nullptr;
        long v = std::strtol(s.c_str(), &end, 10);
        if (!end || *end) err_ = "not an integer: '" + s + "'";
        return v;
    }
    double real(std::initializer_list<const char*> names, double def) {
        std::string s = str(names);
        if (s.empty()) return def;
        char* end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (!end || *end) err_ = "not a number: '" + s + "'";
        return v;
    }
    // Call after reading every option: reports the first unknown argument or value error.
    std::string error() const {
        if (!err_.empty()) return err_;
        for (size_t i = 0; i < argv_.size(); ++i)
            if (!used_[i]) return "unknown argument '" + argv_[i] + "'";
        return "";
    }

private:
    std::vector<std::string> argv_;
    std::vector<bool> used_;
    std::string err_;
};

}  // namespace ember::cli
