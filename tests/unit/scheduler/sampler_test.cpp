#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "spite/scheduler/logprobs.hpp"
#include "spite/scheduler/sampler.hpp"
#include "spite/scheduler/sampler_registry.hpp"

using namespace spite::scheduler;

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

std::vector<std::int32_t> ids_of(const candidates& c) {
  std::vector<std::int32_t> ids;
  for (const auto& t : c.data) ids.push_back(t.id);
  return ids;
}

std::set<std::int32_t> id_set(const candidates& c) {
  const auto ids = ids_of(c);
  return {ids.begin(), ids.end()};
}

float logit_of(const candidates& c, std::int32_t id) {
  for (const auto& t : c.data) {
    if (t.id == id) return t.logit;
  }
  FAIL("token " << id << " is not among the candidates");
  return 0;
}

// Logits whose softmax is exactly the given distribution.
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(p > 0 ? static_cast<float>(std::log(p)) : neg_inf);
  return out;
}

std::unique_ptr<sampler_chain> chain_of(const sampling_params& p) {
  auto r = make_chain(p);
  REQUIRE(r.ok());
  return std::move(r).value();
}

sampling_params plain(float temperature) {
  sampling_params p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

// A pseudo-random but fixed logit vector.
std::vector<float> varied_logits(std::size_t n) {
  std::vector<float> out(n);
  std::uint32_t x = 12345;
  for (auto& l : out) {
    x = x * 1664525u + 1013904223u;
    l = static_cast<float>(x >> 8) / static_cast<float>(1u << 24) * 6.0f - 3.0f;
  }
  return out;
}

}  // namespace

TEST_CASE("greedy picks the argmax, ties to the lowest id", "[scheduler][sampler]") {
  sampler_chain chain;
  chain.add(make_greedy());
  CHECK(chain.sample(std::vector<float>{0.1f, 2.5f, -1.0f, 2.4f}) == 1);
  CHECK(chain.sample(std::vector<float>{1.0f, 3.0f, 3.0f, 3.0f}) == 1);
  CHECK(chain.sample(std::vector<float>{neg_inf, neg_inf, -5.0f}) == 2);
  const auto v = varied_logits(5000);
  const auto best = std::max_element(v.begin(), v.end()) - v.begin();
  CHECK(chain.sample(v) == best);
  // NaN logits from a broken model never win.
  CHECK(chain.sample(std::vector<float>{std::nanf(""), 0.5f, std::nanf("")}) == 1);
}

TEST_CASE("temperature <= 0 is greedy", "[scheduler][sampler]") {
  const auto v = varied_logits(1000);
  const auto best = static_cast<std::int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
  for (float t : {0.0f, -1.0f}) {
    auto p = plain(t);
    p.top_k = 40;  // ignored on the greedy path
    auto chain = chain_of(p);
    CHECK(chain->describe() == "greedy");
    for (std::uint64_t seed = 0; seed < 5; ++seed) {
      p.seed = seed;
      CHECK(chain_of(p)->sample(v) == best);
    }
  }
  // The temperature sampler alone leaves only the greedy choice.
  candidates c(std::vector<float>{1.0f, 4.0f, 4.0f, 2.0f});
  make_temperature(0.0f)->apply(c);
  CHECK(ids_of(c) == std::vector<std::int32_t>{1});
}

TEST_CASE("temperature scales the logits", "[scheduler][sampler]") {
  candidates c(std::vector<float>{1.0f, -2.0f, 4.0f});
  make_temperature(0.5f)->apply(c);
  CHECK(logit_of(c, 0) == 2.0f);
  CHECK(logit_of(c, 1) == -4.0f);
  CHECK(logit_of(c, 2) == 8.0f);
}

