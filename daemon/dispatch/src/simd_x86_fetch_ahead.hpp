// How the decode kernels' fetch distances are chosen (simd_x86_fetch_ahead.cpp): the table of a
// processor and the changes SPITE_CPU_FETCH makes to it. Internal to spite::dispatch; x86-64 only.
#pragma once

#if defined(__x86_64__)
#include <string>
#include <string_view>
#include <vector>

#include "simd_x86.hpp"

namespace spite::dispatch::cpu::x86 {

struct decode_fetch_choice {
  decode_fetch_distances distances;
  // "default", "zen4"; "+SPITE_CPU_FETCH" after it where items changed it
  std::string profile;
  std::vector<std::string> ignored;  // the items that could not be read
};

// The table measured for a core ("zen4"); the defaults for any other name.
decode_fetch_distances profile_distances(std::string_view profile);
// A profile name and/or KERNEL=VALUE items (0..64: blocks ahead; threads for q4_k_pairs and q6_k_pairs),
// comma-separated, applied in order to `start`: "zen4", "q4_0=0,q8_0=1", "default,q6_k=3".
decode_fetch_choice apply_fetch_spec(decode_fetch_choice start, std::string_view spec);

}  // namespace spite::dispatch::cpu::x86

#endif
