// result<T>: a value or an error with context. Used for everything that can fail because of input
// (files, requests, configuration); exceptions are left for programmer errors and allocation.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace spite {

enum class errc {
  invalid_argument = 1,
  io,
  malformed,    // input violates its format
  unsupported,  // valid input that spite does not handle (yet)
  not_found,
  out_of_range,
  busy,
  internal,
  unavailable,  // the service cannot take it now (stopping, loading)
};

const char* errc_name(errc code) noexcept;

struct error {
  errc code = errc::internal;
  std::string message;

  // Prefixes context, outermost last: error.with_context("loading model.gguf").
  error with_context(const std::string& context) const& { return {code, context + ": " + message}; }
};

inline error make_error(errc code, std::string message) { return {code, std::move(message)}; }

template <class T>
class [[nodiscard]] result {
 public:
  using value_type = T;
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  result(error e) : v_(std::in_place_index<1>, std::move(e)) {}      // NOLINT

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const error& err() const& { return std::get<1>(v_); }
  error&& err() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, error> v_;
};

template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(error e) : err_(std::move(e)), ok_(false) {}  // NOLINT
  bool ok() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  const error& err() const& { return err_; }
  error&& err() && { return std::move(err_); }

 private:
  error err_{};
  bool ok_ = true;
};

inline result<void> ok() { return {}; }

}  // namespace spite

// Propagates an error from an expression returning result<...>; evaluates to nothing.
#define SPITE_TRY(expr)                          \
  do {                                           \
    auto spite_try_r_ = (expr);                  \
    if (!spite_try_r_) return std::move(spite_try_r_).err(); \
  } while (0)
