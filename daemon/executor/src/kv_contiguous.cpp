// The F16 KV memory: one buffer per sequence and layer, indexed by position. A sliding-window
// layer (kv_layout::window) whose window plus one step's tokens is shorter than the context
// keeps only that many cells, as a ring (cell = position % cells): a token at position p needs
// keys from p - window + 1 on, and a step of at most max_batch tokens of one sequence stores
// them all before the layer attends, so window + max_batch cells always hold what it needs.
// Cells not written yet carry a position past any query and are masked. A sequence's positions
// must grow without gaps. With kv_layout::value_in_key (latent attention: K = [c | k_pe], V = c)
// the values are read inside the key rows and not stored a second time. A sequence's layers
// lie in one mapping of their own (huge pages where the system allows): attention at depth
// reads a kv head's slice of every row, a stride that touched a new 4 KiB page every few rows.
#include <algorithm>
#include <limits>
#include <numeric>

#include "kv_kinds.hpp"
#include "spite/core/half.hpp"
#include "spite/core/page_memory.hpp"

namespace spite::executor {
namespace {

constexpr std::int32_t empty_cell = std::numeric_limits<std::int32_t>::max();  // masked as a future key

class contiguous_f16 final : public kv_memory {
 public:
  explicit contiguous_f16(const kv_layout& layout) : layout_(layout), seqs_(static_cast<std::size_t>(layout.n_seq_max)) {
    positions_.resize(static_cast<std::size_t>(layout.n_ctx));
    std::iota(positions_.begin(), positions_.end(), 0);
    layout_.window.resize(static_cast<std::size_t>(layout.n_layer), 0);
    for (std::size_t l = 0; l < layout_.v_width.size(); ++l) {
      if (layout_.v_width[l] > layout_.k_width[l]) layout_.value_in_key = false;  // cannot be inside
    }
    cells_.resize(static_cast<std::size_t>(layout.n_layer), layout.n_ctx);
    for (std::size_t l = 0; l < cells_.size(); ++l) {
      const std::int64_t w = layout_.window[l];
      if (w > 0 && w + layout.max_batch < layout.n_ctx) {
        cells_[l] = static_cast<std::int32_t>(w + layout.max_batch);
        any_ring_ = true;
      }
    }
  }

  std::string_view kind() const noexcept override { return "contiguous_f16"; }

  result<plan> prepare(const models::batch_view& b) const override {
    plan p;
    std::vector<std::int32_t> next(seqs_.size()), in_step(seqs_.size(), 0);
    for (std::size_t s = 0; s < seqs_.size(); ++s) next[s] = seqs_[s].length;
    for (std::size_t i = 0; i < b.tokens.size(); ++i) {
      const std::int32_t s = b.seq[i], pos = b.pos[i];
      if (s < 0 || s >= layout_.n_seq_max) {
        return make_error(errc::invalid_argument, "sequence id " + std::to_string(s) + " is outside [0, " +
                                                      std::to_string(layout_.n_seq_max) + ")");
      }
      if (pos != next[static_cast<std::size_t>(s)]) {
        return make_error(errc::invalid_argument, "sequence " + std::to_string(s) + ": position " + std::to_string(pos) +
                                                      " given, " + std::to_string(next[static_cast<std::size_t>(s)]) +
                                                      " expected (positions must grow without gaps)");
      }
      if (pos >= layout_.n_ctx) {
        return make_error(errc::out_of_range, "sequence " + std::to_string(s) + " is full: the context holds " +
                                                  std::to_string(layout_.n_ctx) + " tokens");
      }
      if (any_ring_ && ++in_step[static_cast<std::size_t>(s)] > layout_.max_batch) {
        return make_error(errc::invalid_argument, "sequence " + std::to_string(s) +
                                                      ": too many tokens in one step for the sliding-window memory (at most " +
                                                      std::to_string(layout_.max_batch) + " per sequence)");
      }
      ++next[static_cast<std::size_t>(s)];
      p.seq.push_back(s);
      p.pos.push_back(pos);
    }
    return p;
  }

