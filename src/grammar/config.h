// A parser configuration of the matcher (runtime.h): the stack tops that can read a byte, and completion.
#pragma once
#include <cstdint>
#include <vector>

namespace ember::grammar {

struct Config {
    std::vector<int32_t> heads;  // sorted node ids whose state has byte edges
    bool complete = false;       // the root frame can pop here (end of input allowed)
    bool alive() const { return complete || !heads.empty(); }
};

}  // namespace ember::grammar
