// Views of weight tensors as the kernels see them: typed bytes in the file's block format.
#pragma once

#include <cstddef>
#include <cstdint>

#include "spite/gguf/file.hpp"

namespace spite::dispatch {

// A 2-D weight {in, out} (ggml order: `in` contiguous), or one matrix of a 3-D expert stack.
struct weight {
  const std::byte* data = nullptr;
  gguf::tensor_type type = gguf::tensor_type::f32;
  std::int64_t in = 0;        // ne0: elements per row
  std::int64_t out = 0;       // ne1: rows
  std::size_t row_bytes = 0;  // bytes per row
  // The reference multiplies this matrix through its vector dot product, never its GEMM (whose
  // reduction order differs for float weights): expert matrices (set by weight_of for 3-D
  // tensors) and matrices it applies to strided activations.
  bool no_gemm = false;

  bool empty() const noexcept { return data == nullptr; }
  const std::byte* row(std::int64_t r) const noexcept { return data + static_cast<std::size_t>(r) * row_bytes; }
};

// The matrix of a tensor, or expert `e` of a {in, out, n_expert} tensor.
weight weight_of(const gguf::tensor_info& t, std::int64_t expert = 0);

}  // namespace spite::dispatch
