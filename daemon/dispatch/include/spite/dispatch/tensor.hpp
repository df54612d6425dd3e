// Views of weight tensors as the kernels see them: typed bytes in the file's block format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

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
  // The same matrix repacked at load time for this processor's CPU kernels (pack_for_cpu), or
  // null. `data` stays valid: other kernels read the file's layout.
  const std::byte* packed = nullptr;
  int packed_rows = 0;  // rows per group of the packed layout (8, or 16 for some AVX-512 kernels)
  std::size_t packed_size = 0;  // bytes at `packed`
  // Owns `packed`, or the copy of the rows in huge pages that `data` points at when the matrix
  // has no packed layout here (pack_for_cpu; `data` is then no longer the file's address).
  std::shared_ptr<const std::byte[]> packed_owner;

  bool empty() const noexcept { return data == nullptr; }
  const std::byte* row(std::int64_t r) const noexcept { return data + static_cast<std::size_t>(r) * row_bytes; }
};

// The matrix of a tensor, or expert `e` of a {in, out, n_expert} tensor.
weight weight_of(const gguf::tensor_info& t, std::int64_t expert = 0);

// Load-time repacking: where the built-in CPU kernels have a faster layout for this weight type
// on this processor (Q4_0: eight rows interleaved per block), a packed copy is made and kept with
// the weight; other matrices from 2 MiB up are copied as they are into huge pages (where the
// system allows transparent huge pages) and `data` points there. Either way the file's pages of
// the matrix are released from this process (they are read again from the page cache if another
// kernel needs them). Returns the bytes allocated (0: the weight stays as it is). Off:
// set_cpu_repack(false), e.g. from [inference] repack_weights.
// release_source = false keeps the pages of `data` (for weights in anonymous memory, whose
// released pages would read back as zeros).
std::size_t pack_for_cpu(weight& w, bool release_source = true);
void set_cpu_repack(bool on) noexcept;

// While alive, the matrices this thread packs (pack_for_cpu) are laid out one right after the
// other in one buffer of up to `bytes` (their packed sizes or more), as place_packed_together
// would leave them, so that it finds them in place instead of copying them: a layer's q, k, v
// or gate, up, bound one after the other; a model's matrices, bound inside one (models::binder),
// lie in huge pages with no partly used page per matrix (Qwen2.5-0.5B's matrices of 0.5-6 MiB
// had 35-100 % of their bytes on 4 KiB pages, each a buffer of its own). What does not fit gets
// a buffer of its own; bytes left over are never touched. Nothing is set up below 2 MiB, with
// repacking off, or inside another (the outer one lays them together already).
class packing_together {
 public:
  explicit packing_together(std::size_t bytes);
  ~packing_together();
  packing_together(const packing_together&) = delete;
  packing_together& operator=(const packing_together&) = delete;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

// Matrices multiplied by the same activations (a layer's q, k and v projections; its gate and
// up projections): runs of consecutive parts whose packed layouts match (type, row length, rows
// per group, whole groups) move into one buffer, each part's layout right after the one before,
// so that the CPU kernels run a run as one matrix (op_table::matmul_parts: one conversion of the
// activations and one hand-off to the threads instead of one per part). Parts without a packed
// layout stay as they are. Returns the number of parts that now follow the one before them.
std::size_t place_packed_together(std::span<weight* const> parts);
// Whether b's packed layout directly follows a's, as place_packed_together leaves them.
bool packed_together(const weight& a, const weight& b) noexcept;
bool cpu_repack() noexcept;
// The instruction set the built-in CPU kernels use on this processor: "avx512-vnni",
// "avx-vnni", "avx2", "neon-dotprod", or "reference" (portable C++ only). Benchmarks report it
// beside their figures, since the same model runs at very different speeds on each.
const char* cpu_kernel_set() noexcept;
// The table of software-prefetch distances the kernels' decode takes on this processor
// ("default", "zen4", with "+SPITE_CPU_FETCH" where the environment changed it), or "" where the
// kernels take none: the best distance is the core's own.
const char* cpu_decode_fetch() noexcept;

}  // namespace spite::dispatch
