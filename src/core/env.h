// core/env.h: the EMBER_* environment switches (A/B and debugging knobs; docs in README / the files that read
// them). Read once by the caller (a function-local static), never per call.
#pragma once
#include <cstdlib>
#include <cstring>

namespace ember {

// The variable's value, or nullptr when it is unset.
inline const char* env_str(const char* name) { return std::getenv(name); }
// Set to exactly `value`.
inline bool env_is(const char* name, const char* value) {
    const char* e = std::getenv(name);
    return e && std::strcmp(e, value) == 0;
}
// A default-on switch turned off (the value starts with '0') / a default-off switch turned on (starts with '1').
inline bool env_off(const char* name) {
    const char* e = std::getenv(name);
    return e && e[0] == '0';
}
inline bool env_on(const char* name) {
    const char* e = std::getenv(name);
    return e && e[0] == '1';
}
// The integer value (atoi), or `fallback` when unset.
inline int env_int(const char* name, int fallback = 0) {
    const char* e = std::getenv(name);
    return e ? std::atoi(e) : fallback;
}

}  // namespace ember
