// Flash attention (attention_args::flash): its SIMD pieces against their scalar definitions, bit
// for bit, and both of its algorithms (key by key for short batches, 64 x 64 tiles from 64
// queries on) against attention computed in double precision, with grouped heads, sinks, a
// soft cap, sliding windows and sparse selections; the result must not depend on the thread
// count. The reference engine's own flash-attention logits are checked in tests/golden.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_kernels.hpp"
#include "ref_math.hpp"
#include "ref_quant.hpp"
#include "simd_math.hpp"
#include "spite/core/half.hpp"
#include "spite/core/thread_pool.hpp"

namespace {

namespace cpu = spite::dispatch::cpu;
using spite::fp16_to_fp32;
using spite::fp32_to_fp16;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

struct problem {
  std::int64_t n_tokens, n_head, n_head_kv, dk, dv, n_kv;
  std::vector<float> q;
  std::vector<std::uint16_t> k, v;
  std::vector<std::int32_t> q_pos, kv_pos;
  std::vector<float> sinks;
  std::vector<std::uint8_t> allowed;
  float scale = 0.125f, softcap = 0.0f;
  spite::dispatch::attention_mask mask{};

  problem(std::int64_t tokens, std::int64_t head, std::int64_t head_kv, std::int64_t dk_, std::int64_t dv_,
          std::int64_t cached, std::mt19937& rng)
      : n_tokens(tokens), n_head(head), n_head_kv(head_kv), dk(dk_), dv(dv_), n_kv(cached) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    q.resize(static_cast<std::size_t>(n_tokens * n_head * dk));
    for (auto& x : q) x = 2.0f * normal(rng);
    k.resize(static_cast<std::size_t>(n_kv * n_head_kv * dk));
    for (auto& x : k) x = fp32_to_fp16(normal(rng));
    v.resize(static_cast<std::size_t>(n_kv * n_head_kv * dv));
    for (auto& x : v) x = fp32_to_fp16(normal(rng));
    // The queries are the last n_tokens of the cached positions (a prompt or decode step).
    for (std::int64_t j = 0; j < n_kv; ++j) kv_pos.push_back(static_cast<std::int32_t>(j));
    for (std::int64_t t = 0; t < n_tokens; ++t) q_pos.push_back(static_cast<std::int32_t>(n_kv - n_tokens + t));
  }

  spite::dispatch::attention_args args(float* out, bool flash) const {
    spite::dispatch::attention_args a{};
    a.q = q.data();
    a.out = out;
    a.n_tokens = n_tokens;
    a.n_head = n_head;
    a.n_head_kv = n_head_kv;
    a.head_dim = dk;
    a.head_dim_v = dv;
    a.q_pos = q_pos.data();
    a.k = k.data();
    a.v = v.data();
    a.kv_pos = kv_pos.data();
    a.n_kv = n_kv;
    a.scale = scale;
    a.softcap = softcap;
    a.sinks = sinks.empty() ? nullptr : sinks.data();
    a.mask = mask;
    a.key_allowed = allowed.empty() ? nullptr : allowed.data();
    a.flash = flash;
    return a;
  }

  bool masked(std::int64_t t, std::int64_t j) const {
    const std::int32_t qp = q_pos[static_cast<std::size_t>(t)], kp = kv_pos[static_cast<std::size_t>(j)];
    if (kp > qp) return true;
    if (!allowed.empty() && allowed[static_cast<std::size_t>(t * n_kv + j)] == 0) return true;
    if (mask.swa_window > 0) return qp - kp >= mask.swa_window;
    return false;
  }

