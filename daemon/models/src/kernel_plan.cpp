#include "spite/models/kernel_plan.hpp"

#include <set>

#include "spite/gguf/types.hpp"

namespace spite::models {
namespace {

std::string type_name(std::int32_t t) {
  const auto* tr = gguf::find_type(static_cast<std::uint32_t>(t));
  return tr != nullptr ? std::string(tr->name) : std::to_string(t);
}

}  // namespace

// The operations one decode step asks for; one matmul per weight type, with the shape of its
// first tensor.
std::vector<planned_op> plan_ops(const gguf::file& file, const hparams& hp, const dispatch::dispatch_target& t) {
  std::vector<planned_op> ops;
  auto add = [&](std::string label, spite_op op, auto&& fill) {
    spite_op_signature s = dispatch::make_signature(op, t);
    s.rows = 1;
    fill(s);
    ops.push_back({std::move(label), s});
  };
  const std::int64_t n_head = hp.n_head.empty() ? 0 : hp.n_head[0];
  const std::int64_t n_head_kv = hp.n_head_kv.empty() ? 0 : hp.n_head_kv[0];
  const std::int64_t n_ff = hp.n_ff.empty() ? hp.n_ff_exp : hp.n_ff[0];
  add("rms_norm", SPITE_OP_RMS_NORM, [&](spite_op_signature& s) { s.in = s.out = hp.n_embd; });
  add("rope", SPITE_OP_ROPE, [&](spite_op_signature& s) {
    s.n_head = n_head;
    s.head_dim = hp.head_dim_k;
  });
  for (spite_op op : {SPITE_OP_ATTENTION_PREFILL, SPITE_OP_ATTENTION_DECODE}) {
    add(dispatch::op_name(op), op, [&](spite_op_signature& s) {
      if (op == SPITE_OP_ATTENTION_PREFILL) s.rows = 512;
      s.n_head = n_head;
      s.n_head_kv = n_head_kv;
      s.head_dim = hp.head_dim_k;
      s.head_dim_v = hp.head_dim_v;
    });
  }
  add("swiglu", SPITE_OP_SWIGLU, [&](spite_op_signature& s) { s.in = s.out = n_ff; });
  // One matmul line per weight type, with the shape of its first tensor.
  std::set<std::int32_t> seen;
  for (const gguf::tensor_info& ti : file.tensors()) {
    if (ti.n_dims < 2 || ti.name.find("weight") == std::string_view::npos) continue;
    if (ti.name.find("token_embd") != std::string_view::npos) continue;  // a row lookup, not a matmul
    const auto type = static_cast<std::int32_t>(ti.type);
    if (!seen.insert(type).second) continue;
    add("matmul " + type_name(type), SPITE_OP_MATMUL, [&](spite_op_signature& s) {
      s.weight_dtype = type;
      s.in = ti.ne[0];
      s.out = ti.ne[1];
    });
  }
  return ops;
}


}  // namespace spite::models
