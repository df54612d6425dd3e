// libFuzzer target for the GGUF reader: parse arbitrary bytes, then touch everything a loader
// would (metadata values, tensor data, dequantization) so that any out-of-bounds read shows up.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "spite/gguf/file.hpp"
#include "spite/gguf/summary.hpp"

namespace {

std::size_t touch_array(const spite::gguf::array_value& a) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (const auto* inner = a.array_at(i)) n += touch_array(*inner);
    n += a.string_at(i).size();
    n += a.int_at(i).has_value();
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto f = spite::gguf::file::parse({reinterpret_cast<const std::byte*>(data), size}, "fuzz.gguf");
  if (!f.ok()) return 0;
  volatile std::size_t sink = 0;
  for (const auto& e : f->meta().entries()) {
    if (const auto* a = e.val.as_array()) sink = sink + touch_array(*a);
    if (const auto s = e.val.as_string()) sink = sink + s->size();
  }
  sink = sink + spite::gguf::summarize(*f).n_params;
  std::vector<float> out;
  for (const auto& t : f->tensors()) {
    if (t.n_elements() > (1 << 16)) continue;  // keep each run fast
    out.resize(static_cast<std::size_t>(t.n_elements()));
    (void)spite::gguf::dequantize(t.type, t.data, out.data(), t.n_elements());
    for (float v : out) sink = sink + (v != 0.0f);
  }
  return 0;
}