  // Softmax attention in double precision over the f16 keys and values (the query unrounded).
  std::vector<double> exact() const {
    std::vector<double> out(static_cast<std::size_t>(n_tokens * n_head * dv), 0.0);
    const std::int64_t group = n_head / n_head_kv;
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      for (std::int64_t h = 0; h < n_head; ++h) {
        const std::int64_t hk = h / group;
        std::vector<double> s(static_cast<std::size_t>(n_kv), -INFINITY);
        double m = sinks.empty() ? -INFINITY : sinks[static_cast<std::size_t>(h)];
        for (std::int64_t j = 0; j < n_kv; ++j) {
          if (masked(t, j)) continue;
          double d = 0;
          for (std::int64_t i = 0; i < dk; ++i) {
            d += static_cast<double>(q[static_cast<std::size_t>((t * n_head + h) * dk + i)]) *
                 fp16_to_fp32(k[static_cast<std::size_t>((j * n_head_kv + hk) * dk + i)]);
          }
          d *= scale;
          if (softcap > 0) d = softcap * std::tanh(d / softcap);
          s[static_cast<std::size_t>(j)] = d;
          m = std::max(m, d);
        }
        double z = sinks.empty() ? 0.0 : std::exp(sinks[static_cast<std::size_t>(h)] - m);
        for (double& x : s) {
          x = std::exp(x - m);
          z += x;
        }
        for (std::int64_t j = 0; j < n_kv; ++j) {
          for (std::int64_t i = 0; i < dv; ++i) {
            out[static_cast<std::size_t>((t * n_head + h) * dv + i)] +=
                s[static_cast<std::size_t>(j)] / z * fp16_to_fp32(v[static_cast<std::size_t>((j * n_head_kv + hk) * dv + i)]);
          }
        }
      }
    }
    return out;
  }
};

// The kernels may read key_lookahead entries past a key list's end (to fetch rows ahead), as
// the attention pads its lists: entries that repeat the last key.
void pad_keys(std::vector<std::int32_t>& keys) { keys.resize(keys.size() + cpu::key_lookahead, keys.back()); }

std::vector<float> run(const problem& p, bool flash, int threads) {
  std::vector<float> out(static_cast<std::size_t>(p.n_tokens * p.n_head * p.dv), NAN);
  spite::thread_pool pool(threads);
  cpu::attention(p.args(out.data(), flash), pool);
  return out;
}

double max_error(const std::vector<float>& ours, const std::vector<double>& exact) {
  double e = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) e = std::max(e, std::fabs(ours[i] - exact[i]));
  return e;
}

// Flash against exact (the f16 accumulator of short batches costs a few 1e-3), both thread
// counts giving the same bits, and the reference attention of the other path as close.
void check(const problem& p, double tolerance) {
  const auto want = p.exact();
  const auto one = run(p, true, 1), three = run(p, true, 3);
  for (std::size_t i = 0; i < one.size(); ++i) REQUIRE(same_bits(one[i], three[i]));
  CHECK(max_error(one, want) < tolerance);
  CHECK(max_error(run(p, false, 2), want) < 5e-3);
}

}  // namespace

