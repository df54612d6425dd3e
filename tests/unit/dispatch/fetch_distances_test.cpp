// The decode kernels' software-prefetch distances (simd_x86_fetch_ahead.cpp): how SPITE_CPU_FETCH
// changes a processor's table, and that no distance, none included, changes a product's bits.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "kernel_test_matrices.hpp"
#include "spite/core/thread_pool.hpp"

#if defined(__x86_64__)
#include "simd_x86_fetch_ahead.hpp"

namespace {

namespace x86 = spite::dispatch::cpu::x86;
namespace cpu = spite::dispatch::cpu;
using spite::gguf::tensor_type;

bool same(const x86::decode_fetch_distances& a, const x86::decode_fetch_distances& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

x86::decode_fetch_choice table_of(const std::string& profile) { return {x86::profile_distances(profile), profile, {}}; }

TEST_CASE("a processor without a table of its own takes the defaults; a Zen 4 core leaves packed Q4_0 to the hardware prefetchers") {
  CHECK(same(x86::profile_distances("default"), x86::decode_fetch_distances{}));
  CHECK(same(x86::profile_distances("an unknown core"), x86::decode_fetch_distances{}));
  CHECK(x86::profile_distances("zen4").q4_0 == 0);
  CHECK(x86::profile_distances("zen4").q4_k_pairs >= 2);
  CHECK(x86::profile_distances("zen4").q6_k_pairs >= 2);
  CHECK(x86::profile_distances("zen4").q5_k_pairs >= 2);
  CHECK(x86::decode_fetch_distances{}.q4_0 > 0);
  CHECK(x86::decode_fetch_distances{}.q4_k_pairs == 0);
  CHECK(x86::decode_fetch_distances{}.q6_k_pairs == 0);
  CHECK(x86::decode_fetch_distances{}.q5_k_pairs == 0);
}

TEST_CASE("SPITE_CPU_FETCH items set the named kernels' distances on top of the processor's table") {
  const x86::decode_fetch_choice c = x86::apply_fetch_spec(table_of("zen4"), "q6_k=5,legacy=0,mxfp4=64,q6_k_pairs=1");
  CHECK(c.ignored.empty());
  CHECK(c.distances.q6_k == 5);
  CHECK(c.distances.q6_k_pairs == 1);
  CHECK(c.distances.legacy == 0);
  CHECK(c.distances.mxfp4 == 64);
  x86::decode_fetch_distances rest = c.distances;
  rest.q6_k = rest.legacy = rest.mxfp4 = rest.q6_k_pairs = 0;
  x86::decode_fetch_distances zen4 = x86::profile_distances("zen4");
  zen4.q6_k = zen4.legacy = zen4.mxfp4 = zen4.q6_k_pairs = 0;
  CHECK(same(rest, zen4));
  CHECK(c.profile == "zen4+SPITE_CPU_FETCH");
}

TEST_CASE("a profile named in SPITE_CPU_FETCH replaces the processor's table, and the items after it change that") {
  x86::decode_fetch_choice c = x86::apply_fetch_spec(table_of("zen4"), "default");
  CHECK(c.profile == "default");
  CHECK(same(c.distances, x86::decode_fetch_distances{}));
  c = x86::apply_fetch_spec(table_of("default"), "zen4,q8_0=2");
  CHECK(c.profile == "zen4+SPITE_CPU_FETCH");
  CHECK(c.distances.q8_0 == 2);
  CHECK(c.distances.q4_0 == x86::profile_distances("zen4").q4_0);
}

TEST_CASE("SPITE_CPU_FETCH items that cannot be read are reported and change nothing") {
  for (const std::string spec :
       {"q4_0=x", "q9_9=1", "q4_0=65", "q4_0=-1", "q4_0", "=3", "q4_0=1x", "Q4_0=1", "zen5", "q4_k_pairs=65", "q4_k_pairs=-2"}) {
    INFO(spec);
    const x86::decode_fetch_choice c = x86::apply_fetch_spec(table_of("default"), spec);
    REQUIRE(c.ignored.size() == 1);
    CHECK(c.ignored[0] == spec);
    CHECK(same(c.distances, x86::decode_fetch_distances{}));
    CHECK(c.profile == "default");
  }
  const x86::decode_fetch_choice c = x86::apply_fetch_spec(table_of("default"), "q4_0=2,,bad,q8_0=0");
  CHECK(c.ignored == std::vector<std::string>{"bad"});
  CHECK(c.distances.q4_0 == 2);
  CHECK(c.distances.q8_0 == 0);
}

TEST_CASE("the decode kernels give the reference's bits at every fetch distance, none included, and as one stream or two") {
  if (!cpu::has_avx512_kernels()) WARN("the AVX-512 kernels do not run here: the distances go unused");
  const x86::decode_fetch_distances saved = x86::decode_fetch;
  std::mt19937 rng(77);
  spite::thread_pool pool(2);
  struct kind {
    tensor_type type;
    std::int64_t block;
  };
  for (const kind k :
       {kind{tensor_type::q4_0, 32}, kind{tensor_type::iq4_nl, 32}, kind{tensor_type::q8_0, 32}, kind{tensor_type::q4_K, 256},
        kind{tensor_type::q5_K, 256}, kind{tensor_type::q3_K, 256}, kind{tensor_type::q6_K, 256}, kind{tensor_type::q2_K, 256},
        kind{tensor_type::iq4_xs, 256}, kind{tensor_type::q5_0, 32}, kind{tensor_type::q4_1, 32}, kind{tensor_type::q5_1, 32},
        kind{tensor_type::mxfp4, 32}}) {
    const cpu::matmul_fn fast = spite_test::fast_for(k.type), reference = cpu::find_reference_matmul(k.type);
    if (fast == nullptr) continue;
    REQUIRE(reference != nullptr);
    // 48 rows: two 16-row groups read in step and one alone; 7 blocks: an odd count, past a span.
    const std::int64_t in = 7 * k.block, out = 48;
    spite_test::quantized_matrix m = spite_test::random_matrix(k.type, in, out, rng);
    spite::dispatch::weight packed = m.w;
    cpu::pack_weight(packed);
    for (const int streams : {1, 2}) {
      for (const int distance : {0, 1, 5}) {
        x86::decode_fetch_distances d;
        for (int* f : {&d.q4_0, &d.q8_0, &d.q4_k, &d.q5_k, &d.q3_k, &d.q6_k, &d.q2_k, &d.iq4_xs, &d.legacy, &d.mxfp4}) *f = distance;
        d.q4_k_pairs = d.q5_k_pairs = d.q6_k_pairs = streams == 2 ? 64 : 0;
        x86::decode_fetch = d;
        for (const std::int64_t n_tokens : {1, 2, 3}) {
          INFO(spite::gguf::type_name(k.type) << ", distance " << distance << ", streams " << streams << ", tokens " << n_tokens);
          const std::vector<float> x = spite_test::random_activations(in, n_tokens, rng);
          std::vector<float> want(static_cast<std::size_t>(out * n_tokens)), got(want.size(), -1.0f);
          reference(m.w, x.data(), n_tokens, want.data(), pool);
          fast(packed, x.data(), n_tokens, got.data(), pool);
          CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
        }
      }
    }
  }
  x86::decode_fetch = saved;
}

}  // namespace

#endif
