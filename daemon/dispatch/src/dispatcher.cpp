#include "spite/dispatch/dispatcher.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "aligned_buffer.hpp"
#include "cpu_kernels.hpp"
#include "load_workers.hpp"
#include "ref_quant.hpp"
#include "spite/core/log.hpp"

namespace spite::dispatch {

weight weight_of(const gguf::tensor_info& t, std::int64_t expert) {
  weight w;
  w.type = t.type;
  w.in = t.ne[0];
  w.out = t.ne[1];
  w.row_bytes = *gguf::row_bytes(t.type, t.ne[0]);
  w.data = t.data + static_cast<std::size_t>(expert) * w.row_bytes * static_cast<std::size_t>(w.out);
  w.no_gemm = t.n_dims == 3;
  return w;
}

namespace {
std::atomic<bool> g_cpu_repack{true};
}  // namespace

void set_cpu_repack(bool on) noexcept { g_cpu_repack = on; }
bool cpu_repack() noexcept { return g_cpu_repack; }

namespace {

// Whether the kernel may back a madvise(MADV_HUGEPAGE) mapping with transparent huge pages.
bool transparent_huge_pages() {
  static const bool on = [] {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    std::getline(f, modes);
    return modes.find("[always]") != std::string::npos || modes.find("[madvise]") != std::string::npos;
  }();
  return on;
}

// A matrix the CPU kernels read in the file's layout, copied into a mapping of huge pages. A
// file's pages are 4 KiB: streaming a matrix from them costs a TLB miss per 4 KiB, and the
// hardware prefetchers stop at each page's end. Decode streams every weight once per token, so
// on a host whose memory outruns one core's misses this is the difference between 45 and 60 %
// of the bandwidth (Q8_0, one thread, AVX-512 host; docs/performance.md). Below 2 MiB nothing
// is gained.
std::size_t move_rows_to_huge_pages(weight& w) {
  constexpr std::size_t huge = std::size_t{2} << 20;
  const std::size_t bytes = w.row_bytes * static_cast<std::size_t>(w.out);
  // Below 2 MiB a buffer of its own would be heap pages; carved from a model's region
  // (packing_together) it lies in huge pages with the rest.
  if (!transparent_huge_pages() || (bytes < huge && cpu::current_carving == nullptr)) return 0;
  auto rows = cpu::make_aligned_bytes(bytes);
  cpu::copy_on_load_threads(rows.get(), w.data, bytes);
  w.data = rows.get();
  w.packed_owner = std::move(rows);
  return bytes;
}

}  // namespace

std::size_t pack_for_cpu(weight& w, bool release_source) {
  if (!cpu_repack() || w.data == nullptr || w.packed_owner != nullptr) return 0;  // once per matrix
  const weight source = w;
  std::size_t bytes = cpu::pack_weight(w);
  if (bytes == 0) bytes = move_rows_to_huge_pages(w);
  if (bytes > 0 && release_source) {
    // The file's pages of this matrix are not read by the kernels any more: let them go from
    // this process (the page cache keeps them while memory allows).
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<std::uintptr_t>(source.data) + page - 1) / page * page;
    const auto end = (reinterpret_cast<std::uintptr_t>(source.data) + source.row_bytes * static_cast<std::size_t>(source.out)) / page * page;
    if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
  return bytes;
}

namespace {

// Same packed layout in whole groups: two such buffers one after the other are the layout of the
// stacked rows.
bool same_packed_layout(const weight& a, const weight& b) noexcept {
  return a.packed != nullptr && b.packed != nullptr && a.packed_size > 0 && b.packed_size > 0 && a.type == b.type &&
         a.in == b.in && a.row_bytes == b.row_bytes && a.packed_rows == b.packed_rows && a.packed_rows > 0 &&
         a.out % a.packed_rows == 0 && b.out % b.packed_rows == 0;
}

}  // namespace

bool packed_together(const weight& a, const weight& b) noexcept {
  return same_packed_layout(a, b) && a.packed + a.packed_size == b.packed;
}

struct packing_together::state {
  cpu::carving_region region;
  cpu::carving_region* outer = nullptr;
};

packing_together::packing_together(std::size_t bytes) {
  if (!cpu_repack() || bytes < (std::size_t{2} << 20)) return;  // below: a region's memset would cost what copying saves
  if (cpu::current_carving != nullptr) return;  // an outer region lays them one after the other already
  auto s = std::make_unique<state>();
  try {
    s->region.region = cpu::make_aligned_bytes(bytes);  // before it is installed: not carved from an outer one
  } catch (const std::bad_alloc&) {
    return;  // address space refused (a model's whole bound at once): each buffer on its own
  }
  state_ = std::move(s);
  state_->region.size = bytes;
  state_->outer = cpu::current_carving;
  cpu::current_carving = &state_->region;
}

packing_together::~packing_together() {
  if (state_ == nullptr) return;
  cpu::current_carving = state_->outer;
  cpu::release_uncarved(state_->region);
}

std::size_t place_packed_together(std::span<weight* const> parts) {
  std::size_t placed = 0;
  for (std::size_t i = 0; i < parts.size();) {
    std::size_t j = i + 1;
    bool in_place = true;  // packed one after the other already (packing_together)
    while (j < parts.size() && same_packed_layout(*parts[j - 1], *parts[j])) {
      in_place = in_place && packed_together(*parts[j - 1], *parts[j]);
      ++j;
    }
    if (j - i >= 2 && in_place) {
      placed += j - i - 1;
    } else if (j - i >= 2) {
      std::size_t total = 0;
      for (std::size_t k = i; k < j; ++k) total += parts[k]->packed_size;
      std::shared_ptr<const std::byte[]> buffer = cpu::make_aligned_bytes(total);
      auto* dst = const_cast<std::byte*>(buffer.get());
      for (std::size_t k = i; k < j; ++k) {
        weight& w = *parts[k];
        cpu::copy_on_load_threads(dst, w.packed, w.packed_size);
        w.packed = dst;
        w.packed_owner = buffer;  // the part's own buffer goes
        dst += w.packed_size;
      }
      placed += j - i - 1;
    }
    i = j;
  }
  return placed;
}

const char* cpu_kernel_set() noexcept {
#if defined(__x86_64__)
  if (cpu::has_avx512_kernels()) return "avx512-vnni";
  if (cpu::has_avx_vnni_kernels()) return "avx-vnni";
  return cpu::fast_matmuls().empty() ? "reference" : "avx2";
#elif defined(__aarch64__)
  return cpu::fast_matmuls().empty() ? "reference" : "neon-dotprod";
#else
  return "reference";
#endif
}

const char* cpu_decode_fetch() noexcept { return cpu::has_avx512_kernels() ? cpu::avx512_decode_fetch() : ""; }

const op_table& cpu_reference_ops() {
  static const op_table table{cpu::matmul, cpu::rms_norm, cpu::attention,  cpu::rope,         cpu::swiglu,
                              cpu::geglu,  cpu::swiglu_oai, cpu::matmul_parts, cpu::attention_many, true};
  return table;
}

std::string op_name(spite_op op) {
  switch (op) {
    case SPITE_OP_RMS_NORM: return "rms_norm";
    case SPITE_OP_ROPE: return "rope";
    case SPITE_OP_MATMUL: return "matmul";
    case SPITE_OP_ATTENTION_PREFILL: return "attention_prefill";
    case SPITE_OP_ATTENTION_DECODE: return "attention_decode";
    case SPITE_OP_FFN_GATED: return "ffn_gated";
    case SPITE_OP_MOE_FFN: return "moe_ffn";
    case SPITE_OP_LAYER: return "layer";
    case SPITE_OP_PREFILL: return "prefill";
    case SPITE_OP_SPEC_VERIFY: return "spec_verify";
    case SPITE_OP_SWIGLU: return "swiglu";
    default: return "op " + std::to_string(op);
  }
}

std::vector<std::string> gpu_arch_candidates(std::string_view arch) {
  std::vector<std::string> out{std::string(arch)};
  // AMD: a kernel built for the whole family (kernels/<f>/<m>/rdna3/) serves each of its chips
  // after one built for the exact gfx target.
  if (arch.starts_with("gfx")) {
    static constexpr std::pair<std::string_view, std::string_view> families[] = {
        {"gfx103", "rdna2"}, {"gfx110", "rdna3"}, {"gfx115", "rdna3"}, {"gfx120", "rdna4"},
        {"gfx908", "cdna1"}, {"gfx90a", "cdna2"}, {"gfx94", "cdna3"}, {"gfx95", "cdna4"}};
    for (const auto& [prefix, family] : families) {
      if (arch.starts_with(prefix)) out.emplace_back(family);
    }
    return out;
  }
  if (arch.size() < 5 || arch.substr(0, 3) != "sm_") return out;
  int cc = 0;
  std::size_t i = 3;
  for (; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) cc = cc * 10 + (arch[i] - '0');
  if (i != arch.size()) return out;  // sm_90a, sm_100f: nothing else is implied
  // Compute capabilities with their own SASS, newest first.
  static constexpr int k_known[] = {121, 120, 110, 103, 101, 100, 90, 89, 87, 86, 80, 75, 72, 70};
  for (int known : k_known) {
    // Binary compatibility holds within a major version and forward from older majors via PTX;
    // a plug-in is built with PTX of its newest arch, so older-arch code runs on newer cards.
    if (known < cc) out.push_back("sm_" + std::to_string(known));
  }
  return out;
}

spite_op_signature make_signature(spite_op op, const dispatch_target& target) {
  spite_op_signature s{};
  s.struct_size = sizeof s;
  s.op = op;
  s.weight_dtype = -1;
  s.activation_dtype = SPITE_DTYPE_F32;
  s.device = target.device;
  s.device_index = target.device_index;
  return s;
}

std::shared_ptr<dispatcher> dispatcher::create(std::shared_ptr<const kernel_set> set, kernel_identity who,
                                               dispatch_target target) {
  std::shared_ptr<dispatcher> d(new dispatcher());
  d->set_ = set ? std::move(set) : kernel_set::scan({});
  d->who_ = std::move(who);
  d->target_ = std::move(target);
  return d;
}

namespace {

constexpr int k_tiers_per_arch = 3;  // family/model, family/generic, generic/generic
constexpr std::int32_t k_max_score = 1'000'000;

dispatcher::choice_key key_of(const spite_op_signature& s) {
  // Decode and prefill may choose differently; the exact token count does not. Numbers, not a
  // string: every op of every step looks its choice up (a string of nine numbers cost a few heap
  // allocations per op).
  return {s.op, s.weight_dtype, s.rows > 1 ? 1 : 0, s.in, s.out, s.n_head, s.n_head_kv, s.head_dim, s.head_dim_v};
}

bool builtin_has(spite_op op) {
  switch (op) {
    case SPITE_OP_RMS_NORM:
    case SPITE_OP_ROPE:
    case SPITE_OP_MATMUL:
    case SPITE_OP_ATTENTION_PREFILL:
    case SPITE_OP_ATTENTION_DECODE:
    case SPITE_OP_SWIGLU: return true;
    default: return false;
  }
}

}  // namespace

int dispatcher::tier_of(const kernel_library& lib, std::string& reason) const {
  if (lib.descriptor().device != target_.device) {
    reason = "built for another device kind";
    return -1;
  }
  const auto arch = std::find(target_.archs.begin(), target_.archs.end(), lib.arch());
  if (arch == target_.archs.end()) {
    reason = "arch " + lib.arch() + " does not run here";
    return -1;
  }
  int specificity;
  if (lib.family() == who_.family && lib.model() == who_.model) {
    specificity = 0;
  } else if (lib.family() == who_.family && lib.model() == "generic") {
    specificity = 1;
  } else if (lib.family() == "generic" && lib.model() == "generic") {
    specificity = 2;
  } else {
    reason = "for " + lib.family() + "/" + lib.model() + ", not " + who_.family + "/" + who_.model;
    return -1;
  }
  return static_cast<int>(arch - target_.archs.begin()) * k_tiers_per_arch + specificity;
}

dispatch_choice dispatcher::decide(const spite_op_signature& sig) const {
  dispatch_choice choice;
  const dispatch_candidate* best = nullptr;
  std::vector<dispatch_candidate> all;
  std::vector<std::pair<const spite_kernel*, std::shared_ptr<kernel_library>>> owners;
  for (const auto& lib : set_->libraries()) {
    std::string why;
    const int tier = tier_of(*lib, why);
    for (const spite_kernel& k : lib->kernels()) {
      if (k.op != sig.op) continue;
      dispatch_candidate c;
      c.source = lib->id();
      c.kernel = k.name != nullptr ? std::string(k.name, strnlen(k.name, 128)) : "?";
      c.tier = tier;
      if (tier < 0) {
        c.reason = why;
      } else if (sig.weight_dtype >= 0 && k.n_dtypes > 0 &&
                 std::find(k.dtypes, k.dtypes + k.n_dtypes, sig.weight_dtype) == k.dtypes + k.n_dtypes) {
        c.reason = "does not handle weight type " + std::to_string(sig.weight_dtype);
      } else {
        char reason[256] = {};
        const std::int32_t score = k.probe(&sig, reason, sizeof reason);
        // A probe is the library's word only within sane bounds.
        if (score > k_max_score) {
          c.reason = "probe returned an implausible score " + std::to_string(score);
        } else if (score <= 0) {
          c.reason = reason[0] != '\0' ? std::string(reason, strnlen(reason, sizeof reason)) : "probe refused";
        } else {
          c.score = score;
        }
      }
      all.push_back(std::move(c));
      owners.emplace_back(&k, lib);
    }
  }
  std::size_t winner = all.size();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].score <= 0) continue;
    if (best == nullptr || all[i].tier < best->tier || (all[i].tier == best->tier && all[i].score > best->score)) {
      best = &all[i];
      winner = i;
    }
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i != winner && all[i].score > 0) {
      all[i].reason = best->tier < all[i].tier ? "a more specific library wins" : "a higher score wins";
    }
  }
  dispatch_candidate builtin{"builtin", "reference", builtin_has(sig.op) ? 1 : 0, {}, 1 << 20};
  if (!builtin_has(sig.op)) builtin.reason = "no built-in kernel for this op";
  if (winner != all.size()) {
    choice.kernel = owners[winner].first;
    choice.library = owners[winner].second;
    choice.source = all[winner].source;
    choice.kernel_name = all[winner].kernel;
    if (builtin.score > 0) builtin.reason = "a plug-in wins";
    std::rotate(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(winner),
                all.begin() + static_cast<std::ptrdiff_t>(winner) + 1);
    all.push_back(std::move(builtin));
  } else {
    all.insert(all.begin(), std::move(builtin));
  }
  choice.candidates = std::move(all);
  return choice;
}

