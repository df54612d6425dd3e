#include "spite/core/result.hpp"

namespace spite {

const char* errc_name(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument: return "invalid argument";
    case errc::io: return "i/o error";
    case errc::malformed: return "malformed input";
    case errc::unsupported: return "unsupported";
    case errc::not_found: return "not found";
    case errc::out_of_range: return "out of range";
    case errc::busy: return "busy";
    case errc::internal: return "internal error";
    case errc::unavailable: return "unavailable";
  }
  return "unknown error";
}

}  // namespace spite
