// The working buffers of a forward pass (activations, projections, gate / up products).
#pragma once

#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace spite::models {

// Working buffers that every op writes in full before anything reads them: sized without
// zeroing (a serial memset of MiBs per layer on the calling thread in a prefill).
template <class T>
struct uninitialized_allocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = uninitialized_allocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
#if defined(__SANITIZE_ADDRESS__)
    // Sanitizer builds fill them with NaN instead, so that a read of an element no op wrote
    // shows in the golden tests' logits.
    if constexpr (std::is_floating_point_v<U>) {
      ::new (static_cast<void*>(p)) U(std::numeric_limits<U>::quiet_NaN());
      return;
    }
#endif
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    std::allocator_traits<std::allocator<T>>::construct(static_cast<std::allocator<T>&>(*this), p, std::forward<Args>(args)...);
  }
};
using work_buffer = std::vector<float, uninitialized_allocator<float>>;

}  // namespace spite::models
