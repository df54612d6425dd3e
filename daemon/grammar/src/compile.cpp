// Draft rules -> grammar: the checks a top-down matcher needs (every rule defined, the root able
// to finish, no left recursion) and the flat layout it walks.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "draft.hpp"
#include "escape.hpp"

namespace spite::grammar {

namespace {

constexpr char32_t max_cp = 0x10FFFF;

}  // namespace

char_class::char_class(std::vector<std::pair<char32_t, char32_t>> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (auto [lo, hi] : ranges) {
    hi = std::min(hi, max_cp);
    if (lo > hi) continue;
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.emplace_back(lo, hi);
    }
  }
  if (negated) {
    std::vector<std::pair<char32_t, char32_t>> complement;
    char32_t next = 0;
    for (const auto& [lo, hi] : merged) {
      if (lo > next) complement.emplace_back(next, lo - 1);
      next = hi + 1;
    }
    if (next <= max_cp) complement.emplace_back(next, max_cp);
    merged = std::move(complement);
  }
  // Surrogates are not characters: no valid UTF-8 encodes them, so a class never offers them.
  for (const auto& [lo, hi] : merged) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      ranges_.emplace_back(lo, hi);
      continue;
    }
    if (lo < 0xD800) ranges_.emplace_back(lo, 0xD7FF);
    if (hi > 0xDFFF) ranges_.emplace_back(0xE000, hi);
  }
  for (const auto& [lo, hi] : ranges_) {
    for (char32_t c = lo; c <= hi && c < 128; ++c) ascii_[c >> 6] |= std::uint64_t{1} << (c & 63);
  }
}

bool char_class::contains_slow(char32_t c) const noexcept {
  const auto it = std::upper_bound(ranges_.begin(), ranges_.end(), c,
                                   [](char32_t v, const auto& r) { return v < r.first; });
  return it != ranges_.begin() && c <= std::prev(it)->second;
}

bool char_class::intersects(char32_t lo, char32_t hi) const noexcept {
  // The first range that ends at or after lo; it intersects iff it starts at or before hi.
  const auto it = std::lower_bound(ranges_.begin(), ranges_.end(), lo,
                                   [](const auto& r, char32_t v) { return r.second < v; });
  return it != ranges_.end() && it->first <= hi;
}

// Friend of grammar: fills its private layout.
class compiler {
 public:
  compiler(detail::draft& d, std::string_view text) : d_(d), text_(text) {}

