// The i-quant and ternary dot products of ref_dot_iquants.cpp, shared with their SIMD version
// (simd_x86_iquants.cpp): the block decoders and the reference's per-super-block shape, over a
// lane policy L that computes the 8 integer lanes and the float accumulation (scalar_lanes in
// ref_dot_iquants.cpp; an AVX2 one gives the same exact integers and the same fmas).
//
// Types: IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_XS, TQ1_0, TQ2_0.
//
// The reference quantizes each activation row to Q8_K (its scalar quantizer is the x86 one) and
// runs its AVX2 vec_dot kernel one row at a time (there is no AVX-512 variant of these kernels).
// All of them share one shape per 256-element super-block:
//   - 8 int32 lanes; lane k gathers elements 4k..4k+3 of every 32-element sub-block (the
//     maddubs / madd pairing), each sub-block's part weighted by its integer sub-scale (per 32 or
//     per 16 elements: lanes 0..3 are the first 16, lanes 4..7 the second). Integer sums are
//     exact, so only that grouping matters.
//   - the lanes are converted to float and accumulated as acc[k] = fma(d, lane[k], acc[k]) with
//     d = fp16 scale * activation scale (a float product).
//   - the result is the 8-lane horizontal sum (reduce8) times a constant of the type (1/8, 1/4
//     or 1), plus, for IQ1_S / IQ1_M, a separately accumulated delta term times 1/8.
// The ternary kernels accumulate unsigned digits (0..2) in int16 lanes and subtract the
// activation block sums, which changes the lane grouping of the -1 offset (the ternary lanes of a policy).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../../gguf/src/quants/iq_tables.hpp"
#include "ref_quant.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu::iquant {

namespace iq = gguf::quants::iq;
inline constexpr int qk = 256;

inline std::uint8_t grid_byte(std::uint64_t entry, int j) { return static_cast<std::uint8_t>(entry >> (8 * j)); }

inline std::uint16_t le16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

inline std::uint32_t le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

template <typename T>
inline const std::uint8_t* bytes_of(const T* p) {
  return reinterpret_cast<const std::uint8_t*>(p);
}

// One super-block decoded to integers: signed weight values and the integer sub-scale of each
// 16 elements (a per-32 scale is stored twice).
struct decoded {
  std::int8_t w[qk];
  int scale16[qk / 16];
};

// Signs of a group of 8 from a 7-bit index (the 8th makes the count of negatives even).
inline void apply_signs(std::int8_t* w, std::uint8_t signs) {
  for (int j = 0; j < 8; ++j) {
    if (signs & iq::kmask_iq2xs[j]) w[j] = static_cast<std::int8_t>(-w[j]);
  }
}

// ---- decoders (bit layouts as in gguf/src/quants/iquants.cpp)

inline void decode_iq2_xxs(const gguf::block_iq2_xxs& b, decoded& out) {
  const std::uint8_t* q = bytes_of(b.qs);
  for (int ib = 0; ib < 8; ++ib, q += 8) {
    const std::uint32_t meta = le32(q + 4);
    out.scale16[2 * ib] = out.scale16[2 * ib + 1] = 2 * static_cast<int>(meta >> 28) + 1;
    for (int l = 0; l < 4; ++l) {
      std::int8_t* w = out.w + 32 * ib + 8 * l;
      const std::uint64_t g = iq::iq2xxs_grid[q[l]];
      for (int j = 0; j < 8; ++j) w[j] = static_cast<std::int8_t>(grid_byte(g, j));
      apply_signs(w, iq::ksigns_iq2xs[(meta >> (7 * l)) & 127]);
    }
  }
}

inline void decode_iq2_xs(const gguf::block_iq2_xs& b, decoded& out) {
  const std::uint8_t* q = bytes_of(b.qs);
  for (int ib = 0; ib < 8; ++ib) {
    out.scale16[2 * ib] = 2 * (b.scales[ib] & 0xf) + 1;
    out.scale16[2 * ib + 1] = 2 * (b.scales[ib] >> 4) + 1;
    for (int l = 0; l < 4; ++l) {
      std::int8_t* w = out.w + 32 * ib + 8 * l;
      const std::uint16_t code = le16(q + 2 * (4 * ib + l));
      const std::uint64_t g = iq::iq2xs_grid[code & 511];
      for (int j = 0; j < 8; ++j) w[j] = static_cast<std::int8_t>(grid_byte(g, j));
      apply_signs(w, iq::ksigns_iq2xs[code >> 9]);
    }
  }
}