const dispatch_choice& dispatcher::resolve(const spite_op_signature& sig) {
  const choice_key key = key_of(sig);
  std::lock_guard lock(mutex_);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    it = cache_.emplace(key, std::make_unique<dispatch_choice>(decide(sig))).first;
  }
  return *it->second;
}

namespace {

// Scratch for run(), per thread, grown on demand.
std::byte* workspace(const spite_kernel& k, const spite_op_signature& sig) {
  thread_local std::vector<std::byte> buffer;
  const std::size_t need = k.workspace_size != nullptr ? k.workspace_size(&sig) : 0;
  if (buffer.size() < need) buffer.resize(need);
  return buffer.data();
}

void report_failure(const dispatch_choice& c, spite_status status) {
  // Once per kernel: a failing kernel falls back to the reference from then on, loudly once.
  static std::mutex m;
  static std::vector<const spite_kernel*> reported;
  std::lock_guard lock(m);
  if (std::find(reported.begin(), reported.end(), c.kernel) != reported.end()) return;
  reported.push_back(c.kernel);
  log::warn("kernel ", c.source, "/", c.kernel_name, " returned status ", status, "; using the built-in reference");
}

spite_op_signature matmul_signature(const dispatch_target& target, const weight& w, std::int64_t n_tokens) {
  spite_op_signature sig = make_signature(SPITE_OP_MATMUL, target);
  sig.weight_dtype = static_cast<spite_dtype>(w.type);
  sig.rows = n_tokens;
  sig.in = w.in;
  sig.out = w.out;
  return sig;
}

}  // namespace

