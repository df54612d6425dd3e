// A model's matrices are packed for the CPU kernels into one region while it binds
// (models::binder, dispatch::packing_together): no partly used huge page per matrix, and a
// layer's q / k / v and gate / up still one after the other.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "decoder.hpp"
#include "decoder_model.hpp"
#include "loaded_model.hpp"
#include "spite/dispatch/tensor.hpp"

namespace {

bool same_owner(const spite::dispatch::weight& a, const spite::dispatch::weight& b) {
  return !a.packed_owner.owner_before(b.packed_owner) && !b.packed_owner.owner_before(a.packed_owner);
}

}  // namespace

TEST_CASE("a model's packed matrices share one region, q, k and v one after the other") {
  const std::string name = GENERATE("stories260K.gguf");
  CAPTURE(name);
  const spite::test::loaded_model loaded = spite::test::load_model("models/" + name);
  const auto* decoder = dynamic_cast<const spite::models::decoder_model*>(loaded.model.get());
  REQUIRE(decoder != nullptr);
  const spite::models::decoder_weights& w = decoder->weights;

  std::vector<const spite::dispatch::weight*> packed;
  const auto add = [&](const spite::models::linear& l) {
    if (l.w.packed_owner != nullptr) packed.push_back(&l.w);
  };
  for (const auto& a : w.attn) {
    for (const auto* l : {&a.q, &a.k, &a.v, &a.o}) add(*l);
    if (a.q.w.packed != nullptr && a.k.w.packed != nullptr) CHECK(spite::dispatch::packed_together(a.q.w, a.k.w));
  }
  for (const auto& f : w.ffn) {
    for (const auto* l : {&f.gate, &f.up, &f.down}) add(*l);
    for (const auto& e : f.up_x) add(e);
    for (const auto& e : f.down_x) add(e);
  }
  add(w.output);
  // The F32 matrices of these files are moved into the region (into huge pages) unless the
  // system has transparent huge pages off.
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::string thp_setting((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  if (!thp || thp_setting.find("[never]") != std::string::npos) {
    WARN("transparent huge pages are off here: the matrices stay in the file");
    return;
  }
  REQUIRE(packed.size() >= 2);
  for (const auto* p : packed) CHECK(same_owner(*p, *packed.front()));
}