inline void decode_iq2_s(const gguf::block_iq2_s& b, decoded& out) {
  const std::uint8_t* idx_lo = b.qs;
  const std::uint8_t* signs = b.qs + qk / 8;
  for (int ib = 0; ib < 8; ++ib, idx_lo += 4, signs += 4) {
    out.scale16[2 * ib] = 2 * (b.scales[ib] & 0xf) + 1;
    out.scale16[2 * ib + 1] = 2 * (b.scales[ib] >> 4) + 1;
    for (int l = 0; l < 4; ++l) {
      std::int8_t* w = out.w + 32 * ib + 8 * l;
      const int hi = (b.qh[ib] >> (2 * l)) & 3;
      const std::uint64_t g = iq::iq2s_grid[idx_lo[l] | (hi << 8)];
      for (int j = 0; j < 8; ++j) w[j] = static_cast<std::int8_t>(grid_byte(g, j));
      apply_signs(w, signs[l]);
    }
  }
}

inline void decode_iq3_xxs(const gguf::block_iq3_xxs& b, decoded& out) {
  const std::uint8_t* q = b.qs;
  const std::uint8_t* meta_bytes = b.qs + qk / 4;
  for (int ib = 0; ib < 8; ++ib, q += 8) {
    const std::uint32_t meta = le32(meta_bytes + 4 * ib);
    out.scale16[2 * ib] = out.scale16[2 * ib + 1] = 2 * static_cast<int>(meta >> 28) + 1;
    for (int l = 0; l < 4; ++l) {
      std::int8_t* w = out.w + 32 * ib + 8 * l;
      const std::uint32_t g0 = iq::iq3xxs_grid[q[2 * l]], g1 = iq::iq3xxs_grid[q[2 * l + 1]];
      for (int j = 0; j < 4; ++j) {
        w[j] = static_cast<std::int8_t>(grid_byte(g0, j));
        w[j + 4] = static_cast<std::int8_t>(grid_byte(g1, j));
      }
      apply_signs(w, iq::ksigns_iq2xs[(meta >> (7 * l)) & 127]);
    }
  }
}

inline void decode_iq3_s(const gguf::block_iq3_s& b, decoded& out) {
  for (int ib = 0; ib < 8; ++ib) {
    const int s = (b.scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
    out.scale16[2 * ib] = out.scale16[2 * ib + 1] = 2 * s + 1;
    const std::uint8_t* q = b.qs + 8 * ib;
    const std::uint8_t* signs = b.signs + 4 * ib;
    const int qh = b.qh[ib];
    for (int l = 0; l < 4; ++l) {
      std::int8_t* w = out.w + 32 * ib + 8 * l;
      const std::uint32_t g0 = iq::iq3s_grid[q[2 * l] | (((qh >> (2 * l)) & 1) << 8)];
      const std::uint32_t g1 = iq::iq3s_grid[q[2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8)];
      for (int j = 0; j < 4; ++j) {
        w[j] = static_cast<std::int8_t>(grid_byte(g0, j));
        w[j + 4] = static_cast<std::int8_t>(grid_byte(g1, j));
      }
      apply_signs(w, signs[l]);
    }
  }
}

inline void decode_iq4_xs(const gguf::block_iq4_xs& b, decoded& out) {
  const std::uint16_t scales_h = le16(bytes_of(&b.scales_h));
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((scales_h >> (2 * ib)) & 3) << 4);
    out.scale16[2 * ib] = out.scale16[2 * ib + 1] = ls - 32;
    const std::uint8_t* q = b.qs + 16 * ib;
    for (int j = 0; j < 16; ++j) {
      out.w[32 * ib + j] = iq::kvalues_iq4nl[q[j] & 0xf];
      out.w[32 * ib + j + 16] = iq::kvalues_iq4nl[q[j] >> 4];
    }
  }
}