TEST_CASE("top-k keeps exactly the k highest", "[scheduler][sampler]") {
  const auto v = varied_logits(1000);
  for (int k : {1, 2, 40, 999}) {
    candidates c(v);
    make_top_k(k)->apply(c);
    REQUIRE(c.size() == static_cast<std::size_t>(k));
    std::vector<float> sorted = v;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    for (const auto& t : c.data) CHECK(t.logit >= sorted[static_cast<std::size_t>(k) - 1]);
  }
  candidates all(v);
  make_top_k(0)->apply(all);
  CHECK(all.size() == v.size());
  candidates more(v);
  make_top_k(5000)->apply(more);
  CHECK(more.size() == v.size());
  // With ties at the boundary the lower ids stay.
  candidates ties(std::vector<float>{1.0f, 2.0f, 2.0f, 2.0f, 0.0f});
  make_top_k(2)->apply(ties);
  CHECK(id_set(ties) == std::set<std::int32_t>{1, 2});
}

TEST_CASE("top-p keeps the smallest prefix reaching p", "[scheduler][sampler]") {
  const auto v = logits_for({0.05, 0.5, 0.15, 0.3});
  auto keep = [&](float p) {
    candidates c(v);
    make_top_p(p)->apply(c);
    return id_set(c);
  };
  CHECK(keep(0.3f) == std::set<std::int32_t>{1});
  CHECK(keep(0.5f - 1e-4f) == std::set<std::int32_t>{1});
  CHECK(keep(0.75f) == std::set<std::int32_t>{1, 3});
  CHECK(keep(0.9f) == std::set<std::int32_t>{1, 3, 2});
  CHECK(keep(0.99f) == std::set<std::int32_t>{0, 1, 2, 3});
  CHECK(keep(1.0f).size() == 4);
  // min_keep wins over a small p.
  candidates c(v);
  make_top_p(0.1f, 3)->apply(c);
  CHECK(id_set(c) == std::set<std::int32_t>{1, 3, 2});
}

TEST_CASE("min-p keeps tokens at least p times as probable as the best", "[scheduler][sampler]") {
  // Relative to the best (0.5): 0.3 -> 0.6, 0.15 -> 0.3, 0.05 -> 0.1.
  const auto v = logits_for({0.05, 0.5, 0.15, 0.3});
  auto keep = [&](float p) {
    candidates c(v);
    make_min_p(p)->apply(c);
    return id_set(c);
  };
  CHECK(keep(0.0f).size() == 4);
  CHECK(keep(0.05f) == std::set<std::int32_t>{0, 1, 2, 3});
  CHECK(keep(0.2f) == std::set<std::int32_t>{1, 2, 3});
  CHECK(keep(0.5f) == std::set<std::int32_t>{1, 3});
  CHECK(keep(0.7f) == std::set<std::int32_t>{1});
  CHECK(keep(1.0f) == std::set<std::int32_t>{1});
  // The threshold is relative: shifting every logit changes nothing.
  std::vector<float> shifted = v;
  for (auto& l : shifted) l += 17.0f;
  candidates c(shifted);
  make_min_p(0.5f)->apply(c);
  CHECK(id_set(c) == std::set<std::int32_t>{1, 3});
}

TEST_CASE("typical-p keeps tokens whose surprisal is closest to the entropy", "[scheduler][sampler]") {
  // Entropy 1.75 bits; surprisals 1, 2, 3, 3 bits: token 1 is the most typical, then token 0.
  const auto v = logits_for({0.5, 0.25, 0.125, 0.125});
  auto keep = [&](float p) {
    candidates c(v);
    make_typical_p(p)->apply(c);
    return id_set(c);
  };
  CHECK(keep(0.2f) == std::set<std::int32_t>{1});
  CHECK(keep(0.7f) == std::set<std::int32_t>{0, 1});
  CHECK(keep(0.8f) == std::set<std::int32_t>{0, 1, 2});
  CHECK(keep(1.0f).size() == 4);
  // A uniform distribution is all typical: p decides how many stay.
  candidates u(std::vector<float>(10, 0.0f));
  make_typical_p(0.45f)->apply(u);
  CHECK(u.size() == 5);
}

TEST_CASE("repetition penalty follows llama.cpp", "[scheduler][sampler]") {
  auto s = make_penalties({.last_n = 64, .repeat = 2.0f});
  s->accept(0);
  s->accept(1);
  s->accept(1);
  candidates c(std::vector<float>{3.0f, -1.5f, 0.5f, 0.0f});
  s->apply(c);
  CHECK(logit_of(c, 0) == 1.5f);   // positive: divided
  CHECK(logit_of(c, 1) == -3.0f);  // negative: multiplied (once, whatever the count)
  CHECK(logit_of(c, 2) == 0.5f);   // never seen
  CHECK(logit_of(c, 3) == 0.0f);
}

