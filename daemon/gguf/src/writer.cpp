#include "spite/gguf/writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "spite/core/checked.hpp"
#include "spite/gguf/file.hpp"

namespace spite::gguf {
namespace {

using sink_fn = std::function<bool(const void*, std::size_t)>;

template <class T>
bool put(const sink_fn& out, T v) {
  return out(&v, sizeof v);
}

bool put_string(const sink_fn& out, std::string_view s) {
  return put<std::uint64_t>(out, s.size()) && out(s.data(), s.size());
}

bool put_array(const sink_fn& out, const array_value& a) {
  if (!put<std::uint32_t>(out, static_cast<std::uint32_t>(a.element_type())) ||
      !put<std::uint64_t>(out, a.size())) {
    return false;
  }
  if (a.element_type() == value_type::string) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!put_string(out, a.string_at(i))) return false;
    }
    return true;
  }
  if (a.element_type() == value_type::array) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!put_array(out, *a.array_at(i))) return false;
    }
    return true;
  }
  return out(a.raw().data(), a.raw().size());
}

bool put_value(const sink_fn& out, const value& v) {
  if (!put<std::uint32_t>(out, static_cast<std::uint32_t>(v.type()))) return false;
  if (v.type() == value_type::string) return put_string(out, *v.as_string());
  if (v.type() == value_type::array) return put_array(out, *v.as_array());
  const auto bytes = v.scalar_bytes();
  return out(bytes.data(), bytes.size());
}

}  // namespace

result<void> writer::set_alignment(std::uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return make_error(errc::invalid_argument, "alignment must be a power of two");
  }
  alignment_ = alignment;
  if (alignment == default_alignment) {
    remove("general.alignment");
  } else {
    set("general.alignment", value::u32(alignment));
  }
  return ok();
}

void writer::set(std::string key, value v) {
  for (auto& [k, existing] : kv_) {
    if (k == key) {
      existing = std::move(v);
      return;
    }
  }
  kv_.emplace_back(std::move(key), std::move(v));
}

bool writer::remove(std::string_view key) {
  const auto it = std::find_if(kv_.begin(), kv_.end(), [&](const auto& e) { return e.first == key; });
  if (it == kv_.end()) return false;
  kv_.erase(it);
  return true;
}

result<void> writer::check_tensor(const std::string& name, tensor_type type, std::span<const std::int64_t> shape,
                                  std::size_t bytes) const {
  if (shape.size() > static_cast<std::size_t>(max_dims)) {
    return make_error(errc::invalid_argument, "tensor '" + name + "': more than 4 dimensions");
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return make_error(errc::invalid_argument, "duplicate tensor name '" + name + "'");
  }
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    const auto p = d < 0 ? std::nullopt : checked_mul(n, static_cast<std::uint64_t>(d));
    if (!p) return make_error(errc::invalid_argument, "tensor '" + name + "': bad shape");
    n = *p;
  }
  const std::int64_t ne0 = shape.empty() ? 1 : shape[0];
  const auto row = row_bytes(type, ne0);
  if (!row) {
    return make_error(errc::invalid_argument, "tensor '" + name + "': row length " + std::to_string(ne0) +
                                                  " is not a multiple of the " + std::string(type_name(type)) +
                                                  " block size");
  }
  const auto expected = checked_mul(*row, ne0 == 0 ? 0 : n / static_cast<std::uint64_t>(ne0));
  if (!expected || *expected != bytes) {
    return make_error(errc::invalid_argument, "tensor '" + name + "': " + std::to_string(bytes) +
                                                  " bytes given, the shape needs " +
                                                  (expected ? std::to_string(*expected) : std::string("too many")));
  }
  return ok();
}

result<void> writer::add_tensor(std::string name, tensor_type type, std::span<const std::int64_t> shape,
                                std::span<const std::byte> data) {
  SPITE_TRY(check_tensor(name, type, shape, data.size()));
  tensors_.push_back({std::move(name), type, {shape.begin(), shape.end()}, data, {}, 0});
  return ok();
}

result<void> writer::add_tensor(std::string name, tensor_type type, std::span<const std::int64_t> shape,
                                std::vector<std::byte> data) {
  SPITE_TRY(check_tensor(name, type, shape, data.size()));
  tensors_.push_back({std::move(name), type, {shape.begin(), shape.end()}, {}, std::move(data), 0});
  tensors_.back().data = tensors_.back().owned;
  return ok();
}

bool writer::serialize(const sink& out) const {
  std::uint64_t written = 0;
  const sink counted = [&](const void* p, std::size_t n) {
    written += n;
    return out(p, n);
  };
  const auto pad_to_alignment = [&]() {
    static constexpr char zeros[64] = {};
    while (written % alignment_ != 0) {
      const std::size_t n = std::min<std::uint64_t>(sizeof zeros, alignment_ - written % alignment_);
      if (!counted(zeros, n)) return false;
    }
    return true;
  };

  if (!put<std::uint32_t>(counted, magic) || !put<std::uint32_t>(counted, version_) ||
      !put<std::uint64_t>(counted, tensors_.size()) || !put<std::uint64_t>(counted, kv_.size())) {
    return false;
  }
  for (const auto& [key, v] : kv_) {
    if (!put_string(counted, key) || !put_value(counted, v)) return false;
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    if (!put_string(counted, t.name) || !put<std::uint32_t>(counted, static_cast<std::uint32_t>(t.shape.size()))) {
      return false;
    }
    for (std::int64_t d : t.shape) {
      if (!put<std::uint64_t>(counted, static_cast<std::uint64_t>(d))) return false;
    }
    if (!put<std::uint32_t>(counted, static_cast<std::uint32_t>(t.type)) || !put<std::uint64_t>(counted, offset)) {
      return false;
    }
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  if (!pad_to_alignment()) return false;
  for (const auto& t : tensors_) {
    if (!counted(t.data.data(), t.data.size()) || !pad_to_alignment()) return false;
  }
  return true;
}

std::vector<std::byte> writer::to_bytes() const {
  std::vector<std::byte> out;
  serialize([&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
    return true;
  });
  return out;
}

result<void> writer::write_file(const std::string& path) const {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return make_error(errc::io, tmp + ": cannot create: " + std::strerror(errno));
  std::vector<char> buffer(1 << 20);
  std::setvbuf(f, buffer.data(), _IOFBF, buffer.size());
  const bool written = serialize([&](const void* p, std::size_t n) { return std::fwrite(p, 1, n, f) == n; });
  const bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int e = errno;
  std::fclose(f);
  if (!written || !flushed) {
    std::remove(tmp.c_str());
    return make_error(errc::io, path + ": write failed: " + std::strerror(e));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int re = errno;
    std::remove(tmp.c_str());
    return make_error(errc::io, path + ": cannot rename into place: " + std::strerror(re));
  }
  return ok();
}

}  // namespace spite::gguf
