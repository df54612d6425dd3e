// grammar: only tokens that keep the generated text a prefix of the grammar's language.
#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spite/grammar/matcher.hpp"
#include "spite/scheduler/sampler.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace spite::scheduler {

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();
constexpr auto before = ranks_before;

class pass_through final : public sampler {
 public:
  std::string_view name() const override { return "grammar"; }
  void apply(candidates&) override {}
  std::unique_ptr<sampler> clone() const override { return std::make_unique<pass_through>(); }
};

class grammar_sampler final : public sampler {
 public:
  grammar_sampler(std::shared_ptr<const grammar::grammar> g, std::shared_ptr<const grammar::vocabulary> v,
                  std::size_t best_of)
      : matcher_(std::move(g)), vocab_(std::move(v)), best_of_(best_of) {
    if (auto f = matcher_.failure()) failure_ = *f;
  }

  std::string_view name() const override { return "grammar"; }

  void accept(std::int32_t token) override {
    if (failure_) return;
    if (!matcher_.accept_token(*vocab_, token)) {
      failure_ = matcher_.failure().value_or(make_error(
          errc::internal, "grammar: token " + std::to_string(token) + " was selected although it does not continue the grammar"));
    }
  }

  void accept_prompt(std::int32_t) override {}

  void apply(candidates& c) override {
    if (failure_) return ban_all(c);
    // The cheap way first: the best candidates, until best_of_ of them pass.
    if (best_of_ > 0 && c.size() > best_of_ && best_first(c)) return finish(c);
    if (c.size() * 16 < vocab_->size()) {
      // Few candidates left (an earlier sampler narrowed them): check each one.
      std::erase_if(c.data, [&](const token_prob& t) { return !allowed(t.id); });
    } else {
      matcher_.allowed_tokens(*vocab_, mask_);
      std::erase_if(c.data, [&](const token_prob& t) {
        return t.id < 0 || static_cast<std::size_t>(t.id) >= mask_.size() || mask_[static_cast<std::size_t>(t.id)] == 0;
      });
    }
    finish(c);
  }

  void reset() override {
    matcher_.reset();
    failure_ = matcher_.failure();
  }

  std::unique_ptr<sampler> clone() const override { return std::make_unique<grammar_sampler>(*this); }

  std::optional<error> failure() const override { return failure_; }

 private:
  bool allowed(std::int32_t id) {
    return id >= 0 && static_cast<std::size_t>(id) < vocab_->size() && matcher_.allows_token(*vocab_, id);
  }

  // Checks candidates in descending logit order until best_of_ pass. The order comes chunk by
  // chunk, each chunk picked in one pass with a small heap (the vocabulary is never sorted).
  // Gives up, to the full check, when too many fail.
  bool best_first(candidates& c) {
    const std::size_t give_up = std::min(c.size(), 1024 + 16 * best_of_);
    kept_.clear();
    std::size_t checked = 0;
    std::size_t chunk = std::max<std::size_t>(32, 2 * best_of_);
    std::optional<token_prob> floor;  // the last candidate checked: the next chunk comes after it
    while (checked < give_up) {
      next_best(c, floor, chunk);
      if (chunk_.empty()) break;
      for (const token_prob& t : chunk_) {
        if (!allowed(t.id)) continue;
        kept_.push_back(t);
        if (kept_.size() == best_of_) {
          c.data.swap(kept_);
          c.sorted = true;
          return true;
        }
      }
      if (matcher_.failure()) return false;
      // Few pass: a narrow spot of the grammar (punctuation, a keyword), where the trie walk
      // prunes at the first byte and costs less than more chunks.
      if (checked == 0 && kept_.size() * 4 < chunk_.size()) return false;
      checked += chunk_.size();
      floor = chunk_.back();
      chunk *= 2;
    }
    if (checked < c.size()) return false;
    c.data.swap(kept_);  // every candidate was checked: fewer than best_of_ pass
    c.sorted = true;
    return true;
  }

  // chunk_ = the `count` best candidates ranked after `floor`, best first.
  void next_best(const candidates& c, const std::optional<token_prob>& floor, std::size_t count) {
    chunk_.clear();
    for (const token_prob& t : c.data) {
      if (floor && !before(*floor, t)) continue;
      if (chunk_.size() < count) {
        chunk_.push_back(t);
        std::push_heap(chunk_.begin(), chunk_.end(), before);  // the worst kept on top
      } else if (before(t, chunk_.front())) {
        std::pop_heap(chunk_.begin(), chunk_.end(), before);
        chunk_.back() = t;
        std::push_heap(chunk_.begin(), chunk_.end(), before);
      }
    }
    std::sort_heap(chunk_.begin(), chunk_.end(), before);
  }

  void finish(candidates& c) {
    c.normalized = false;
    c.selected.reset();
    if (auto f = matcher_.failure()) failure_ = *f;
    if (!failure_ && c.empty()) {
      failure_ = make_error(errc::invalid_argument,
                            matcher_.ended() ? "grammar: generation went on after the end of the grammar"
                                             : "grammar: no token of the vocabulary can continue the text here");
    }
    if (!failure_) return;
    // Something must stay selectable: the chain's last sampler selects, and the caller reads
    // failure() before using the token.
    if (c.empty()) c.data.push_back({0, neg_inf, 0.0f});
    ban_all(c);
  }

  static void ban_all(candidates& c) {
    for (auto& t : c.data) t.logit = neg_inf;
    c.logits_changed(/*order_kept=*/false);
    c.selected.reset();
  }

  grammar::matcher matcher_;
  std::shared_ptr<const grammar::vocabulary> vocab_;
  std::size_t best_of_;
  std::optional<error> failure_;
  // Scratch, reused between steps.
  std::vector<std::uint8_t> mask_;
  std::vector<token_prob> chunk_;
  std::vector<token_prob> kept_;
};

}  // namespace

std::unique_ptr<sampler> make_grammar(std::shared_ptr<const grammar::grammar> g, std::shared_ptr<const grammar::vocabulary> vocab,
                                      std::size_t best_of) {
  if (!g) return std::make_unique<pass_through>();
  if (!vocab) throw std::invalid_argument("make_grammar: a grammar needs the vocabulary");
  return std::make_unique<grammar_sampler>(std::move(g), std::move(vocab), best_of);
}

std::shared_ptr<const grammar::vocabulary> make_grammar_vocabulary(const tokenizer::tokenizer& tok) {
  const tokenizer::vocab& v = tok.vocabulary();
  std::vector<std::string> texts(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) texts[i] = std::string(tok.piece(static_cast<tokenizer::token>(i), /*special=*/false));
  const auto eog = v.eog_tokens();
  return std::make_shared<const grammar::vocabulary>(std::move(texts), std::vector<std::int32_t>(eog.begin(), eog.end()));
}

}  // namespace spite::scheduler