  result<std::shared_ptr<const grammar>> run(std::string_view root_name) {
    const std::size_t n = d_.rules.size();
    for (const auto& r : d_.rules) {
      if (!r.helper && !r.defined) return detail::error_at(text_, r.used_at, "undefined rule '" + r.name + "'");
    }
    std::uint32_t root = 0;
    bool found = false;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!d_.rules[i].helper && d_.rules[i].name == root_name) {
        root = i;
        found = true;
      }
    }
    if (!found) return make_error(errc::invalid_argument, "gbnf: no rule named '" + std::string(root_name) + "'");

    prune_unproductive();
    if (d_.rules[root].alts.empty()) {
      return detail::error_at(text_, d_.rules[root].defined_at,
                              "rule '" + d_.rules[root].name + "' can never finish (every alternative needs itself or an empty set of characters)");
    }
    if (auto e = find_left_recursion()) return std::move(*e);

    auto g = std::make_shared<grammar>();
    g->root_ = root;
    g->classes_ = std::move(d_.classes);
    for (const auto& r : d_.rules) {
      g->rule_names_.push_back(r.name);
      g->rule_alts_.push_back(static_cast<std::uint32_t>(g->alt_starts_.size()));
      for (const auto& alt : r.alts) {
        g->alt_starts_.push_back(static_cast<std::uint32_t>(g->symbols_.size()));
        for (const auto& s : alt) {
          g->symbols_.push_back({s.is_rule ? symbol::kind::rule : symbol::kind::chars, s.index});
        }
        g->symbols_.push_back({symbol::kind::end, 0});
      }
    }
    g->rule_alts_.push_back(static_cast<std::uint32_t>(g->alt_starts_.size()));
    return std::shared_ptr<const grammar>(std::move(g));
  }

 private:
  // A rule is productive when some alternative derives a finite string. Alternatives that use an
  // unproductive rule or an empty class can never complete; removing them means every stack the
  // matcher keeps can still reach the end, so it never wanders into a dead branch.
  void prune_unproductive() {
    std::vector<char> productive(d_.rules.size(), 0);
    auto alt_ok = [&](const std::vector<detail::draft_symbol>& alt) {
      return std::all_of(alt.begin(), alt.end(), [&](const detail::draft_symbol& s) {
        return s.is_rule ? productive[s.index] != 0 : !d_.classes[s.index].empty();
      });
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t r = 0; r < d_.rules.size(); ++r) {
        if (productive[r]) continue;
        for (const auto& alt : d_.rules[r].alts) {
          if (alt_ok(alt)) {
            productive[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    for (auto& r : d_.rules) std::erase_if(r.alts, [&](const auto& alt) { return !alt_ok(alt); });
  }

  // Left recursion (a rule reachable from itself without consuming a character) would make a
  // top-down matcher expand forever; it is refused with the cycle spelled out.
  std::optional<error> find_left_recursion() {
    const std::size_t n = d_.rules.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const auto& alt : d_.rules[r].alts) {
          const bool all = std::all_of(alt.begin(), alt.end(), [&](const auto& s) { return s.is_rule && nullable[s.index]; });
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<std::uint32_t>> left(n);  // rules that may start rule r
    for (std::size_t r = 0; r < n; ++r) {
      for (const auto& alt : d_.rules[r].alts) {
        for (const auto& s : alt) {
          if (!s.is_rule) break;
          left[r].push_back(s.index);
          if (!nullable[s.index]) break;
        }
      }
    }
    // Iterative depth-first search (rules can be many; no native recursion on input).
    std::vector<char> color(n, 0);  // 0 new, 1 on the path, 2 done
    struct frame {
      std::uint32_t rule;
      std::size_t next;
    };
    for (std::uint32_t start = 0; start < n; ++start) {
      if (color[start]) continue;
      std::vector<frame> path{{start, 0}};
      color[start] = 1;
      while (!path.empty()) {
        frame& f = path.back();
        if (f.next == left[f.rule].size()) {
          color[f.rule] = 2;
          path.pop_back();
          continue;
        }
        const std::uint32_t to = left[f.rule][f.next++];
        if (color[to] == 1) return cycle_error(path, to);
        if (color[to] == 0) {
          color[to] = 1;
          path.push_back({to, 0});
        }
      }
    }
    return std::nullopt;
  }

  template <class Path>
  error cycle_error(const Path& path, std::uint32_t to) {
    std::size_t i = 0;
    while (path[i].rule != to) ++i;
    std::string chain;
    for (std::size_t k = i; k < path.size(); ++k) chain += d_.rules[path[k].rule].name + " -> ";
    chain += d_.rules[to].name;
    const auto& r = d_.rules[to];
    return detail::error_at(text_, r.helper ? r.used_at : r.defined_at,
                            "left recursion: " + chain + " (a rule may not start with itself; use repetition instead)");
  }

  detail::draft& d_;
  std::string_view text_;
};

namespace detail {

result<std::shared_ptr<const grammar>> compile(draft&& d, std::string_view text, std::string_view root,
                                               const limits& /*lim*/) {
  compiler c(d, text);
  return c.run(root);
}

}  // namespace detail

std::string grammar::to_string() const {
  std::string out;
  for (std::uint32_t r = 0; r < rule_count(); ++r) {
    const auto alts = alternatives(r);
    if (alts.empty()) continue;
    out += rule_names_[r] + " ::=";
    for (std::size_t a = 0; a < alts.size(); ++a) {
      if (a > 0) out += " |";
      bool in_literal = false;
      for (std::uint32_t p = alts[a]; symbols_[p].type != symbol::kind::end; ++p) {
        const symbol s = symbols_[p];
        static const std::vector<std::pair<char32_t, char32_t>> none;
        const auto& ranges = s.type == symbol::kind::chars ? classes_[s.index].ranges() : none;
        const bool single = s.type == symbol::kind::chars && ranges.size() == 1 && ranges[0].first == ranges[0].second;
        if (single) {
          if (!in_literal) out += " \"";
          in_literal = true;
          detail::append_gbnf_char(out, ranges[0].first, false);
          continue;
        }
        if (in_literal) out += '"';
        in_literal = false;
        if (s.type == symbol::kind::rule) {
          out += " " + rule_names_[s.index];
          continue;
        }
        out += " [";
        for (const auto& [lo, hi] : ranges) {
          detail::append_gbnf_char(out, lo, true);
          if (hi != lo) {
            out += '-';
            detail::append_gbnf_char(out, hi, true);
          }
        }
        out += ']';
      }
      if (in_literal) out += '"';
      if (symbols_[alts[a]].type == symbol::kind::end) out += " \"\"";
    }
    out += '\n';
  }
  return out;
}

}  // namespace spite::grammar
