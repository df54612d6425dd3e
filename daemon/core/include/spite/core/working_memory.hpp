// Process-wide allocator policy for inference processes (spited, spitectl).
//
// A forward pass allocates the same large buffers (activations, gate / up products, quantized
// inputs) layer after layer and step after step. With glibc's defaults, blocks of a few MiB
// come from mmap or are trimmed back to the kernel when freed, so every layer takes page faults
// and the kernel zeroes the pages again, serially, on the thread that allocates: measured at
// 10-15 % of a 2-thread prefill of 128 tokens (TinyLlama shape, Q4_0). Keeping freed memory in
// the process makes the second step onwards fault-free; the process's resident size then stays
// at its peak working set, which is bounded by the largest batch.
#pragma once

namespace spite {

// Call once at the start of main(), before threads are started. Returns false where the C
// library does not offer the settings (nothing changes then).
bool keep_working_memory();

}  // namespace spite
