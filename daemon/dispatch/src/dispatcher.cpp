#include "cpu_kernels.hpp"
#include "spite/dispatch/ops.hpp"

namespace spite::dispatch {

weight weight_of(const gguf::tensor_info& t, std::int64_t expert) {
  weight w;
  w.type = t.type;
  w.in = t.ne[0];
  w.out = t.ne[1];
  w.row_bytes = *gguf::row_bytes(t.type, t.ne[0]);
  w.data = t.data + static_cast<std::size_t>(expert) * w.row_bytes * static_cast<std::size_t>(w.out);
  return w;
}

const op_table& cpu_reference_ops() {
  static const op_table table{cpu::matmul, cpu::rms_norm, cpu::attention, cpu::rope, cpu::swiglu};
  return table;
}

}  // namespace spite::dispatch
