// Binding weights to the mapped file: lookups with shape checks that name the tensor, and the
// linear layer (matmul + optional bias + LoRA) every block uses.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "spite/models/model.hpp"

namespace spite::models {

struct linear {
  dispatch::weight w;
  // The file's bytes of W, which name the tensor (LoRA adapters are keyed by them): the kernels
  // may read a copy (dispatch::pack_for_cpu).
  const std::byte* tensor = nullptr;
  std::vector<float> bias;  // [out] or empty

  bool empty() const noexcept { return w.empty(); }
  // y [out, n] = W x + b + sum of scale * B (A x); x [in, n]
  void apply(forward_context& ctx, const float* x, std::int64_t n, float* y) const;
  // y += b + sum of scale * B (A x): what apply adds to W x.
  void add_extras(forward_context& ctx, const float* x, std::int64_t n, float* y) const;
};

// ys[i] = parts[i] applied to the same x (a layer's q, k, v; its gate and up): the weights go
// to the kernels together (op_table::matmul_parts), which run those placed together
// (binder::place_together) as one matrix.
struct linear_output {
  const linear* l;
  float* y;
};
void apply_parts(forward_context& ctx, std::initializer_list<linear_output> parts, const float* x, std::int64_t n);

// Looks tensors up by name and checks their shapes; the first problem is kept and reported.
class binder {
 public:
  // The matrices bound through it are packed into one region (dispatch::packing_together) for
  // as long as it lives.
  binder(const gguf::file& f, std::string arch)
      : file_(f), arch_(std::move(arch)), together_(matrix_bytes_bound(f)) {}

  // nullptr if absent and optional; shapes are ggml order; -1 matches any size.
  const gguf::tensor_info* tensor(const std::string& name, std::initializer_list<std::int64_t> shape, bool optional = false);
  // A matrix {in, out} plus "<name>.bias" {out} when present.
  linear matrix(const std::string& name, std::int64_t in, std::int64_t out, bool optional = false);
  // Expert e of a 3-D {in, out, X} stack as a matrix of its own, repacked for the CPU kernels as
  // matrix() repacks (`tensor` names the expert's bytes in the file).
  linear expert(const gguf::tensor_info& stack, std::int64_t e);
  // The output head {in, out}: "output" when the file has it, else the token embedding table
  // (tied), repacked for the CPU kernels as matrix() repacks; the table's file rows stay where
  // they are for the lookups.
  linear output_head(const gguf::tensor_info* token_embd, std::int64_t in, std::int64_t out);
  // A vector of n floats (norm weights, biases, factors), widened to F32.
  std::vector<float> vec(const std::string& name, std::int64_t n, bool optional = false);
  // Any tensor of that shape, widened to F32 (2-D biases).
  std::vector<float> values(const std::string& name, std::initializer_list<std::int64_t> shape, bool optional = false);

  // dispatch::place_packed_together for matrices that take the same activations.
  void place_together(std::initializer_list<linear*> parts);
  // Keep alive while binding those matrices (before place_together): they are packed one right
  // after the other from the start, not copied together after (dispatch::packing_together).
  // `names` without ".weight"; absent ones count nothing.
  dispatch::packing_together pack_together(std::initializer_list<std::string> names) const;

  result<void> status() const;
  // Bytes of weights repacked for the CPU kernels so far (dispatch::pack_for_cpu).
  std::size_t packed_bytes() const noexcept { return packed_bytes_; }

 private:
  void fail(std::string message);
  static std::size_t matrix_bytes_bound(const gguf::file& f);
  const gguf::file& file_;
  std::string arch_;
  dispatch::packing_together together_;
  std::optional<error> error_;
  std::size_t packed_bytes_ = 0;
};

// "blk.<layer>.<name>"
inline std::string layer_tensor(int layer, const char* name) {
  return "blk." + std::to_string(layer) + "." + name;
}

}  // namespace spite::models