  void apply(const plan& p) override {
    current_ = p;
    for (std::size_t i = 0; i < p.seq.size(); ++i) {
      seq_state& s = seqs_[static_cast<std::size_t>(p.seq[i])];
      allocate(s);
      s.length = std::max(s.length, p.pos[i] + 1);
      for (std::size_t l = 0; l < s.cell_pos.size(); ++l) {
        if (s.cell_pos[l].empty()) continue;
        const std::int32_t cell = p.pos[i] % cells_[l];
        s.cell_pos[l][static_cast<std::size_t>(cell)] = p.pos[i];
        s.used[l] = std::max(s.used[l], cell + 1);
      }
    }
  }

  void store(int layer, std::int64_t index, const float* k, const float* v) override {
    seq_state& s = seqs_[static_cast<std::size_t>(current_.seq[static_cast<std::size_t>(index)])];
    const auto l = static_cast<std::size_t>(layer);
    const std::int64_t cell = current_.pos[static_cast<std::size_t>(index)] % cells_[l];
    const std::int64_t kw = layout_.k_width[l], vw = layout_.v_width[l];
    fp32_to_fp16_row(k, s.k[l] + cell * kw, kw);
    if (layout_.value_in_key) return;
    fp32_to_fp16_row(v, s.v[l] + cell * vw, vw);
  }

  models::kv_view view(int layer, std::int32_t seq) const override {
    const seq_state& s = seqs_[static_cast<std::size_t>(seq)];
    if (s.k.empty()) return {};
    const auto l = static_cast<std::size_t>(layer);
    const std::uint16_t* v = layout_.value_in_key ? s.k[l] : s.v[l];
    const std::int64_t v_stride = layout_.value_in_key ? layout_.k_width[l] : 0;
    const std::int64_t k_stride = layout_.k_width[l];
    if (!s.cell_pos[l].empty()) return {s.k[l], v, s.cell_pos[l].data(), s.used[l], v_stride, k_stride};
    return {s.k[l], v, positions_.data(), s.length, v_stride, k_stride};
  }

  result<void> seq_rm(std::int32_t seq, std::int32_t p0, std::int32_t p1) override {
    if (seq < 0 || seq >= layout_.n_seq_max) return make_error(errc::invalid_argument, "no sequence " + std::to_string(seq));
    seq_state& s = seqs_[static_cast<std::size_t>(seq)];
    if (p1 >= 0 && p1 < s.length) {
      return make_error(errc::unsupported, "contiguous KV memory removes only the end of a sequence");
    }
    const std::int32_t from = std::max(p0, 0);
    if (from >= s.length) return ok();
    // A ring has overwritten its oldest positions: going back is possible only while the cells
    // still hold the window the next token at `from` needs.
    for (std::size_t l = 0; l < cells_.size() && from > 0; ++l) {
      if (s.cell_pos.empty() || s.cell_pos[l].empty()) continue;
      const std::int32_t oldest = std::max(0, s.length - cells_[l]);
      if (from - layout_.window[l] + 1 < oldest) {
        return make_error(errc::unsupported, "sequence " + std::to_string(seq) + " cannot be cut back to position " +
                                                 std::to_string(from) + ": its sliding-window layers keep only the last " +
                                                 std::to_string(cells_[l]) + " positions");
      }
    }
    for (std::size_t l = 0; l < s.cell_pos.size(); ++l) {
      for (auto& pos : s.cell_pos[l]) {
        if (pos != empty_cell && pos >= from) pos = empty_cell;
      }
      if (from == 0) s.used[l] = 0;
    }
    s.length = from;
    return ok();
  }

