// Unicode property tables (generated into unicode_data.cpp by tools/gen_unicode_tables.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace spite::tokenizer::unicode {

struct flag_range {
  std::uint32_t first;  // the range runs to the next entry's first code point
  std::uint32_t flags;
};
struct cp_pair {
  std::uint32_t from, to;
};

extern const flag_range k_flag_ranges[];
extern const std::size_t k_flag_ranges_size;
extern const cp_pair k_lowercase[];
extern const std::size_t k_lowercase_size;
extern const cp_pair k_nfd_base[];
extern const std::size_t k_nfd_base_size;

}  // namespace spite::tokenizer::unicode
