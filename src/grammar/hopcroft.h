// DFA minimisation over a transition table with an arbitrary symbol alphabet and missing transitions
// (Valmari & Lehtinen's partial-function form of Hopcroft's algorithm: O(T log n) in the T transitions present).
#pragma once
#include <cstdint>
#include <vector>

namespace ember::grammar {

// delta[s * m + a]: target of state s on symbol a, −1 = none. label[s]: states with different labels are never
// merged (acceptance, ...). Returns the class of each state (0..k−1 by first occurrence; equal class =
// equivalent states: same label, and for every symbol both lack a transition or both go to equivalent states).
// *work (optional) accumulates the elements the refinement visited (tests pin the complexity with it).
std::vector<int32_t> hopcroft_classes(int32_t n, int32_t m, const std::vector<int32_t>& delta,
                                      const std::vector<int32_t>& label, int64_t* work = nullptr);

}  // namespace ember::grammar
