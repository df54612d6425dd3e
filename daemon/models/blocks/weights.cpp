#include "weights.hpp"

#include <cstring>
#include <iterator>
#include <span>

namespace spite::models {

void linear::apply(forward_context& ctx, const float* x, std::int64_t n, float* y) const {
  ctx.ops.matmul(w, x, n, y, ctx.pool);
  add_extras(ctx, x, n, y);
}

void apply_parts(forward_context& ctx, std::initializer_list<linear_output> parts, const float* x, std::int64_t n) {
  if (!ctx.ops.matmul_parts || parts.size() < 2) {
    for (const linear_output& p : parts) p.l->apply(ctx, x, n, p.y);
    return;
  }
  const dispatch::weight* weights[8];
  float* ys[8];
  std::size_t count = 0;
  for (const linear_output& p : parts) {
    if (count == std::size(weights)) break;
    weights[count] = &p.l->w;
    ys[count++] = p.y;
  }
  ctx.ops.matmul_parts(std::span<const dispatch::weight* const>(weights, count), x, n, ys, ctx.pool);
  std::size_t i = 0;
  for (const linear_output& p : parts) {
    if (i++ < count) {
      p.l->add_extras(ctx, x, n, p.y);
    } else {
      p.l->apply(ctx, x, n, p.y);
    }
  }
}

void linear::add_extras(forward_context& ctx, const float* x, std::int64_t n, float* y) const {
  if (!bias.empty()) {
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t o = 0; o < w.out; ++o) y[t * w.out + o] += bias[static_cast<std::size_t>(o)];
    }
  }
  const std::vector<lora_pair>* pairs = ctx.loras != nullptr ? ctx.loras->find(tensor != nullptr ? tensor : w.data) : nullptr;
  if (pairs == nullptr) return;
  for (const lora_pair& l : *pairs) {
    std::vector<float> ax(static_cast<std::size_t>(l.a.out * n)), bax(static_cast<std::size_t>(l.b.out * n));
    ctx.ops.matmul(l.a, x, n, ax.data(), ctx.pool);
    ctx.ops.matmul(l.b, ax.data(), n, bax.data(), ctx.pool);
    for (std::size_t i = 0; i < bax.size(); ++i) y[i] += bax[i] * l.scale;
  }
}

void binder::fail(std::string message) {
  if (!error_) error_ = make_error(errc::malformed, arch_ + " model: " + std::move(message));
}

void binder::place_together(std::initializer_list<linear*> parts) {
  dispatch::weight* weights[8];
  std::size_t count = 0;
  for (linear* l : parts) {
    if (count < std::size(weights) && !l->empty()) weights[count++] = &l->w;
  }
  dispatch::place_packed_together(std::span<dispatch::weight* const>(weights, count));
}

namespace {

// Bounds, not sizes: some packed layouts are a few percent larger than the file's blocks.
std::size_t packed_bound(const gguf::tensor_info& t) { return t.size + t.size / 16 + (64u << 10); }

}  // namespace

std::size_t binder::matrix_bytes_bound(const gguf::file& f) {
  std::size_t bytes = 0;
  for (const gguf::tensor_info& t : f.tensors()) {
    if (t.n_dims >= 2) bytes += packed_bound(t);
  }
  return bytes;
}

dispatch::packing_together binder::pack_together(std::initializer_list<std::string> names) const {
  std::size_t bytes = 0;
  for (const std::string& name : names) {
    if (const gguf::tensor_info* t = file_.find_tensor(name + ".weight")) bytes += packed_bound(*t);
  }
  return dispatch::packing_together(bytes);
}

result<void> binder::status() const {
  if (error_) return *error_;
  return ok();
}

const gguf::tensor_info* binder::tensor(const std::string& name, std::initializer_list<std::int64_t> shape, bool optional) {
  const gguf::tensor_info* t = file_.find_tensor(name);
  if (t == nullptr) {
    if (!optional) fail("tensor '" + name + "' is missing");
    return nullptr;
  }
  bool match = t->n_dims <= static_cast<int>(shape.size());
  int d = 0;
  for (std::int64_t s : shape) {
    if (s >= 0 && t->ne[d] != s) match = false;
    ++d;
  }
  if (!match) {
    std::string expected, got;
    for (std::int64_t s : shape) expected += (expected.empty() ? "" : ", ") + (s < 0 ? std::string("*") : std::to_string(s));
    for (int i = 0; i < t->n_dims; ++i) got += (i ? ", " : "") + std::to_string(t->ne[i]);
    fail("tensor '" + name + "' has shape [" + got + "], expected [" + expected + "]");
    return nullptr;
  }
  return t;
}

linear binder::matrix(const std::string& name, std::int64_t in, std::int64_t out, bool optional) {
  linear l;
  const gguf::tensor_info* t = tensor(name + ".weight", {in, out}, optional);
  if (t == nullptr) return l;
  if (!gguf::traits(t->type).quantized && t->type != gguf::tensor_type::f32 && t->type != gguf::tensor_type::f16 &&
      t->type != gguf::tensor_type::bf16) {
    fail("tensor '" + name + ".weight' has type " + std::string(gguf::type_name(t->type)) +
         ", which is not a weight type (supported: F32, F16, BF16 and every quantized GGUF type)");
    return l;
  }
  l.w = dispatch::weight_of(*t);
  l.tensor = t->data;
  packed_bytes_ += dispatch::pack_for_cpu(l.w);
  l.bias = vec(name + ".bias", out, true);
  return l;
}

linear binder::expert(const gguf::tensor_info& stack, std::int64_t e) {
  linear l;
  l.w = dispatch::weight_of(stack, e);
  l.tensor = l.w.data;
  packed_bytes_ += dispatch::pack_for_cpu(l.w);
  return l;
}

linear binder::output_head(const gguf::tensor_info* token_embd, std::int64_t in, std::int64_t out) {
  linear l = matrix("output", in, out, true);
  if (!l.empty() || token_embd == nullptr) return l;
  // Left in the file's layout, a tied head went through the slower kernels of that layout: with
  // Qwen2.5-0.5B's Q5_0 table (151936 x 896) it was 40 % of a decode step, read at a third of the
  // packed kernels' pace. `tensor` keeps the file's address for adapters' lookups.
  l.w = dispatch::weight_of(*token_embd);
  l.tensor = token_embd->data;
  packed_bytes_ += dispatch::pack_for_cpu(l.w);
  return l;
}

std::vector<float> binder::vec(const std::string& name, std::int64_t n, bool optional) { return values(name, {n}, optional); }

std::vector<float> binder::values(const std::string& name, std::initializer_list<std::int64_t> shape, bool optional) {
  const gguf::tensor_info* t = tensor(name, shape, optional);
  std::vector<float> out;
  if (t == nullptr) return out;
  const std::int64_t n = t->n_elements();
  out.resize(static_cast<std::size_t>(n));
  if (auto r = gguf::dequantize(t->type, t->data, out.data(), n); !r) {
    fail("tensor '" + name + "': " + r.err().message);
    out.clear();
  }
  return out;
}

}  // namespace spite::models