// IQ1_S: grid values (without the delta) and per-32 scales; the delta's sign per 32 goes to
// delta_sign.
inline void decode_iq1_s(const gguf::block_iq1_s& b, decoded& out, int* delta_sign) {
  const std::uint8_t* qh_bytes = bytes_of(b.qh);
  for (int ib = 0; ib < 8; ++ib) {
    const std::uint16_t qh = le16(qh_bytes + 2 * ib);
    out.scale16[2 * ib] = out.scale16[2 * ib + 1] = 2 * ((qh >> 12) & 7) + 1;
    delta_sign[ib] = (qh & 0x8000) ? -1 : 1;
    for (int l = 0; l < 4; ++l) {
      const std::uint64_t g = iq::iq1s_grid[b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
      for (int j = 0; j < 8; ++j) out.w[32 * ib + 8 * l + j] = static_cast<std::int8_t>(grid_byte(g, j));
    }
  }
}

// IQ1_M: grid values and per-16 scales in `grid`, the per-8 delta signs (+-1) in `delta` (same
// scales); returns the fp16 super-block scale bits.
inline std::uint16_t decode_iq1_m(const gguf::block_iq1_m& b, decoded& grid, decoded& delta) {
  std::uint16_t sc[4];
  for (int k = 0; k < 4; ++k) sc[k] = le16(b.scales + 2 * k);
  for (int ib = 0; ib < 8; ++ib) {
    const int shift = 6 * (ib % 2);
    grid.scale16[2 * ib] = delta.scale16[2 * ib] = 2 * ((sc[ib / 2] >> shift) & 7) + 1;
    grid.scale16[2 * ib + 1] = delta.scale16[2 * ib + 1] = 2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1;
    for (int l = 0; l < 4; ++l) {
      const int nibble = (b.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0xf;
      const std::uint64_t g = iq::iq1s_grid[b.qs[4 * ib + l] | ((nibble & 7) << 8)];
      for (int j = 0; j < 8; ++j) {
        grid.w[32 * ib + 8 * l + j] = static_cast<std::int8_t>(grid_byte(g, j));
        delta.w[32 * ib + 8 * l + j] = (nibble & 8) ? -1 : 1;
      }
    }
  }
  return static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
}

// Ternary digits t in {0, 1, 2} (weight t - 1), element order as the dequantizers write them.
inline int ternary_digit(std::uint8_t b, std::uint8_t pow3) {
  const auto shifted = static_cast<std::uint8_t>(b * pow3);
  return (shifted * 3) >> 8;
}
inline constexpr std::uint8_t k_pow3[5] = {1, 3, 9, 27, 81};

inline void digits_tq1_0(const gguf::block_tq1_0& b, std::uint8_t* t) {
  for (int k = 0; k < 5; ++k) {
    for (int m = 0; m < 32; ++m) t[32 * k + m] = static_cast<std::uint8_t>(ternary_digit(b.qs[m], k_pow3[k]));
  }
  for (int k = 0; k < 5; ++k) {
    for (int m = 0; m < 16; ++m) t[160 + 16 * k + m] = static_cast<std::uint8_t>(ternary_digit(b.qs[32 + m], k_pow3[k]));
  }
  for (int k = 0; k < 4; ++k) {
    for (int m = 0; m < 4; ++m) t[240 + 4 * k + m] = static_cast<std::uint8_t>(ternary_digit(b.qh[m], k_pow3[k]));
  }
}

inline void digits_tq2_0(const gguf::block_tq2_0& b, std::uint8_t* t) {
  for (int j = 0; j < qk / 4; j += 32) {
    for (int k = 0; k < 4; ++k) {
      for (int m = 0; m < 32; ++m) t[4 * j + 32 * k + m] = static_cast<std::uint8_t>((b.qs[j + m] >> (2 * k)) & 3);
    }
  }
}

template <class Block, float (*Dot)(const Block*, const gguf::block_q8_K*, std::int64_t)>
void matmul_q8_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk;
  std::vector<gguf::block_q8_K> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_K(x + t * w.in, xq.data() + t * nb, w.in);
  for_each_output(w.out, n_tokens, y, pool, [&](std::int64_t o, std::int64_t t) {
    return Dot(reinterpret_cast<const Block*>(w.row(o)), xq.data() + t * nb, nb);
  });
}


// ---- the dot products of one weight row with one Q8_K activation row. A type's block becomes
// a record (what its dot needs of it), and one loop per type takes the records from a
// `Records` source: decoded block by block from the row (the per-token dots), or from a row
// decoded once for a batch (record_matmuls: the decoders are scalar and cost more than a
// super-block's products).

struct plain_record {
  decoded b;
  float d;
};
struct iq1_s_record {
  decoded b;
  int delta_sign[8];
  float d;
};
struct iq1_m_record {
  decoded grid, delta;
  float d;
};
struct ternary_record {
  std::uint8_t t[qk];
  float d;
};

template <class Block, void (*Decode)(const Block&, decoded&)>
void record_plain(const Block& x, plain_record& r) {
  Decode(x, r.b);
  r.d = fp16_to_fp32(x.d);
}
inline void record_iq1_s(const gguf::block_iq1_s& x, iq1_s_record& r) {
  decode_iq1_s(x, r.b, r.delta_sign);
  r.d = fp16_to_fp32(x.d);
}
inline void record_iq1_m(const gguf::block_iq1_m& x, iq1_m_record& r) { r.d = fp16_to_fp32(decode_iq1_m(x, r.grid, r.delta)); }
template <class Block, void (*Digits)(const Block&, std::uint8_t*)>
void record_ternary(const Block& x, ternary_record& r) {
  Digits(x, r.t);
  r.d = fp16_to_fp32(x.d);
}

// Record sources: block i decoded on demand into one buffer, or a row's records decoded before.
template <class Record, class Block, void (*Make)(const Block&, Record&)>
struct decoding_records {
  const Block* x;
  mutable Record r;
  const Record& operator()(std::int64_t i) const {
    Make(x[i], r);
    return r;
  }
};
template <class Record>
struct stored_records {
  const Record* r;
  const Record& operator()(std::int64_t i) const { return r[i]; }
};

// Types whose whole block fits `decoded`, result = post * reduce8(acc).
template <class L, float Post, class Records>
float plain_dot(const Records& records, const gguf::block_q8_K* y, std::int64_t nb) {
  float acc[8] = {};
  int lane[8];
  for (std::int64_t i = 0; i < nb; ++i) {
    const plain_record& r = records(i);
    L::lanes(r.b, y[i].qs, lane);
    L::accumulate(acc, r.d * y[i].d, lane);
  }
  return Post * reduce8(acc);
}

template <class L, class Records>
float iq1_s_dot(const Records& records, const gguf::block_q8_K* y, std::int64_t nb) {
  float acc[8] = {};
  float acc1 = 0;
  int lane[8];
  for (std::int64_t i = 0; i < nb; ++i) {
    const iq1_s_record& r = records(i);
    L::lanes(r.b, y[i].qs, lane);
    int sumi1 = 0;
    for (int ib = 0; ib < 8; ++ib) sumi1 += (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]) * r.delta_sign[ib] * r.b.scale16[2 * ib];
    const float d = y[i].d * r.d;
    L::accumulate(acc, d, lane);
    acc1 = std::fma(d, static_cast<float>(sumi1), acc1);  // accum1 += d * sumi1 (contracted)
  }
  return std::fma(iq::iq1s_delta, acc1, reduce8(acc));
}