  result<void> seq_cp(std::int32_t src, std::int32_t dst, std::int32_t p0, std::int32_t p1) override {
    if (src < 0 || src >= layout_.n_seq_max || dst < 0 || dst >= layout_.n_seq_max) {
      return make_error(errc::invalid_argument, "sequence id out of range");
    }
    seq_state& from = seqs_[static_cast<std::size_t>(src)];
    seq_state& to = seqs_[static_cast<std::size_t>(dst)];
    const std::int32_t end = p1 < 0 ? from.length : std::min(p1, from.length);
    if (std::max(p0, 0) != 0) return make_error(errc::unsupported, "contiguous KV memory copies prefixes only");
    if (any_ring_ && end < from.length) {
      return make_error(errc::unsupported, "a sliding-window memory copies whole sequences only");
    }
    allocate(to);
    if (from.k.empty()) {  // nothing stored yet: the copy is an empty sequence
      reset(to);
      return ok();
    }
    for (std::size_t l = 0; l < to.k.size(); ++l) {
      const std::int64_t n = to.cell_pos[l].empty() ? end : cells_[l];
      std::copy_n(from.k[l], n * layout_.k_width[l], to.k[l]);
      if (!layout_.value_in_key) std::copy_n(from.v[l], n * layout_.v_width[l], to.v[l]);
      if (!from.cell_pos.empty()) {
        to.cell_pos[l] = from.cell_pos[l];
        to.used[l] = from.used[l];
      }
    }
    to.length = end;
    return ok();
  }

  void seq_keep(std::int32_t seq) override {
    for (std::size_t s = 0; s < seqs_.size(); ++s) {
      if (static_cast<std::int32_t>(s) != seq) reset(seqs_[s]);
    }
  }

  std::int32_t seq_pos_max(std::int32_t seq) const override {
    if (seq < 0 || seq >= layout_.n_seq_max) return -1;
    return seqs_[static_cast<std::size_t>(seq)].length - 1;
  }

  void clear() override {
    for (auto& s : seqs_) reset(s);
  }

  std::size_t bytes_when_full() const override { return bytes_per_seq() * static_cast<std::size_t>(layout_.n_seq_max); }

  std::size_t bytes() const override {
    std::size_t n = 0;
    for (const auto& s : seqs_) {
      if (!s.k.empty()) n += bytes_per_seq();
    }
    return n;
  }

 private:
  struct seq_state {
    page_memory storage;                              // every layer's keys and values
    std::vector<std::uint16_t*> k, v;                 // per layer [cells, width] in storage
    std::vector<std::vector<std::int32_t>> cell_pos;  // ring layers: the position in each cell
    std::vector<std::int32_t> used;                   // ring layers: cells written so far
    std::int32_t length = 0;
  };
  // Layer l's keys, then its values, each starting on a cache line.
  std::size_t elements(std::int64_t width, std::size_t l) const {
    constexpr std::size_t line = 64 / sizeof(std::uint16_t);
    return (static_cast<std::size_t>(width * cells_[l]) + line - 1) / line * line;
  }
  std::size_t bytes_per_seq() const {
    std::size_t n = 0;
    for (std::size_t l = 0; l < cells_.size(); ++l) {
      n += elements(layout_.k_width[l], l);
      if (!layout_.value_in_key) n += elements(layout_.v_width[l], l);
    }
    return n * sizeof(std::uint16_t);
  }
  void allocate(seq_state& s) {
    if (!s.k.empty()) return;
    const auto L = static_cast<std::size_t>(layout_.n_layer);
    s.storage = map_zeroed_pages(bytes_per_seq());
    auto* at = reinterpret_cast<std::uint16_t*>(s.storage.get());
    s.k.resize(L);
    s.v.assign(L, nullptr);
    s.cell_pos.resize(L);
    s.used.assign(L, 0);
    for (std::size_t l = 0; l < L; ++l) {
      s.k[l] = at;
      at += elements(layout_.k_width[l], l);
      if (!layout_.value_in_key) {
        s.v[l] = at;
        at += elements(layout_.v_width[l], l);
      }
      if (cells_[l] < layout_.n_ctx) s.cell_pos[l].assign(static_cast<std::size_t>(cells_[l]), empty_cell);
    }
  }
  void reset(seq_state& s) {
    s.length = 0;
    for (auto& c : s.cell_pos) std::fill(c.begin(), c.end(), empty_cell);
    std::fill(s.used.begin(), s.used.end(), 0);
  }

  kv_layout layout_;
  std::vector<std::int32_t> cells_;  // per layer
  bool any_ring_ = false;
  std::vector<seq_state> seqs_;
  std::vector<std::int32_t> positions_;
  plan current_;
};

}  // namespace

std::unique_ptr<kv_memory> make_contiguous_f16(const kv_layout& layout) { return std::make_unique<contiguous_f16>(layout); }

}  // namespace spite::executor
