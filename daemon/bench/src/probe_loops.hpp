// The probe loops that machine_probe.cpp and sequence_probe.cpp share.
#pragma once

#include <cstdint>

namespace spite::bench::detail {

// 12 independent VPMADDUBSW chains for `iters` iterations (needs AVX2): the 8-bit multiply peak's
// loop. Returns the ops done, 2 per product.
double dot8_avx2(std::int64_t iters);

}  // namespace spite::bench::detail
