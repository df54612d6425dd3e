// Values as they appear in error messages: "1.5", "nan", "-inf" (std::to_string prints 1.500000).
#pragma once

#include <sstream>
#include <string>

namespace spite::scheduler::detail {

template <class T>
std::string show(T value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

}  // namespace spite::scheduler::detail