TEST_CASE("the flash-attention SIMD pieces give their scalar definitions' bits") {
  const auto* simd = cpu::fast_math();
  if (simd == nullptr) {
    WARN("no SIMD attention on this processor; nothing to compare");
    return;
  }
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const std::int64_t n : {16, 40, 64, 72, 128, 200, 576}) {
    std::vector<std::uint16_t> a(static_cast<std::size_t>(n));
    std::vector<float> b(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = fp32_to_fp16(normal(rng) * (i % 11 == 0 ? 1e-6f : 1.0f));
      b[i] = fp16_to_fp32(fp32_to_fp16(normal(rng)));
    }
    // The dot product: 64-element blocks in four groups of 16 lanes, folded, then the rest in double.
    const std::int64_t np = n / 64 * 64;
    double want = 0;
    if (np > 0) {
      float g[4][16] = {};
      for (std::int64_t i = 0; i < np; ++i) g[(i / 16) % 4][i % 16] += fp16_to_fp32(a[static_cast<std::size_t>(i)]) * b[static_cast<std::size_t>(i)];
      float lanes[16];
      for (int l = 0; l < 16; ++l) lanes[l] = (g[0][l] + g[2][l]) + (g[1][l] + g[3][l]);
      want = cpu::reduce16(lanes);
    }
    for (std::int64_t i = np; i < n; ++i) want += fp16_to_fp32(a[static_cast<std::size_t>(i)]) * b[static_cast<std::size_t>(i)];
    CHECK(same_bits(simd->dot_f16_blocks(a.data(), b.data(), n), static_cast<float>(want)));
  }
  // The scores of a run of cached keys: each the bits of its own dot product, for head sizes on
  // and off the 64-element path (40, 96, 200, 256: four keys at a time, their tails' additions in
  // double side by side; 13 key by key), runs not a multiple of its 4 keys, and rows of zeros.
  // Magnitudes from 2^-20 to 2^12 (queries 2^-8 to 2^8), so that the float lane sums round and
  // their order shows in the bits (the double tail's order rarely survives its final rounding
  // to float: swapping two of its additions passed these checks).
  std::uniform_int_distribution<int> row_scale(-20, 12), query_scale(-8, 8);
  for (const std::int64_t n : {64, 40, 128, 96, 256, 200, 13}) {
    const std::int64_t stride = 3 * n + 7, n_rows = 50;
    std::vector<std::uint16_t> rows(static_cast<std::size_t>(n_rows * stride));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      rows[i] = fp32_to_fp16(i / static_cast<std::size_t>(stride) % 7 == 3 ? 0.0f : std::ldexp(normal(rng), row_scale(rng)));
    }
    std::vector<float> b(static_cast<std::size_t>(n));
    for (auto& x : b) x = fp16_to_fp32(fp32_to_fp16(std::ldexp(normal(rng), query_scale(rng))));
    std::vector<std::int32_t> keys;
    for (std::int32_t k = 0; k < 23; ++k) keys.push_back((k * 17) % n_rows);
    const std::size_t count = keys.size();
    pad_keys(keys);
    std::vector<float> got(count);
    simd->dot_f16_rows(rows.data() + 5, stride, keys.data(), static_cast<std::int64_t>(count), b.data(), n, got.data());
    INFO("rows of " << n);
    for (std::size_t i = 0; i < count; ++i) {
      CHECK(same_bits(got[i], simd->dot_f16_blocks(rows.data() + 5 + keys[i] * stride, b.data(), n)));
    }
  }
  // The C library's expf over the non-positive floats: every 331st bit pattern from -0 down to
  // -inf, plus the edges (underflow to subnormals and to zero).
  {
    std::vector<float> x, y;
    for (std::uint64_t u = 0x80000000u; u <= 0xff800000u; u += 331) {
      float f;
      const auto bits = static_cast<std::uint32_t>(u);
      std::memcpy(&f, &bits, sizeof f);
      x.push_back(f);
    }
    for (const float f : {0.0f, -0.0f, -87.3f, -0x1.9fe368p6f, -0x1.9fe366p6f, -104.0f, -1e-30f, -INFINITY}) x.push_back(f);
    y.resize(x.size());
    simd->exp_nonpositive(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
    std::size_t differ = 0;
    for (std::size_t i = 0; i < x.size(); ++i) differ += !same_bits(y[i], std::exp(x[i]));
    CHECK(differ == 0);
  }
  // The f16 accumulator: keys in a scattered order, rescales now and then, head sizes on and
  // off the 64-, 32-, 16- and 8-dimension blocks; the AVX-512 registers where the processor has
  // them, and the AVX2 ones.
  for (const bool avx512 : {true, false})
  for (const std::int64_t dv : {64, 128, 72, 13, 200, 96, 80, 120}) {
    spite::dispatch::cpu::set_avx512(avx512);
    INFO("AVX-512 " << (avx512 ? "allowed" : "off"));
    const std::int64_t n_keys = 150, stride = dv + 5;
    std::vector<std::uint16_t> values(static_cast<std::size_t>(200 * stride));
    for (auto& x : values) x = fp32_to_fp16(normal(rng));
    std::vector<std::int32_t> keys;
    std::vector<float> weight, rescale;
    for (std::int64_t i = 0; i < n_keys; ++i) {
      keys.push_back(static_cast<std::int32_t>((i * 37) % 200));
      const bool new_max = i % 9 == 0;
      weight.push_back(new_max ? 1.0f : std::exp(-std::fabs(normal(rng))));
      rescale.push_back(new_max ? (i == 0 ? 0.0f : std::exp(-std::fabs(normal(rng)))) : 1.0f);
    }
    pad_keys(keys);
    std::vector<float> out(static_cast<std::size_t>(dv)), want(out.size());
    for (std::int64_t d = 0; d < dv; ++d) {
      std::uint16_t acc = 0;
      for (std::int64_t i = 0; i < n_keys; ++i) {
        const std::size_t k = static_cast<std::size_t>(i);
        if (rescale[k] != 1.0f) acc = fp32_to_fp16(fp16_to_fp32(acc) * rescale[k]);
        acc = fp32_to_fp16(std::fma(fp16_to_fp32(values[static_cast<std::size_t>(keys[k] * stride + d)]), weight[k], fp16_to_fp32(acc)));
      }
      want[static_cast<std::size_t>(d)] = fp16_to_fp32(acc);
    }
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n_keys; ++i) sum = std::fma(sum, rescale[static_cast<std::size_t>(i)], weight[static_cast<std::size_t>(i)]);
    INFO("dv " << dv);
    CHECK(same_bits(simd->accumulate_f16(out.data(), values.data(), stride, keys.data(), weight.data(), rescale.data(), n_keys, dv, 0.0f),
                    sum));
    for (std::size_t d = 0; d < out.size(); ++d) CHECK(same_bits(out[d], want[d]));
    // The same keys in three calls, each going on from the accumulator and sum the last left.
    std::vector<float> resumed(out.size(), 0.0f);
    float part_sum = 0.0f;
    for (const auto [i0, i1] : {std::array<std::int64_t, 2>{0, 41}, {41, 100}, {100, n_keys}}) {
      const auto at = static_cast<std::size_t>(i0);
      part_sum = simd->accumulate_f16(resumed.data(), values.data(), stride, keys.data() + at, weight.data() + at, rescale.data() + at,
                                      i1 - i0, dv, part_sum);
    }
    CHECK(same_bits(part_sum, sum));
    for (std::size_t d = 0; d < out.size(); ++d) CHECK(same_bits(resumed[d], want[d]));
  }
  // Several heads of a group over the same keys at once: each head's accumulator and sum as
  // accumulate_f16 leaves them for it alone. AVX-512: 7 heads take the 4-, 2- and 1-head paths
  // (128 dimensions: 2 + 2 + 2 + 1);
  // AVX2 (heads of whole 32-dimension blocks): 7 = 3 + 2 + 2, 8 = 3 + 3 + 2, 5 = 3 + 2, 1 alone.
  if (simd->accumulate_f16_heads != nullptr) {
    for (const bool avx512 : {true, false})
    for (const std::int64_t dv : {64, 72, 128, 96})
    for (const std::int64_t heads : {7, 8, 5, 1}) {
      spite::dispatch::cpu::set_avx512(avx512);
      INFO("AVX-512 " << (avx512 ? "allowed" : "off") << ", dv " << dv << ", heads " << heads);
      const std::int64_t n_keys = 100, stride = 4 * dv + 3;
      std::vector<std::uint16_t> values(static_cast<std::size_t>(120 * stride));
      for (auto& x : values) x = fp32_to_fp16(normal(rng));
      std::vector<std::int32_t> keys;
      for (std::int64_t i = 0; i < n_keys; ++i) keys.push_back(static_cast<std::int32_t>((i * 53) % 120));
      pad_keys(keys);
      std::vector<float> weight(static_cast<std::size_t>(heads * n_keys)), rescale(weight.size());
      for (std::int64_t h = 0; h < heads; ++h) {
        for (std::int64_t i = 0; i < n_keys; ++i) {
          const bool new_max = (i + h) % 7 == 0;
          const auto k = static_cast<std::size_t>(h * n_keys + i);
          weight[k] = new_max ? 1.0f : std::exp(-std::fabs(normal(rng)));
          rescale[k] = new_max ? std::exp(-std::fabs(normal(rng))) : 1.0f;
        }
      }
      // Accumulators and sums already under way, as a later block of keys finds them.
      std::vector<float> start(static_cast<std::size_t>(heads * dv)), sums(static_cast<std::size_t>(heads));
      for (auto& x : start) x = fp16_to_fp32(fp32_to_fp16(normal(rng)));
      for (auto& x : sums) x = std::fabs(normal(rng));
      std::vector<float> want = start, want_sums = sums, got = start, got_sums = sums;
      for (std::int64_t h = 0; h < heads; ++h) {
        want_sums[static_cast<std::size_t>(h)] =
            simd->accumulate_f16(want.data() + h * dv, values.data(), stride, keys.data(), weight.data() + h * n_keys,
                                 rescale.data() + h * n_keys, n_keys, dv, sums[static_cast<std::size_t>(h)]);
      }
      simd->accumulate_f16_heads(got.data(), values.data(), stride, keys.data(), weight.data(), rescale.data(), n_keys, n_keys,
                                 dv, got_sums.data(), heads);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < want.size(); ++i) differ += !same_bits(want[i], got[i]);
      for (std::size_t h = 0; h < sums.size(); ++h) differ += !same_bits(want_sums[h], got_sums[h]);
      CHECK(differ == 0);
    }
  }
  // Several heads' scores over the same keys at once: each as dot_f16_rows gives it for that
  // head alone (13 keys: whole groups of 4 and what is left; 9 heads: AVX-512's groups of 4 heads
  // and what is left, 7 and 2 its pairs of heads; 20: AVX2's runs of 16 heads and what is left;
  // rows of 64 and 128 elements, which AVX-512 takes several heads at a time, and of 72).
  if (simd->dot_f16_rows_heads != nullptr) {
    for (const bool avx512 : {true, false})
    for (const std::int64_t n : {64, 128, 72, 256})
    for (const std::int64_t heads : {9, 7, 2, 20, 1}) {
      spite::dispatch::cpu::set_avx512(avx512);
      INFO("AVX-512 " << (avx512 ? "allowed" : "off") << ", n " << n << ", heads " << heads);
      const std::int64_t stride = 3 * n + 5, count = 13;
      std::vector<std::uint16_t> rows(static_cast<std::size_t>(40 * stride));
      for (auto& x : rows) x = fp32_to_fp16(normal(rng) * (normal(rng) > 2.0f ? 300.0f : 1.0f));
      std::vector<std::int32_t> keys;
      for (std::int64_t i = 0; i < count; ++i) keys.push_back(static_cast<std::int32_t>((i * 17) % 40));
      pad_keys(keys);
      std::vector<float> q(static_cast<std::size_t>(heads * n));
      for (auto& x : q) x = fp16_to_fp32(fp32_to_fp16(normal(rng)));
      const std::int64_t out_stride = count + 3;
      std::vector<float> want(static_cast<std::size_t>(heads * out_stride), -1.0f), got = want;
      for (std::int64_t h = 0; h < heads; ++h) {
        simd->dot_f16_rows(rows.data(), stride, keys.data(), count, q.data() + h * n, n, want.data() + h * out_stride);
      }
      simd->dot_f16_rows_heads(rows.data(), stride, keys.data(), count, q.data(), n, got.data(), out_stride, heads);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < want.size(); ++i) differ += !same_bits(want[i], got[i]);
      CHECK(differ == 0);
    }
  }
  spite::dispatch::cpu::set_avx512(true);
  // The GEMM: every element one chain of fused multiply-adds from its old value, odd shapes.
  for (const auto [m, k, n] : {std::array<std::int64_t, 3>{64, 64, 64}, {7, 40, 64}, {64, 64, 24}, {3, 5, 13}, {5, 576, 512}}) {
    std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n)), c(static_cast<std::size_t>(m * n));
    for (auto& x : a) x = normal(rng);
    for (auto& x : b) x = normal(rng);
    for (auto& x : c) x = normal(rng);
    std::vector<float> expected = c;
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        float s = expected[static_cast<std::size_t>(i * n + j)];
        for (std::int64_t kk = 0; kk < k; ++kk) s = std::fma(a[static_cast<std::size_t>(i * k + kk)], b[static_cast<std::size_t>(kk * n + j)], s);
        expected[static_cast<std::size_t>(i * n + j)] = s;
      }
    }
    simd->gemm_acc(c.data(), a.data(), b.data(), m, k, n);
    INFO("gemm " << m << " x " << k << " x " << n);
    for (std::size_t i = 0; i < c.size(); ++i) REQUIRE(same_bits(c[i], expected[i]));
  }
  // A tile row's scale, mask and maximum, and its exps in one call: the scalar loops' bits
  // (the maximum's value; scores that are not NaN), both instruction sets.
  if (simd->scale_mask_max != nullptr && simd->exp_row != nullptr) {
    for (const bool avx512 : {true, false}) {
      spite::dispatch::cpu::set_avx512(avx512);
      for (int round = 0; round < 50; ++round) {
        INFO("AVX-512 " << (avx512 ? "allowed" : "off") << ", round " << round);
        std::vector<float> row(64), want(64);
        std::vector<std::uint8_t> visible(64);
        for (std::size_t j = 0; j < row.size(); ++j) {
          row[j] = normal(rng) * 8.0f;
          visible[j] = (j * 7 + static_cast<std::size_t>(round)) % 5 != 0 ? 1 : 0;
        }
        const bool masked = round % 2 == 0;
        float max_want = -INFINITY;
        for (std::size_t j = 0; j < row.size(); ++j) {
          want[j] = masked && visible[j] == 0 ? -INFINITY : row[j] * 0.125f;
          max_want = std::max(max_want, want[j]);
        }
        std::vector<float> got = row;
        CHECK(simd->scale_mask_max(got.data(), 64, 0.125f, masked ? visible.data() : nullptr) == max_want);
        std::size_t differ = 0;
        for (std::size_t j = 0; j < row.size(); ++j) differ += !same_bits(got[j], want[j]);
        CHECK(differ == 0);
        double sum_want = 0.0;
        for (std::int64_t j = 0; j < 64; j += 16) {
          for (int l = 0; l < 16; ++l) want[static_cast<std::size_t>(j + l)] = cpu::ref_expf(want[static_cast<std::size_t>(j + l)] - max_want);
          sum_want += cpu::reduce16(want.data() + j);
        }
        CHECK(simd->exp_row(got.data(), 64, max_want) == sum_want);
        differ = 0;
        for (std::size_t j = 0; j < row.size(); ++j) differ += !same_bits(got[j], want[j]);
        CHECK(differ == 0);
      }
    }
    spite::dispatch::cpu::set_avx512(true);
  }
  // The softmax's pass over the scores: rising runs (a new maximum in most lanes), ties with the
  // maximum, signed zeros, infinities, a NaN, and lengths off its 8-key chunks, from -inf and
  // from a running maximum.
  if (simd->online_max != nullptr) {
    const float inf = std::numeric_limits<float>::infinity();
    for (const std::int64_t n : {1, 7, 8, 13, 64, 300}) {
      for (int pattern = 0; pattern < 5; ++pattern) {
        std::vector<float> scores(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) {
          float x = normal(rng) * 4.0f;
          if (pattern == 1) x = static_cast<float>(i) * 0.25f - 20.0f + normal(rng) * 0.1f;  // mostly rising
          if (pattern == 2) x = static_cast<float>(i % 5 == 0 ? 3 : (i % 3 == 0 ? -1 : 1)) * (i % 2 == 0 ? 0.0f : 1.0f);  // ties, zeros
          if (pattern == 2 && i % 7 == 1) x = -0.0f;
          if (pattern == 3 && i % 11 == 4) x = i % 2 == 0 ? inf : -inf;
          if (pattern == 4 && i == n / 2) x = std::numeric_limits<float>::quiet_NaN();
          scores[static_cast<std::size_t>(i)] = x;
        }
        for (const float start : {-inf, 2.5f}) {
          INFO("online max, n " << n << ", pattern " << pattern << ", from " << start);
          std::vector<float> w_want = scores, w_got = scores;
          std::vector<float> r_want(scores.size(), -7.0f), r_got = r_want;
          const float m_want = cpu::online_max_scalar(w_want.data(), r_want.data(), n, 0.125f, start);
          const float m_got = simd->online_max(w_got.data(), r_got.data(), n, 0.125f, start);
          CHECK(same_bits(m_got, m_want));
          std::size_t differ = 0;
          for (std::size_t i = 0; i < scores.size(); ++i) differ += !same_bits(w_got[i], w_want[i]) + !same_bits(r_got[i], r_want[i]);
          CHECK(differ == 0);
        }
      }
    }
  }
}

