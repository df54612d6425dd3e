// Byte counts for people: 1185376 -> "1.13 MiB".
#pragma once

#include <cstdint>
#include <string>

namespace spite {

std::string human_bytes(std::uint64_t n);

}  // namespace spite