TEST_CASE("presence and frequency penalties follow OpenAI", "[scheduler][sampler]") {
  auto s = make_penalties({.last_n = 64, .repeat = 1.0f, .frequency = 0.25f, .presence = 0.5f});
  for (std::int32_t t : {2, 2, 2, 0}) s->accept(t);
  candidates c(std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f});
  s->apply(c);
  CHECK(logit_of(c, 0) == Approx(1.0f - 0.5f - 0.25f));
  CHECK(logit_of(c, 1) == 1.0f);
  CHECK(logit_of(c, 2) == Approx(1.0f - 0.5f - 3 * 0.25f));
  CHECK(logit_of(c, 3) == 1.0f);
}

TEST_CASE("penalties only see the last N tokens", "[scheduler][sampler]") {
  auto s = make_penalties({.last_n = 3, .repeat = 1.0f, .frequency = 1.0f});
  for (std::int32_t t : {0, 0, 1, 2, 2}) s->accept(t);  // window: 1 2 2
  candidates c(std::vector<float>{0.0f, 0.0f, 0.0f});
  s->apply(c);
  CHECK(logit_of(c, 0) == 0.0f);
  CHECK(logit_of(c, 1) == -1.0f);
  CHECK(logit_of(c, 2) == -2.0f);

  // Also when the candidates are no longer in id order.
  candidates sorted(std::vector<float>{5.0f, 4.0f, 3.0f});
  sorted.sort();
  make_temperature(1.0f)->apply(sorted);
  std::reverse(sorted.data.begin(), sorted.data.end());
  sorted.sorted = false;
  s->apply(sorted);
  CHECK(logit_of(sorted, 0) == 5.0f);
  CHECK(logit_of(sorted, 1) == 3.0f);
  CHECK(logit_of(sorted, 2) == 1.0f);

  s->reset();
  candidates fresh(std::vector<float>{0.0f, 0.0f, 0.0f});
  s->apply(fresh);
  CHECK(logit_of(fresh, 2) == 0.0f);

  // last_n = 0 disables, -1 covers every token.
  auto off = make_penalties({.last_n = 0, .repeat = 1.0f, .frequency = 1.0f});
  auto all = make_penalties({.last_n = -1, .repeat = 1.0f, .frequency = 1.0f});
  for (int i = 0; i < 500; ++i) {
    off->accept(0);
    all->accept(i == 0 ? 1 : 0);
  }
  candidates a(std::vector<float>{0.0f, 0.0f}), b(std::vector<float>{0.0f, 0.0f});
  off->apply(a);
  all->apply(b);
  CHECK(logit_of(a, 0) == 0.0f);
  CHECK(logit_of(b, 0) == -499.0f);
  CHECK(logit_of(b, 1) == -1.0f);
}

TEST_CASE("a chain counts sampled tokens for penalties", "[scheduler][sampler]") {
  auto p = plain(0.0f);
  p.presence_penalty = 10.0f;
  auto chain = chain_of(p);
  CHECK(chain->describe() == "penalties -> greedy");
  const std::vector<float> v{3.0f, 2.0f, 1.0f};
  CHECK(chain->sample(v) == 0);
  CHECK(chain->sample(v) == 1);  // 0 is penalized now
  CHECK(chain->sample(v) == 2);
}

TEST_CASE("logit bias adds to logits and -inf bans", "[scheduler][sampler]") {
  const std::vector<std::pair<std::int32_t, float>> bias{{1, 1.5f}, {3, neg_inf}, {1, 0.5f}, {99, 3.0f}};
  candidates c(std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f});
  make_logit_bias(bias)->apply(c);
  CHECK(logit_of(c, 1) == 2.0f);  // repeated ids add up; unknown ids are ignored
  CHECK(logit_of(c, 3) == neg_inf);

  auto p = plain(1.0f);
  p.logit_bias = {{2, neg_inf}};
  auto chain = chain_of(p);
  const auto v = logits_for({0.1, 0.1, 0.7, 0.1});
  for (int i = 0; i < 2000; ++i) REQUIRE(chain->sample(v) != 2);
  auto g = plain(0.0f);
  g.logit_bias = {{2, neg_inf}};
  CHECK(chain_of(g)->sample(v) == 0);

  // Everything banned still answers with a valid token instead of failing.
  p.logit_bias = {{0, neg_inf}, {1, neg_inf}, {2, neg_inf}, {3, neg_inf}};
  const auto t = chain_of(p)->sample(v);
  CHECK((t >= 0 && t < 4));
}

