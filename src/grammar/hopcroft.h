// Hopcroft's DFA minimisation (O(m·n·log n)) over a transition table with an arbitrary symbol alphabet.
#pragma once
#include <cstdint>
#include <vector>

namespace ember::grammar {

// delta[s * m + a]: target of state s on symbol a, −1 = reject. label[s]: states with different labels are never
// merged (acceptance, ...). Returns the class of each state (0..k−1; equal class = equivalent states).
std::vector<int32_t> hopcroft_classes(int32_t n, int32_t m, const std::vector<int32_t>& delta,
                                      const std::vector<int32_t>& label);

}  // namespace ember::grammar