TEST_CASE("flash attention of short batches matches exact attention, whatever the thread count") {
  std::mt19937 rng(17);
  SECTION("decode, grouped heads") { check(problem(1, 8, 2, 64, 64, 300, rng), 1e-2); }
  SECTION("a few tokens, head sizes off the 64-element blocks") { check(problem(5, 4, 4, 40, 24, 77, rng), 1e-2); }
  SECTION("sinks and a soft cap") {
    problem p(9, 4, 1, 64, 64, 130, rng);
    p.sinks = {0.5f, 3.0f, -2.0f, 8.0f};
    p.softcap = 5.0f;
    p.scale = 1.0f;
    check(p, 1e-2);
  }
  SECTION("a sliding window") {
    problem p(3, 2, 2, 32, 32, 200, rng);
    p.mask.swa_window = 17;
    check(p, 1e-2);
  }
}

TEST_CASE("flash attention of 64 queries and more goes by tiles and matches exact attention") {
  std::mt19937 rng(23);
  SECTION("a prompt over an odd number of keys") { check(problem(130, 4, 2, 64, 64, 130, rng), 1e-4); }
  SECTION("a batch past cached tokens, latent-style head sizes") { check(problem(64, 2, 1, 96, 80, 201, rng), 1e-4); }
  SECTION("sinks, a soft cap, a window and a sparse selection") {
    problem p(70, 4, 4, 32, 32, 150, rng);
    p.sinks = {1.0f, -1.0f, 4.0f, 0.0f};
    p.softcap = 10.0f;
    p.scale = 1.0f;  // the two attentions apply a scale other than 1 on different sides of the cap
    p.mask.swa_window = 40;
    p.allowed.resize(static_cast<std::size_t>(p.n_tokens * p.n_kv));
    for (std::size_t i = 0; i < p.allowed.size(); ++i) p.allowed[i] = (i * 7919) % 5 != 0;
    check(p, 1e-4);
  }
  SECTION("rows that see no key at all give zeros") {
    problem p(64, 1, 1, 16, 16, 64, rng);
    p.allowed.assign(static_cast<std::size_t>(p.n_tokens * p.n_kv), 1);
    for (std::int64_t j = 0; j < p.n_kv; ++j) p.allowed[static_cast<std::size_t>(3 * p.n_kv + j)] = 0;
    const auto out = run(p, true, 2);
    for (std::int64_t d = 0; d < p.dv; ++d) CHECK(out[static_cast<std::size_t>(3 * p.dv + d)] == 0.0f);
  }
}

