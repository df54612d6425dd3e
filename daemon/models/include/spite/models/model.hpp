// A loaded model: its hyper-parameters, its weights bound to views of the mapped file, and the
// forward pass of its architecture. The executor owns the batch, the KV memory and the threads
// and hands them to forward() through a forward_context.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/core/thread_pool.hpp"
#include "spite/dispatch/ops.hpp"
#include "spite/gguf/file.hpp"
#include "spite/models/hparams.hpp"

namespace spite::models {

// The tokens of one forward step; tokens of several sequences may be mixed.
struct batch_view {
  std::span<const std::int32_t> tokens;
  std::span<const std::int32_t> pos;
  std::span<const std::int32_t> seq;
  std::span<const std::int32_t> outputs;  // indices of the tokens whose logits are wanted
};

// The keys and values a sequence has in one layer, in position order (F16).
struct kv_view {
  const std::uint16_t* k = nullptr;  // [head_dim, n_head_kv, n]
  const std::uint16_t* v = nullptr;  // [head_dim_v, n_head_kv, n]
  const std::int32_t* pos = nullptr;
  std::int64_t n = 0;
  std::int64_t v_stride = 0;  // elements between positions' values; 0: packed ([head_dim_v, n_head_kv])
  std::int64_t k_stride = 0;  // elements between positions' keys; 0: packed ([head_dim, n_head_kv])
};

// What a forward pass needs of the KV memory (implemented by the executor's memory kinds).
class kv_access {
 public:
  virtual ~kv_access() = default;
  // Stores the key / value rows of batch token `index` in `layer` (rounded to f16).
  virtual void store(int layer, std::int64_t index, const float* k, const float* v) = 0;
  // Everything sequence `seq` holds in `layer`, including what this step stored.
  virtual kv_view view(int layer, std::int32_t seq) const = 0;
  // The recurrent state sequence `seq` keeps for `layer` (hparams::n_state floats, zero for a
  // new sequence), updated in place by the forward pass; null when the memory keeps none.
  virtual float* state(int /*layer*/, std::int32_t /*seq*/) { return nullptr; }
};

// A LoRA adapter's pair for one weight: y += scale * B (A x).
struct lora_pair {
  dispatch::weight a, b;
  float scale = 1.0f;
};

// The adapters applied in a forward pass, by the base weight they modify.
class lora_set {
 public:
  // Adds the adapter in `adapter` (general.type = adapter, adapter.type = lora) for the weights
  // of `base`, at `scale`; errors name the adapter tensor that does not fit.
  result<void> add(const gguf::file& adapter, const gguf::file& base, float scale);
  const std::vector<lora_pair>* find(const std::byte* base_weight) const;
  bool empty() const noexcept { return pairs_.empty(); }

 private:
  std::vector<std::pair<const std::byte*, std::vector<lora_pair>>> pairs_;
};

struct forward_context {
  const dispatch::op_table& ops;
  thread_pool& pool;
  batch_view batch;
  kv_access& kv;
  float* logits;                     // [n_vocab, batch.outputs.size()]
  const lora_set* loras = nullptr;   // optional
  float* hidden = nullptr;           // optional [n_embd, batch.tokens.size()]: final-normed states (embeddings)
  // Sparse attention's last choice of keys per sequence ([queries, cached keys], 1 = attend),
  // for the later layers that reuse it (GLM-5's shared indexers).
  std::map<std::int32_t, std::vector<std::uint8_t>> key_selection;
  bool flash_attn = false;  // attention through the online-softmax kernel (attention_args::flash)
};

struct load_options {
  std::int32_t n_ctx = 0;  // the context the model will run with (some rope variants depend on it)
};

class model {
 public:
  virtual ~model() = default;
  const hparams& hp() const noexcept { return hp_; }
  const std::string& arch() const noexcept { return hp_.arch; }

  virtual result<void> forward(forward_context& ctx) const = 0;

 protected:
  hparams hp_;
};

// An architecture: the general.architecture names it serves and how to load it.
struct arch_entry {
  std::string_view name;
  result<std::unique_ptr<model>> (*load)(const gguf::file& file, const load_options& options);
  // kernels/<family>/<model>/ of the plug-ins written for it; `kernel_model` may tell models
  // of one architecture apart (Llama 2 and 3); null means the architecture name.
  std::string_view kernel_family;
  std::string (*kernel_model)(const gguf::file& file) = nullptr;
};

// `family/model` naming the kernel plug-ins for the model of `file` ("generic/generic" for an
// architecture spite does not know).
std::pair<std::string, std::string> kernel_identity_of(const gguf::file& file);

// Every architecture spite knows (one folder each under daemon/models/).
std::span<const arch_entry* const> architectures();

// Loads the model of `file` through the architecture registry.
result<std::unique_ptr<model>> load_model(const gguf::file& file, const load_options& options = {});

}  // namespace spite::models