template <class L, class Records>
float iq1_m_dot(const Records& records, const gguf::block_q8_K* y, std::int64_t nb) {
  float acc1[8] = {}, acc2[8] = {};
  int lane1[8], lane2[8];
  for (std::int64_t i = 0; i < nb; ++i) {
    const iq1_m_record& r = records(i);
    L::lanes(r.grid, y[i].qs, lane1);
    L::lanes(r.delta, y[i].qs, lane2);
    const float d = y[i].d * r.d;
    L::accumulate(acc1, d, lane1);
    L::accumulate(acc2, d, lane2);
  }
  return std::fma(iq::iq1m_delta, reduce8(acc2), reduce8(acc1));
}

template <class L, class Records>
float ternary_dot(const Records& records, const gguf::block_q8_K* y, std::int64_t nb) {
  float acc[8] = {};
  int lane[8];
  for (std::int64_t i = 0; i < nb; ++i) {
    const ternary_record& r = records(i);
    L::ternary(r.t, y[i], lane);
    // sumf = _mm256_add_ps(_mm256_mul_ps(lanes, d), sumf): GCC contracts it into an FMA.
    L::accumulate(acc, y[i].d * r.d, lane);
  }
  return reduce8(acc);
}

// The per-token dots (one row, one activation row) and their twins over stored records.
template <class L, class Block, void (*Decode)(const Block&, decoded&), float Post>
float dot_plain(const Block* x, const gguf::block_q8_K* y, std::int64_t nb) {
  return plain_dot<L, Post>(decoding_records<plain_record, Block, record_plain<Block, Decode>>{x, {}}, y, nb);
}
template <class L>
float dot_iq1_s(const gguf::block_iq1_s* x, const gguf::block_q8_K* y, std::int64_t nb) {
  return iq1_s_dot<L>(decoding_records<iq1_s_record, gguf::block_iq1_s, record_iq1_s>{x, {}}, y, nb);
}
template <class L>
float dot_iq1_m(const gguf::block_iq1_m* x, const gguf::block_q8_K* y, std::int64_t nb) {
  return iq1_m_dot<L>(decoding_records<iq1_m_record, gguf::block_iq1_m, record_iq1_m>{x, {}}, y, nb);
}
template <class L, class Block, void (*Digits)(const Block&, std::uint8_t*)>
float dot_tq(const Block* x, const gguf::block_q8_K* y, std::int64_t nb) {
  return ternary_dot<L>(decoding_records<ternary_record, Block, record_ternary<Block, Digits>>{x, {}}, y, nb);
}
template <class L, float Post>
float dot_plain_records(const plain_record* r, const gguf::block_q8_K* y, std::int64_t nb) {
  return plain_dot<L, Post>(stored_records<plain_record>{r}, y, nb);
}
template <class L>
float dot_iq1_s_records(const iq1_s_record* r, const gguf::block_q8_K* y, std::int64_t nb) {
  return iq1_s_dot<L>(stored_records<iq1_s_record>{r}, y, nb);
}
template <class L>
float dot_iq1_m_records(const iq1_m_record* r, const gguf::block_q8_K* y, std::int64_t nb) {
  return iq1_m_dot<L>(stored_records<iq1_m_record>{r}, y, nb);
}
template <class L>
float dot_ternary_records(const ternary_record* r, const gguf::block_q8_K* y, std::int64_t nb) {
  return ternary_dot<L>(stored_records<ternary_record>{r}, y, nb);
}