TEST_CASE("attention calls handed over together give each call's own bits") {
  std::mt19937 rng(29);
  // Decode steps of sequences over caches of their own lengths, a short batch with sinks, and
  // a sliding window: these go query by query through flash attention as one job.
  std::vector<problem> problems;
  problems.emplace_back(1, 8, 2, 64, 64, 300, rng);
  problems.emplace_back(1, 8, 2, 64, 64, 1, rng);
  problems.emplace_back(1, 8, 2, 64, 64, 77, rng);
  problems.emplace_back(3, 4, 1, 64, 64, 130, rng);
  problems.back().sinks = {0.5f, 3.0f, -2.0f, 8.0f};
  problems.emplace_back(2, 2, 2, 32, 32, 200, rng);
  problems.back().mask.swa_window = 17;
  const auto together = [&](const std::vector<problem>& ps, bool flash, int threads) {
    std::vector<std::vector<float>> outs;
    std::vector<spite::dispatch::attention_args> calls;
    for (const problem& p : ps) outs.emplace_back(static_cast<std::size_t>(p.n_tokens * p.n_head * p.dv), NAN);
    for (std::size_t i = 0; i < ps.size(); ++i) calls.push_back(ps[i].args(outs[i].data(), flash));
    spite::thread_pool pool(threads);
    cpu::attention_many(calls, pool);
    return outs;
  };
  const auto each_alone_matches = [&](const std::vector<problem>& ps, bool flash) {
    for (const int threads : {1, 3}) {
      const auto outs = together(ps, flash, threads);
      for (std::size_t i = 0; i < ps.size(); ++i) {
        const auto alone = run(ps[i], flash, 1);
        INFO("call " << i << ", flash " << flash << ", " << threads << " threads");
        std::size_t differ = 0;
        for (std::size_t j = 0; j < alone.size(); ++j) differ += !same_bits(outs[i][j], alone[j]);
        CHECK(differ == 0);
      }
    }
  };
  SECTION("calls that go query by query") { each_alone_matches(problems, true); }
  SECTION("without flash attention, call by call") { each_alone_matches(problems, false); }
  SECTION("with a call of 64 queries, which goes by tiles") {
    problems.emplace_back(64, 2, 1, 64, 64, 100, rng);
    each_alone_matches(problems, true);
  }
}
