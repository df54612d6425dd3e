// The contiguous F16 KV memory: one buffer per sequence and layer, indexed by position. Simple
// and fast; a sequence's positions must grow without gaps.
#include <algorithm>
#include <numeric>

#include "kv_kinds.hpp"
#include "spite/core/half.hpp"

namespace spite::executor {
namespace {

class contiguous_f16 final : public kv_memory {
 public:
  explicit contiguous_f16(const kv_layout& layout) : layout_(layout), seqs_(static_cast<std::size_t>(layout.n_seq_max)) {
    positions_.resize(static_cast<std::size_t>(layout.n_ctx));
    std::iota(positions_.begin(), positions_.end(), 0);
  }

  std::string_view kind() const noexcept override { return "contiguous_f16"; }

  result<plan> prepare(const models::batch_view& b) const override {
    plan p;
    std::vector<std::int32_t> next(seqs_.size());
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
    }
  }

  void store(int layer, std::int64_t index, const float* k, const float* v) override {
    seq_state& s = seqs_[static_cast<std::size_t>(current_.seq[static_cast<std::size_t>(index)])];
    const std::int64_t pos = current_.pos[static_cast<std::size_t>(index)];
    const std::int64_t kw = layout_.k_width[static_cast<std::size_t>(layer)], vw = layout_.v_width[static_cast<std::size_t>(layer)];
    std::uint16_t* kd = s.k[static_cast<std::size_t>(layer)].data() + pos * kw;
    std::uint16_t* vd = s.v[static_cast<std::size_t>(layer)].data() + pos * vw;
    for (std::int64_t i = 0; i < kw; ++i) kd[i] = fp32_to_fp16(k[i]);
    for (std::int64_t i = 0; i < vw; ++i) vd[i] = fp32_to_fp16(v[i]);
  }

  models::kv_view view(int layer, std::int32_t seq) const override {
    const seq_state& s = seqs_[static_cast<std::size_t>(seq)];
    if (s.k.empty()) return {};
    return {s.k[static_cast<std::size_t>(layer)].data(), s.v[static_cast<std::size_t>(layer)].data(), positions_.data(), s.length};
  }

  result<void> seq_rm(std::int32_t seq, std::int32_t p0, std::int32_t p1) override {
    if (seq < 0 || seq >= layout_.n_seq_max) return make_error(errc::invalid_argument, "no sequence " + std::to_string(seq));
    seq_state& s = seqs_[static_cast<std::size_t>(seq)];
    if (p1 >= 0 && p1 < s.length) {
      return make_error(errc::unsupported, "contiguous KV memory removes only the end of a sequence");
    }
    s.length = std::min(s.length, std::max(p0, 0));
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
    allocate(to);
    for (std::size_t l = 0; l < to.k.size(); ++l) {
      std::copy_n(from.k[l].begin(), end * layout_.k_width[l], to.k[l].begin());
      std::copy_n(from.v[l].begin(), end * layout_.v_width[l], to.v[l].begin());
    }
    to.length = end;
    return ok();
  }

  void seq_keep(std::int32_t seq) override {
    for (std::size_t s = 0; s < seqs_.size(); ++s) {
      if (static_cast<std::int32_t>(s) != seq) seqs_[s].length = 0;
    }
  }

  std::int32_t seq_pos_max(std::int32_t seq) const override {
    if (seq < 0 || seq >= layout_.n_seq_max) return -1;
    return seqs_[static_cast<std::size_t>(seq)].length - 1;
  }

  void clear() override {
    for (auto& s : seqs_) s.length = 0;
  }

  std::size_t bytes_when_full() const override {
    std::size_t per_seq = 0;
    for (std::size_t l = 0; l < layout_.k_width.size(); ++l) {
      per_seq += static_cast<std::size_t>((layout_.k_width[l] + layout_.v_width[l]) * layout_.n_ctx) * 2;
    }
    return per_seq * static_cast<std::size_t>(layout_.n_seq_max);
  }

  std::size_t bytes() const override {
    std::size_t n = 0;
    for (const auto& s : seqs_) {
      for (const auto& k : s.k) n += k.size() * 2;
      for (const auto& v : s.v) n += v.size() * 2;
    }
    return n;
  }

 private:
  struct seq_state {
    std::vector<std::vector<std::uint16_t>> k, v;  // per layer [width, n_ctx]
    std::int32_t length = 0;
  };
  void allocate(seq_state& s) {
    if (!s.k.empty()) return;
    s.k.resize(static_cast<std::size_t>(layout_.n_layer));
    s.v.resize(static_cast<std::size_t>(layout_.n_layer));
    for (std::size_t l = 0; l < s.k.size(); ++l) {
      s.k[l].resize(static_cast<std::size_t>(layout_.k_width[l] * layout_.n_ctx));
      s.v[l].resize(static_cast<std::size_t>(layout_.v_width[l] * layout_.n_ctx));
    }
  }

  kv_layout layout_;
  std::vector<seq_state> seqs_;
  std::vector<std::int32_t> positions_;
  plan current_;
};

}  // namespace

std::unique_ptr<kv_memory> make_contiguous_f16(const kv_layout& layout) { return std::make_unique<contiguous_f16>(layout); }

}  // namespace spite::executor