// One activation row: the per-block dot (no record buffer); more: each row's records once.
template <class Block, class Record, void (*Make)(const Block&, Record&), float (*DotRecords)(const Record*, const gguf::block_q8_K*, std::int64_t),
          float (*Dot)(const Block*, const gguf::block_q8_K*, std::int64_t)>
void matmul_records(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (n_tokens == 1) return matmul_q8_K<Block, Dot>(w, x, n_tokens, y, pool);
  const std::int64_t nb = w.in / qk;
  std::vector<gguf::block_q8_K> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_K(x + t * w.in, xq.data() + t * nb, w.in);
  pool.parallel_for(w.out, [&](std::int64_t begin, std::int64_t end, int) {
    std::vector<Record> records(static_cast<std::size_t>(nb));
    for (std::int64_t o = begin; o < end; ++o) {
      const auto* row = reinterpret_cast<const Block*>(w.row(o));
      for (std::int64_t i = 0; i < nb; ++i) Make(row[i], records[static_cast<std::size_t>(i)]);
      for (std::int64_t t = 0; t < n_tokens; ++t) y[t * w.out + o] = DotRecords(records.data(), xq.data() + t * nb, nb);
    }
  });
}

template <class L, class Block, void (*Decode)(const Block&, decoded&), float Post>
constexpr exact_matmul plain_records_matmul(gguf::tensor_type type) {
  return {type, matmul_records<Block, plain_record, record_plain<Block, Decode>, dot_plain_records<L, Post>, dot_plain<L, Block, Decode, Post>>};
}
template <class L, class Block, void (*Digits)(const Block&, std::uint8_t*)>
constexpr exact_matmul ternary_records_matmul(gguf::tensor_type type) {
  return {type, matmul_records<Block, ternary_record, record_ternary<Block, Digits>, dot_ternary_records<L>, dot_tq<L, Block, Digits>>};
}