std::shared_ptr<const op_table> dispatcher::ops(const op_table& fallback) {
  auto self = shared_from_this();
  auto t = std::make_shared<op_table>(fallback);
  const op_table base = fallback;
  // A device's kernels are not known to take calls from several threads at once.
  t->concurrent = fallback.concurrent && target_.device == SPITE_DEVICE_CPU;

  t->rms_norm = [self, base](const float* x, const float* w, float* y, std::int64_t n, std::int64_t rows, float eps) {
    spite_op_signature sig = make_signature(SPITE_OP_RMS_NORM, self->target_);
    sig.rows = rows;
    sig.in = sig.out = n;
    const dispatch_choice& c = self->resolve(sig);
    if (c.kernel != nullptr && c.library->runnable()) {
      spite_rms_norm_args a{sizeof a, x, w, y, n, rows, eps};
      const spite_status s = c.kernel->run(&a, workspace(*c.kernel, sig), nullptr);
      if (s == SPITE_OK) return;
      report_failure(c, s);
    }
    base.rms_norm(x, w, y, n, rows, eps);
  };

  t->swiglu = [self, base](const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows) {
    spite_op_signature sig = make_signature(SPITE_OP_SWIGLU, self->target_);
    sig.rows = rows;
    sig.in = sig.out = n;
    const dispatch_choice& c = self->resolve(sig);
    if (c.kernel != nullptr && c.library->runnable()) {
      spite_swiglu_args a{sizeof a, g, u, h, n, rows};
      const spite_status s = c.kernel->run(&a, workspace(*c.kernel, sig), nullptr);
      if (s == SPITE_OK) return;
      report_failure(c, s);
    }
    base.swiglu(g, u, h, n, rows);
  };

  t->matmul = [self, base](const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
    const spite_op_signature sig = matmul_signature(self->target_, w, n_tokens);
    const dispatch_choice& c = self->resolve(sig);
    if (c.kernel != nullptr && c.library->runnable()) {
      // A CPU kernel runs on one thread; the host splits the output rows over its pool, each
      // part computed into a private [part, n_tokens] buffer and scattered into y.
      std::atomic<spite_status> status{SPITE_OK};
      const bool cpu = self->target_.device == SPITE_DEVICE_CPU;
      pool.parallel_for(cpu ? w.out : 1, [&](std::int64_t begin, std::int64_t end, int) {
        if (!cpu) {
          begin = 0;
          end = w.out;
        }
        const std::int64_t part = end - begin;
        thread_local std::vector<float> scratch;
        float* dst = y;
        if (n_tokens > 1 || part != w.out) {
          scratch.resize(static_cast<std::size_t>(part * n_tokens));
          dst = n_tokens == 1 ? y + begin : scratch.data();
        }
        spite_matmul_args a{sizeof a, sig.weight_dtype, w.row(begin), w.in, part, w.row_bytes, x, dst, n_tokens};
        spite_op_signature part_sig = sig;
        part_sig.out = part;
        const spite_status s = c.kernel->run(&a, workspace(*c.kernel, part_sig), nullptr);
        if (s != SPITE_OK) {
          status = s;
          return;
        }
        if (dst == scratch.data()) {
          for (std::int64_t tok = 0; tok < n_tokens; ++tok) {
            std::copy_n(scratch.data() + tok * part, part, y + tok * w.out + begin);
          }
        }
      });
      if (status == SPITE_OK) return;
      report_failure(c, status);
    }
    base.matmul(w, x, n_tokens, y, pool);
  };

  // The built-in kernels run parts placed together as one matrix; a part a plug-in kernel takes
  // goes to it alone, with the rest one by one.
  t->matmul_parts = [self, base, matmul = t->matmul](std::span<const weight* const> parts, const float* x, std::int64_t n_tokens,
                                                     float* const* ys, thread_pool& pool) {
    bool built_in = static_cast<bool>(base.matmul_parts);
    for (const weight* w : parts) {
      if (!built_in) break;
      const dispatch_choice& c = self->resolve(matmul_signature(self->target_, *w, n_tokens));
      built_in = c.kernel == nullptr || !c.library->runnable();
    }
    if (built_in) {
      base.matmul_parts(parts, x, n_tokens, ys, pool);
      return;
    }
    for (std::size_t i = 0; i < parts.size(); ++i) matmul(*parts[i], x, n_tokens, ys[i], pool);
  };
  // attention and attention_many stay the fallback's: no plug-in op takes attention yet. One
  // that does must wrap attention_many too (or empty it, so that callers go call by call).
  return t;
}

}  // namespace spite::dispatch
