// Per-row ops of a batch split across the compute threads: every row computed once, by one op
// call, so the results are bit-identical to one call over the whole batch; small batches (a
// decode step) are not split.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include "batch_rows.hpp"
#include "random_data.hpp"
#include "spite/dispatch/ops.hpp"

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("batch rows: each row once, in blocks of 2 rows or more, split only when the batch is large") {
  spite::thread_pool pool(3);
  for (const std::int64_t rows : {1, 2, 7, 64, 1000}) {
    for (const std::int64_t width : {16, 4096}) {
      std::vector<int> seen(static_cast<std::size_t>(rows), 0);
      int calls = 0;
      std::int64_t smallest = rows;
      std::mutex m;
      spite::models::for_row_blocks(pool, rows, width, [&](std::int64_t begin, std::int64_t end) {
        std::lock_guard lock(m);
        ++calls;
        smallest = std::min(smallest, end - begin);
        for (std::int64_t r = begin; r < end; ++r) ++seen[static_cast<std::size_t>(r)];
      });
      for (int s : seen) REQUIRE(s == 1);
      CHECK(smallest >= std::min<std::int64_t>(rows, 2));  // a batch op never sees a lone row of a batch
      if (rows * width < spite::models::parallel_row_elements) {
        CHECK(calls == 1);
      } else {
        CHECK(calls > 1);
      }
    }
  }
}

TEST_CASE("batch rows: a split rms_norm gives the bits of one call over the batch") {
  spite::thread_pool pool(3);
  const auto& ops = spite::dispatch::cpu_reference_ops();
  const std::int64_t n = 2048, rows = 67;  // above the split threshold, not a multiple of the threads
  const auto x = spite::test::gaussian(static_cast<std::size_t>(n * rows), 1, 2.0f);
  const auto w = spite::test::gaussian(static_cast<std::size_t>(n), 2, 2.0f);
  std::vector<float> whole(x.size()), split(x.size());
  ops.rms_norm(x.data(), w.data(), whole.data(), n, rows, 1e-5f);
  spite::models::rms_norm_rows(ops, pool, x.data(), w.data(), split.data(), n, rows, 1e-5f);
  CHECK(same_bits(whole, split));
  // in place, no weights
  std::vector<float> in_place = x;
  ops.rms_norm(x.data(), nullptr, whole.data(), n, rows, 1e-5f);
  spite::models::rms_norm_rows(ops, pool, in_place.data(), nullptr, in_place.data(), n, rows, 1e-5f);
  CHECK(same_bits(whole, in_place));
}

TEST_CASE("batch rows: a split RoPE rotates each token by its own position") {
  spite::thread_pool pool(3);
  const auto& ops = spite::dispatch::cpu_reference_ops();
  const std::int64_t tokens = 91, heads = 8, dim = 64;
  std::vector<std::int32_t> pos(static_cast<std::size_t>(tokens));
  for (std::size_t t = 0; t < pos.size(); ++t) pos[t] = static_cast<std::int32_t>(1000 + 37 * t);
  for (const bool neox : {false, true}) {
    std::vector<float> whole = spite::test::gaussian(static_cast<std::size_t>(tokens * heads * dim), 3, 2.0f), split = whole;
    spite::dispatch::rope_args a{.x = whole.data(), .n_tokens = tokens, .n_head = heads, .head_dim = dim, .n_dims = dim,
                                 .pos = pos.data(), .neox = neox, .freq_base = 500000.0f};
    ops.rope(a);
    a.x = split.data();
    spite::models::rope_rows(ops, pool, a);
    CHECK(same_bits(whole, split));
  }
}