// The matmuls of every type here with lane policy L, rows decoded once for batches.
template <class L>
constexpr exact_matmul record_matmuls[] = {
    {gguf::tensor_type::iq1_s, matmul_records<gguf::block_iq1_s, iq1_s_record, record_iq1_s, dot_iq1_s_records<L>, dot_iq1_s<L>>},
    {gguf::tensor_type::iq1_m, matmul_records<gguf::block_iq1_m, iq1_m_record, record_iq1_m, dot_iq1_m_records<L>, dot_iq1_m<L>>},
    plain_records_matmul<L, gguf::block_iq2_xxs, decode_iq2_xxs, 0.125f>(gguf::tensor_type::iq2_xxs),
    plain_records_matmul<L, gguf::block_iq2_xs, decode_iq2_xs, 0.125f>(gguf::tensor_type::iq2_xs),
    plain_records_matmul<L, gguf::block_iq2_s, decode_iq2_s, 0.125f>(gguf::tensor_type::iq2_s),
    plain_records_matmul<L, gguf::block_iq3_xxs, decode_iq3_xxs, 0.25f>(gguf::tensor_type::iq3_xxs),
    plain_records_matmul<L, gguf::block_iq3_s, decode_iq3_s, 1.0f>(gguf::tensor_type::iq3_s),
    plain_records_matmul<L, gguf::block_iq4_xs, decode_iq4_xs, 1.0f>(gguf::tensor_type::iq4_xs),
    ternary_records_matmul<L, gguf::block_tq1_0, digits_tq1_0>(gguf::tensor_type::tq1_0),
    ternary_records_matmul<L, gguf::block_tq2_0, digits_tq2_0>(gguf::tensor_type::tq2_0),
};

// The matmuls of every type here with lane policy L (for the types' tables).
template <class L>
constexpr exact_matmul matmuls[] = {
    {gguf::tensor_type::iq1_s, matmul_q8_K<gguf::block_iq1_s, dot_iq1_s<L>>},
    {gguf::tensor_type::iq1_m, matmul_q8_K<gguf::block_iq1_m, dot_iq1_m<L>>},
    {gguf::tensor_type::iq2_xxs, matmul_q8_K<gguf::block_iq2_xxs, dot_plain<L, gguf::block_iq2_xxs, decode_iq2_xxs, 0.125f>>},
    {gguf::tensor_type::iq2_xs, matmul_q8_K<gguf::block_iq2_xs, dot_plain<L, gguf::block_iq2_xs, decode_iq2_xs, 0.125f>>},
    {gguf::tensor_type::iq2_s, matmul_q8_K<gguf::block_iq2_s, dot_plain<L, gguf::block_iq2_s, decode_iq2_s, 0.125f>>},
    {gguf::tensor_type::iq3_xxs, matmul_q8_K<gguf::block_iq3_xxs, dot_plain<L, gguf::block_iq3_xxs, decode_iq3_xxs, 0.25f>>},
    {gguf::tensor_type::iq3_s, matmul_q8_K<gguf::block_iq3_s, dot_plain<L, gguf::block_iq3_s, decode_iq3_s, 1.0f>>},
    {gguf::tensor_type::iq4_xs, matmul_q8_K<gguf::block_iq4_xs, dot_plain<L, gguf::block_iq4_xs, decode_iq4_xs, 1.0f>>},
    {gguf::tensor_type::tq1_0, matmul_q8_K<gguf::block_tq1_0, dot_tq<L, gguf::block_tq1_0, digits_tq1_0>>},
    {gguf::tensor_type::tq2_0, matmul_q8_K<gguf::block_tq2_0, dot_tq<L, gguf::block_tq2_0, digits_tq2_0>>},
};

}  // namespace spite::dispatch::cpu::iquant