TEST_CASE("the same seed gives the same tokens, different seeds differ", "[scheduler][sampler]") {
  const auto v = varied_logits(300);
  auto run = [&](std::uint64_t seed) {
    auto p = plain(1.5f);
    p.top_k = 100;
    p.repeat_penalty = 1.1f;
    p.seed = seed;
    auto chain = chain_of(p);
    std::vector<std::int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(chain->sample(v));
    return out;
  };
  const auto a = run(42);
  CHECK(run(42) == a);
  CHECK(run(43) != a);
  CHECK(run(0) != a);

  // reset() starts the sequence over.
  auto p = plain(1.0f);
  p.seed = 7;
  auto chain = chain_of(p);
  std::vector<std::int32_t> first, second;
  for (int i = 0; i < 32; ++i) first.push_back(chain->sample(v));
  chain->reset();
  for (int i = 0; i < 32; ++i) second.push_back(chain->sample(v));
  CHECK(first == second);
}

TEST_CASE("the random source is the same on every platform", "[scheduler][sampler]") {
  // std::mt19937_64's 10000th output is fixed by the C++ standard.
  rng r(5489);
  std::uint64_t x = 0;
  for (int i = 0; i < 10000; ++i) x = r.next_u64();
  CHECK(x == 9981545732273789042ull);
  rng u(1);
  for (int i = 0; i < 1000; ++i) {
    const double d = u.uniform();
    REQUIRE((d >= 0.0 && d < 1.0));
  }
}

TEST_CASE("dist at T=1 draws with the softmax probabilities", "[scheduler][sampler]") {
  const std::vector<double> probs{0.05, 0.1, 0.15, 0.2, 0.5};
  auto p = plain(1.0f);
  p.seed = 1234;
  auto chain = chain_of(p);
  constexpr int draws = 20000;
  std::vector<int> counts(probs.size(), 0);
  const auto v = logits_for(probs);
  for (int i = 0; i < draws; ++i) ++counts.at(static_cast<std::size_t>(chain->sample(v)));
  double chi2 = 0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    const double expected = probs[i] * draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    CHECK(std::abs(counts[i] / double(draws) - probs[i]) < 0.01);
  }
  // 4 degrees of freedom: P(chi2 > 18.47) = 0.001.
  CHECK(chi2 < 18.47);
}

TEST_CASE("the default chain has the standard order", "[scheduler][sampler]") {
  sampling_params p;
  CHECK(chain_of(p)->describe() == "top_k -> top_p -> min_p -> temperature -> dist");
  p.typical_p = 0.9f;
  p.repeat_penalty = 1.1f;
  p.logit_bias = {{5, -1.0f}};
  CHECK(chain_of(p)->describe() ==
        "logit_bias -> penalties -> top_k -> typical_p -> top_p -> min_p -> temperature -> dist");
  p.penalty_last_n = 0;
  CHECK(chain_of(p)->describe() == "logit_bias -> top_k -> typical_p -> top_p -> min_p -> temperature -> dist");
  // A default chain samples only among the top 40.
  const auto v = varied_logits(2000);
  auto chain = chain_of(sampling_params{});
  candidates top(v);
  make_top_k(40)->apply(top);
  const auto allowed = id_set(top);
  for (int i = 0; i < 500; ++i) REQUIRE(allowed.count(chain->sample(v)) == 1);
}

