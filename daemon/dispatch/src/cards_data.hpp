// The text of data/cards.tsv, compiled in by daemon/dispatch/CMakeLists.txt (cards_data.cpp in
// the build tree).
#pragma once

#include <string_view>

namespace spite::dispatch::detail {

std::string_view cards_tsv() noexcept;

}  // namespace spite::dispatch::detail
