// The hybrid memory of models that mix attention layers with recurrent ones (gated DeltaNet):
// the contiguous F16 KV memory for the attention layers plus, per sequence and recurrent layer,
// a state of fixed size that the forward pass updates in place. A state summarizes every
// position it has seen and keeps no checkpoints, so it cannot be rewound: removing only the end
// of a sequence, or copying part of one, is refused.
#include <algorithm>

#include "kv_kinds.hpp"

namespace spite::executor {
namespace {

class hybrid_f16 final : public kv_memory {
 public:
  explicit hybrid_f16(const kv_layout& layout)
      : layout_(layout), kv_(make_contiguous_f16(layout)), states_(static_cast<std::size_t>(layout.n_seq_max)) {
    layout_.state_width.resize(static_cast<std::size_t>(layout.n_layer), 0);
  }

  std::string_view kind() const noexcept override { return "hybrid_f16"; }

  result<plan> prepare(const models::batch_view& b) const override { return kv_->prepare(b); }

  void apply(const plan& p) override {
    for (std::int32_t s : p.seq) allocate(static_cast<std::size_t>(s));
    kv_->apply(p);
  }

  void store(int layer, std::int64_t index, const float* k, const float* v) override { kv_->store(layer, index, k, v); }
  models::kv_view view(int layer, std::int32_t seq) const override { return kv_->view(layer, seq); }

  float* state(int layer, std::int32_t seq) override {
    if (seq < 0 || seq >= layout_.n_seq_max) return nullptr;
    auto& s = states_[static_cast<std::size_t>(seq)];
    if (s.empty() || s[static_cast<std::size_t>(layer)].empty()) return nullptr;
    return s[static_cast<std::size_t>(layer)].data();
  }

  result<void> seq_rm(std::int32_t seq, std::int32_t p0, std::int32_t p1) override {
    if (seq < 0 || seq >= layout_.n_seq_max) return make_error(errc::invalid_argument, "no sequence " + std::to_string(seq));
    const std::int32_t length = kv_->seq_pos_max(seq) + 1;
    const std::int32_t from = std::max(p0, 0), to = p1 < 0 ? length : std::min(p1, length);
    if (from >= to) return ok();  // nothing held in the range
    if (from > 0 || to < length) {
      return make_error(errc::unsupported,
                        "sequence " + std::to_string(seq) + " cannot be cut back to position " + std::to_string(from) +
                            ": the recurrent state of this model summarizes all " + std::to_string(length) +
                            " positions and keeps no checkpoints; remove the whole sequence and evaluate it again");
    }
    SPITE_TRY(kv_->seq_rm(seq, -1, -1));
    reset(static_cast<std::size_t>(seq));
    return ok();
  }

  result<void> seq_cp(std::int32_t src, std::int32_t dst, std::int32_t p0, std::int32_t p1) override {
    if (src < 0 || src >= layout_.n_seq_max || dst < 0 || dst >= layout_.n_seq_max) {
      return make_error(errc::invalid_argument, "sequence id out of range");
    }
    const std::int32_t length = kv_->seq_pos_max(src) + 1;
    if (std::max(p0, 0) != 0 || (p1 >= 0 && p1 < length)) {
      return make_error(errc::unsupported, "the recurrent state of sequence " + std::to_string(src) +
                                               " holds all its positions; only the whole sequence can be copied");
    }
    SPITE_TRY(kv_->seq_cp(src, dst, p0, p1));
    allocate(static_cast<std::size_t>(dst));
    if (states_[static_cast<std::size_t>(src)].empty()) {
      reset(static_cast<std::size_t>(dst));
    } else {
      states_[static_cast<std::size_t>(dst)] = states_[static_cast<std::size_t>(src)];
    }
    return ok();
  }

  void seq_keep(std::int32_t seq) override {
    kv_->seq_keep(seq);
    for (std::size_t s = 0; s < states_.size(); ++s) {
      if (static_cast<std::int32_t>(s) != seq) reset(s);
    }
  }

  std::int32_t seq_pos_max(std::int32_t seq) const override { return kv_->seq_pos_max(seq); }

  void clear() override {
    kv_->clear();
    for (std::size_t s = 0; s < states_.size(); ++s) reset(s);
  }

  std::size_t bytes_when_full() const override {
    return kv_->bytes_when_full() + state_bytes() * static_cast<std::size_t>(layout_.n_seq_max);
  }

  std::size_t bytes() const override {
    std::size_t n = kv_->bytes();
    for (const auto& s : states_) {
      if (!s.empty()) n += state_bytes();
    }
    return n;
  }

 private:
  std::size_t state_bytes() const {
    std::size_t n = 0;
    for (std::int64_t w : layout_.state_width) n += static_cast<std::size_t>(w) * sizeof(float);
    return n;
  }
  // A sequence's states are allocated (zero) on its first token.
  void allocate(std::size_t seq) {
    auto& s = states_[seq];
    if (!s.empty()) return;
    s.resize(static_cast<std::size_t>(layout_.n_layer));
    for (std::size_t l = 0; l < s.size(); ++l) s[l].assign(static_cast<std::size_t>(layout_.state_width[l]), 0.0f);
  }
  void reset(std::size_t seq) {
    for (auto& l : states_[seq]) std::fill(l.begin(), l.end(), 0.0f);
  }

  kv_layout layout_;
  std::unique_ptr<kv_memory> kv_;
  std::vector<std::vector<std::vector<float>>> states_;  // [seq][layer][state_width]
};

}  // namespace

std::unique_ptr<kv_memory> make_hybrid_f16(const kv_layout& layout) { return std::make_unique<hybrid_f16>(layout); }

}  // namespace spite::executor