TEST_CASE("invalid parameters are rejected with a message naming them", "[scheduler][sampler]") {
  const float nan = std::nanf("");
  const float inf = std::numeric_limits<float>::infinity();
  struct bad_case {
    std::string field;
    sampling_params p;
  };
  std::vector<bad_case> cases;
  auto with = [&](std::string field, auto change) {
    sampling_params p;
    change(p);
    cases.push_back({std::move(field), std::move(p)});
  };
  with("temperature", [&](sampling_params& p) { p.temperature = nan; });
  with("temperature", [&](sampling_params& p) { p.temperature = inf; });
  with("top_k", [](sampling_params& p) { p.top_k = -1; });
  with("top_p", [](sampling_params& p) { p.top_p = 0.0f; });
  with("top_p", [](sampling_params& p) { p.top_p = 1.5f; });
  with("top_p", [&](sampling_params& p) { p.top_p = nan; });
  with("min_p", [](sampling_params& p) { p.min_p = -0.1f; });
  with("min_p", [](sampling_params& p) { p.min_p = 2.0f; });
  with("typical_p", [](sampling_params& p) { p.typical_p = 0.0f; });
  with("repeat_penalty", [](sampling_params& p) { p.repeat_penalty = 0.0f; });
  with("repeat_penalty", [&](sampling_params& p) { p.repeat_penalty = nan; });
  with("presence_penalty", [&](sampling_params& p) { p.presence_penalty = inf; });
  with("frequency_penalty", [&](sampling_params& p) { p.frequency_penalty = nan; });
  with("penalty_last_n", [](sampling_params& p) { p.penalty_last_n = -2; });
  with("logit_bias", [](sampling_params& p) { p.logit_bias = {{-1, 1.0f}}; });
  with("logit_bias", [&](sampling_params& p) { p.logit_bias = {{3, nan}}; });
  with("logit_bias", [&](sampling_params& p) { p.logit_bias = {{3, inf}}; });
  for (const auto& c : cases) {
    INFO("field " << c.field);
    const auto r = make_chain(c.p);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == spite::errc::invalid_argument);
    CHECK(r.err().message.find(c.field) != std::string::npos);
    CHECK_FALSE(validate(c.p).ok());
  }
  // The value shows up too.
  sampling_params p;
  p.top_p = 1.5f;
  CHECK(make_chain(p).err().message == "top_p must be in (0, 1] (1 disables it), got 1.5");
  // Bounds themselves are fine.
  p = sampling_params{};
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.typical_p = 1.0f;
  p.top_k = 0;
  p.penalty_last_n = -1;
  p.temperature = -3.0f;
  p.logit_bias = {{0, neg_inf}};
  CHECK(make_chain(p).ok());
  // The typed factories refuse out-of-range arguments (programmer errors).
  CHECK_THROWS_AS(make_top_k(-1), std::invalid_argument);
  CHECK_THROWS_AS(make_top_p(0.0f), std::invalid_argument);
  CHECK_THROWS_AS(make_temperature(nan), std::invalid_argument);
  CHECK_THROWS_AS(make_penalties({.last_n = 64, .repeat = 0.0f}), std::invalid_argument);
}

TEST_CASE("clone gives an independent sampler with the same state", "[scheduler][sampler]") {
  auto p = plain(1.2f);
  p.seed = 99;
  p.frequency_penalty = 0.7f;
  auto chain = chain_of(p);
  const auto v = varied_logits(50);
  for (int i = 0; i < 10; ++i) chain->sample(v);

  auto copy = chain->clone_chain();
  CHECK(copy->describe() == chain->describe());
  std::vector<std::int32_t> a, b;
  for (int i = 0; i < 30; ++i) a.push_back(chain->sample(v));
  for (int i = 0; i < 30; ++i) b.push_back(copy->sample(v));
  CHECK(a == b);  // same history and same random position

  // Changing one leaves the other alone.
  auto g = plain(0.0f);
  g.presence_penalty = 100.0f;
  auto greedy_chain = chain_of(g);
  const std::vector<float> w{2.0f, 1.0f, 0.0f};
  auto before = greedy_chain->clone();
  CHECK(greedy_chain->sample(w) == 0);
  CHECK(greedy_chain->sample(w) == 1);
  candidates c(w);
  before->apply(c);  // the clone never saw those tokens
  CHECK(c.selected.has_value());
  CHECK(c.data[*c.selected].id == 0);
  std::unique_ptr<sampler> single = make_penalties({.last_n = 8, .repeat = 1.0f, .presence = 1.0f});
  single->accept(1);
  auto single_copy = single->clone();
  single->accept(0);
  candidates d(std::vector<float>{0.0f, 0.0f});
  single_copy->apply(d);
  CHECK(logit_of(d, 0) == 0.0f);
  CHECK(logit_of(d, 1) == -1.0f);
}

TEST_CASE("the registry builds samplers by name and refuses duplicates", "[scheduler][sampler]") {
  const auto& reg = sampler_registry::builtin();
  for (const char* name :
       {"greedy", "dist", "temperature", "top_k", "top_p", "min_p", "typical_p", "penalties", "logit_bias"}) {
    INFO(name);
    CHECK(reg.contains(name));
    auto s = reg.create(name, sampling_params{});
    REQUIRE(s.ok());
    CHECK((*s)->name() == name);
  }
  const auto missing = reg.create("mirostat", sampling_params{});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.err().code == spite::errc::not_found);
  CHECK(missing.err().message.find("mirostat") != std::string::npos);

  sampler_registry mine = reg;
  try {
    mine.add("top_k", [](const sampling_params&) { return make_greedy(); });
    FAIL("a duplicate registration was accepted");
  } catch (const std::logic_error& e) {
    CHECK(std::string(e.what()).find("top_k") != std::string::npos);
  }
  mine.add("always_greedy", [](const sampling_params&) { return make_greedy(); });
  const std::vector<std::string_view> order{"top_k", "always_greedy"};
  auto chain = make_chain(sampling_params{}, order, mine);
  REQUIRE(chain.ok());
  CHECK((*chain)->sample(std::vector<float>{0.0f, 5.0f, 1.0f}) == 1);
  CHECK_FALSE(make_chain(sampling_params{}, std::vector<std::string_view>{"nope"}).ok());
}

TEST_CASE("a chain without a selecting sampler is a programmer error", "[scheduler][sampler]") {
  sampler_chain chain;
  chain.add(make_top_k(2));
  CHECK_THROWS_AS(chain.sample(std::vector<float>{1.0f, 2.0f}), std::logic_error);
  sampler_chain empty_input;
  empty_input.add(make_greedy());
  CHECK_THROWS_AS(empty_input.sample(std::vector<float>{}), std::invalid_argument);
}

TEST_CASE("log-probabilities of the raw logits", "[scheduler][logprobs]") {
  const auto v = varied_logits(1000);
  const auto lp = log_softmax(v);
  REQUIRE(lp.size() == v.size());
  long double max = *std::max_element(v.begin(), v.end()), sum = 0;
  for (float l : v) sum += std::exp(static_cast<long double>(l) - max);
  const long double lse = max + std::log(sum);
  CHECK(log_sum_exp(v) == Approx(static_cast<double>(lse)).epsilon(1e-12));
  double total = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    REQUIRE(lp[i] == Approx(static_cast<double>(v[i] - lse)).margin(1e-5));
    total += std::exp(static_cast<double>(lp[i]));
  }
  CHECK(total == Approx(1.0).epsilon(1e-5));

  const auto top = top_logprobs(v, 5);
  REQUIRE(top.size() == 5);
  std::vector<std::size_t> order(v.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] > v[b]; });
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(top[i].id == static_cast<std::int32_t>(order[i]));
    CHECK(top[i].logprob == lp[order[i]]);
  }
  CHECK(top_logprobs(std::vector<float>{1.0f, 1.0f}, 10).size() == 2);
  const auto uniform = top_logprobs(std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f}, 2);
  CHECK(uniform[0].id == 0);
  CHECK(uniform[1].id == 1);
  CHECK(uniform[0].logprob == Approx(std::log(0.25)));
  const auto banned = log_softmax(std::vector<float>{neg_inf, 0.0f, std::nanf("")});
  CHECK(banned[0] == neg_inf);
  CHECK(banned[1] == 0.0f);
  CHECK(banned[2] == neg_inf);
  CHECK(log_sum_exp(std::vector<float>{}) == -std::numeric_limits<double>::infinity());
}
