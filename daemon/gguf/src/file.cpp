#include "spite/gguf/file.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "spite/core/checked.hpp"

namespace spite::gguf {

// Parses one GGUF image (header, metadata, tensor infos) with every read bounds-checked.
class file_parser {
 public:
  file_parser(std::span<const std::byte> bytes, std::string_view name) : bytes_(bytes), name_(name) {}

  // Fills version, alignment, metadata and tensor infos (data pointers included) of one part.
  result<void> parse(std::uint32_t part_index, std::uint32_t& version, std::uint64_t& alignment,
                     metadata& meta, std::vector<tensor_info>& tensors, std::uint64_t& data_offset);

  static void add_entry(metadata& meta, std::string_view key, value v) {
    meta.index_.emplace(key, meta.entries_.size());
    meta.entries_.push_back({key, std::move(v)});
  }

 private:
  error fail_at(std::uint64_t at, const std::string& problem) const {
    return make_error(errc::malformed, std::string(name_) + ": byte " + std::to_string(at) + ": " + problem);
  }
  std::uint64_t remaining() const { return bytes_.size() - pos_; }

  bool need(std::uint64_t n, const char* what) {
    if (n <= remaining()) return true;
    err_ = fail_at(pos_, std::string("truncated: ") + what + " needs " + std::to_string(n) +
                             " bytes, " + std::to_string(remaining()) + " left");
    return false;
  }

  template <class T>
  bool read(T& out, const char* what) {
    if (!need(sizeof(T), what)) return false;
    std::memcpy(&out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool read_string(std::string_view& out, const char* what) {
    const std::uint64_t at = pos_;
    std::uint64_t len = 0;
    if (!read(len, what)) return false;
    if (len > remaining()) {
      err_ = fail_at(at, std::string(what) + " length " + std::to_string(len) + " exceeds the " +
                             std::to_string(remaining()) + " bytes left in the file");
      return false;
    }
    out = {reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(len)};
    pos_ += len;
    return true;
  }

  bool read_value(std::uint32_t type_id, value& out, int depth);
  bool read_array(array_value& out, int depth);

  std::span<const std::byte> bytes_;
  std::string_view name_;
  std::uint64_t pos_ = 0;
  std::optional<error> err_;
};

bool file_parser::read_array(array_value& out, int depth) {
  const std::uint64_t at = pos_;
  if (depth > max_array_depth) {
    err_ = fail_at(at, "arrays nested deeper than " + std::to_string(max_array_depth) + " levels");
    return false;
  }
  std::uint32_t elem_id = 0;
  std::uint64_t count = 0;
  if (!read(elem_id, "array element type") || !read(count, "array length")) return false;
  if (!is_valid_value_type(elem_id)) {
    err_ = fail_at(at, "unknown array element type " + std::to_string(elem_id));
    return false;
  }
  const auto elem = static_cast<value_type>(elem_id);
  out.elem_ = elem;
  // Smallest encoding of one element: a scalar's size, a string's length field, an array's
  // type + length fields. The count is checked against the bytes left before anything is sized.
  const std::uint64_t min_elem = elem == value_type::string ? 8 : elem == value_type::array ? 12 : scalar_size(elem);
  if (count > remaining() / min_elem) {
    err_ = fail_at(at, "array of " + std::to_string(count) + " " + std::string(value_type_name(elem)) +
                           " elements does not fit in the " + std::to_string(remaining()) + " bytes left");
    return false;
  }
  out.count_ = static_cast<std::size_t>(count);
  if (elem == value_type::string) {
    out.strings_.resize(out.count_);
    for (auto& s : out.strings_) {
      if (!read_string(s, "array string")) return false;
    }
  } else if (elem == value_type::array) {
    // An in-memory array is ~10x its smallest encoding, so nested arrays get a fixed cap too.
    if (count > max_nested_arrays) {
      err_ = fail_at(at, "array of " + std::to_string(count) + " arrays exceeds the limit of " +
                             std::to_string(max_nested_arrays));
      return false;
    }
    out.arrays_.resize(out.count_);
    for (auto& a : out.arrays_) {
      if (!read_array(a, depth + 1)) return false;
    }
  } else {
    const std::uint64_t n = count * min_elem;
    out.raw_ = bytes_.subspan(pos_, n);
    pos_ += n;
  }
  return true;
}

bool file_parser::read_value(std::uint32_t type_id, value& out, int depth) {
  const auto t = static_cast<value_type>(type_id);
  out.type_ = t;
  if (t == value_type::string) return read_string(out.str_, "string value");
  if (t == value_type::array) {
    auto a = std::make_shared<array_value>();
    if (!read_array(*a, depth + 1)) return false;
    out.array_ = std::move(a);
    return true;
  }
  const std::size_t s = scalar_size(t);
  if (!need(s, "scalar value")) return false;
  std::memcpy(out.scalar_, bytes_.data() + pos_, s);
  pos_ += s;
  return true;
}

result<void> file_parser::parse(std::uint32_t part_index, std::uint32_t& version, std::uint64_t& alignment,
                                metadata& meta, std::vector<tensor_info>& tensors,
                                std::uint64_t& data_offset) {
#define SPITE_CHECK(cond) \
  if (!(cond)) return std::move(*err_)

  std::uint32_t file_magic = 0;
  SPITE_CHECK(read(file_magic, "magic"));
  if (file_magic != magic) {
    return fail_at(0, "not a GGUF file (bad magic)");
  }
  SPITE_CHECK(read(version, "version"));
  if (version == 0 || (version & 0xffffu) == 0) {
    const std::uint32_t swapped = __builtin_bswap32(version);
    if (swapped >= 1 && swapped <= 3) {
      return make_error(errc::unsupported, std::string(name_) +
                                               ": big-endian GGUF (byte order not supported; this machine "
                                               "reads little-endian files, convert the file first)");
    }
  }
  if (version == 1) return make_error(errc::unsupported, std::string(name_) + ": GGUF version 1 is not supported (only 2 and 3)");
  if (version != 2 && version != 3) return fail_at(4, "unknown GGUF version " + std::to_string(version));

  std::uint64_t n_tensors = 0, n_kv = 0;
  const std::uint64_t counts_at = pos_;
  SPITE_CHECK(read(n_tensors, "tensor count"));
  SPITE_CHECK(read(n_kv, "metadata count"));
  // A key-value pair takes at least 12 bytes (key length, type) + 1, a tensor info at least 24.
  if (n_kv > remaining() / 13 || n_kv > max_metadata_entries) {
    return fail_at(counts_at + 8, "metadata count " + std::to_string(n_kv) + " exceeds what the file can hold");
  }
  if (n_tensors > remaining() / 24) {
    return fail_at(counts_at, "tensor count " + std::to_string(n_tensors) + " exceeds what the file can hold");
  }

  meta.entries_.reserve(static_cast<std::size_t>(n_kv));  // bounded above
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::uint64_t key_at = pos_;
    std::string_view key;
    SPITE_CHECK(read_string(key, "metadata key"));
    const std::uint64_t type_at = pos_;
    std::uint32_t type_id = 0;
    SPITE_CHECK(read(type_id, "metadata value type"));
    if (!is_valid_value_type(type_id)) {
      return fail_at(type_at, "metadata key '" + std::string(key) + "' has unknown value type " + std::to_string(type_id));
    }
    value v;
    SPITE_CHECK(read_value(type_id, v, 0));
    if (meta.index_.count(key) != 0) {
      return fail_at(key_at, "duplicate metadata key '" + std::string(key) + "'");
    }
    add_entry(meta, key, std::move(v));
  }

  alignment = default_alignment;
  if (const value* a = meta.find("general.alignment")) {
    const auto v = a->as_uint();
    if (a->type() != value_type::u32 || !v || *v == 0 || (*v & (*v - 1)) != 0) {
      return fail_at(counts_at, "general.alignment must be a u32 power of two");
    }
    alignment = *v;
  }

  const std::size_t first_tensor = tensors.size();
  // Reserve only a plausible amount; a large count grows with what is actually parsed.
  tensors.reserve(first_tensor + static_cast<std::size_t>(std::min<std::uint64_t>(n_tensors, 65536)));
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    const std::uint64_t info_at = pos_;
    tensor_info t;
    t.part = part_index;
    SPITE_CHECK(read_string(t.name, "tensor name"));
    std::uint32_t n_dims = 0;
    SPITE_CHECK(read(n_dims, "tensor dimension count"));
    const std::string tname = "tensor '" + std::string(t.name) + "'";
    if (n_dims > static_cast<std::uint32_t>(max_dims)) {
      return fail_at(info_at, tname + " has " + std::to_string(n_dims) + " dimensions (at most " + std::to_string(max_dims) + ")");
    }
    t.n_dims = static_cast<int>(n_dims);
    std::uint64_t n_elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      std::uint64_t ne = 0;
      SPITE_CHECK(read(ne, "tensor dimension"));
      const auto product = checked_mul(n_elements, ne);
      if (ne > static_cast<std::uint64_t>(INT64_MAX) || !product || *product > static_cast<std::uint64_t>(INT64_MAX)) {
        return fail_at(info_at, tname + " shape overflows");
      }
      n_elements = *product;
      t.ne[d] = static_cast<std::int64_t>(ne);
    }
    const std::uint64_t type_at = pos_;
    std::uint32_t type_id = 0;
    SPITE_CHECK(read(type_id, "tensor type"));
    const type_traits* tr = find_type(type_id);
    if (tr == nullptr) {
      return make_error(errc::unsupported, std::string(name_) + ": byte " + std::to_string(type_at) + ": " +
                                               tname + " has unknown type id " + std::to_string(type_id));
    }
    t.type = tr->type;
    if (t.ne[0] % tr->block_size != 0) {
      return fail_at(info_at, tname + ": row length " + std::to_string(t.ne[0]) + " is not a multiple of the " +
                                  std::string(tr->name) + " block size " + std::to_string(tr->block_size));
    }
    const auto size = checked_mul(n_elements / static_cast<std::uint64_t>(tr->block_size), tr->block_bytes);
    if (!size) return fail_at(info_at, tname + " byte size overflows");
    t.size = *size;
    SPITE_CHECK(read(t.offset, "tensor offset"));
    if (t.offset % alignment != 0) {
      return fail_at(info_at, tname + " data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(alignment));
    }
    tensors.push_back(t);
  }

  const auto start = align_up(pos_, alignment);
  if (!start || (n_tensors > 0 && *start > bytes_.size())) {
    return fail_at(pos_, "truncated: tensor data section starts past the end of the file");
  }
  data_offset = std::min<std::uint64_t>(*start, bytes_.size());
  const std::uint64_t data_size = bytes_.size() - data_offset;

  // Bounds and overlap, checked in offset order.
  std::vector<std::size_t> order(tensors.size() - first_tensor);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = first_tensor + i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return tensors[a].offset < tensors[b].offset; });
  std::uint64_t end_prev = 0;
  const tensor_info* prev = nullptr;
  for (std::size_t idx : order) {
    tensor_info& t = tensors[idx];
    const auto end = checked_add(t.offset, t.size);
    if (!end || *end > data_size) {
      return fail_at(data_offset, "tensor '" + std::string(t.name) + "' data [" + std::to_string(t.offset) + ", +" +
                                      std::to_string(t.size) + ") lies outside the " + std::to_string(data_size) +
                                      "-byte data section");
    }
    if (prev != nullptr && t.offset < end_prev && t.size > 0) {
      return fail_at(data_offset + t.offset, "tensor '" + std::string(t.name) + "' data overlaps tensor '" +
                                                 std::string(prev->name) + "'");
    }
    t.file_offset = data_offset + t.offset;
    t.data = bytes_.data() + t.file_offset;
    if (t.size > 0) {
      end_prev = *end;
      prev = &t;
    }
  }
  return ok();
#undef SPITE_CHECK
}

// ---- metadata

const value* metadata::find(std::string_view key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].val;
}

std::optional<std::string_view> metadata::get_string(std::string_view key) const {
  const value* v = find(key);
  return v ? v->as_string() : std::nullopt;
}
std::optional<std::uint64_t> metadata::get_uint(std::string_view key) const {
  const value* v = find(key);
  return v ? v->as_uint() : std::nullopt;
}
std::optional<std::int64_t> metadata::get_int(std::string_view key) const {
  const value* v = find(key);
  return v ? v->as_int() : std::nullopt;
}
std::optional<double> metadata::get_float(std::string_view key) const {
  const value* v = find(key);
  return v ? v->as_float() : std::nullopt;
}
std::optional<bool> metadata::get_bool(std::string_view key) const {
  const value* v = find(key);
  return v ? v->as_bool() : std::nullopt;
}
const array_value* metadata::get_array(std::string_view key) const {
  const value* v = find(key);
  return v ? v->as_array() : nullptr;
}

// ---- file

const tensor_info* file::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::uint64_t file::total_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& p : parts_) n += p.bytes.size();
  return n;
}

namespace {

result<void> index_tensors(const std::string& name, const std::vector<tensor_info>& tensors,
                           std::unordered_map<std::string_view, std::size_t>& index) {
  index.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!index.emplace(tensors[i].name, i).second) {
      return make_error(errc::malformed, name + ": duplicate tensor name '" + std::string(tensors[i].name) + "'");
    }
  }
  return ok();
}

}  // namespace

result<file> file::parse(std::span<const std::byte> bytes, std::string name) {
  file f;
  f.parts_.push_back({name, {}, bytes, 0});
  file_parser p(bytes, name);
  SPITE_TRY(p.parse(0, f.version_, f.alignment_, f.meta_, f.tensors_, f.parts_[0].data_offset));
  SPITE_TRY(index_tensors(name, f.tensors_, f.tensor_index_));
  return f;
}

std::optional<std::vector<std::string>> split_part_paths(const std::string& path, std::uint32_t count) {
  // The reference engine names parts "<prefix>-%05d-of-%05d.gguf".
  static constexpr std::string_view first = "-00001-of-";
  const std::size_t at = path.rfind(first);
  if (at == std::string::npos || !path.ends_with(".gguf")) return std::nullopt;
  const std::string prefix = path.substr(0, at);
  char buf[40];
  std::vector<std::string> out;
  for (std::uint32_t i = 1; i <= count; ++i) {
    std::snprintf(buf, sizeof buf, "-%05u-of-%05u.gguf", i, count);
    out.push_back(prefix + buf);
  }
  if (out.front() != path) return std::nullopt;
  return out;
}

result<void> file::read(const tensor_info& t, std::uint64_t at, std::span<std::byte> out) const {
  if (at > t.size || out.size() > t.size - at) {
    return make_error(errc::out_of_range, "tensor '" + std::string(t.name) + "': read past its " + std::to_string(t.size) + " bytes");
  }
  if (t.part < parts_.size() && parts_[t.part].map.size() > 0) return parts_[t.part].map.read(t.file_offset + at, out);
  std::memcpy(out.data(), t.data + at, out.size());
  return ok();
}

result<file> file::open(const std::string& path, const open_options& options) {
  auto map = mapped_file::open(path);
  if (!map) return std::move(map).err();
  file f;
  f.parts_.push_back({path, std::move(*map), {}, 0});
  f.parts_[0].bytes = f.parts_[0].map.bytes();
  {
    file_parser p(f.parts_[0].bytes, path);
    SPITE_TRY(p.parse(0, f.version_, f.alignment_, f.meta_, f.tensors_, f.parts_[0].data_offset));
  }

  const auto split_count = f.meta_.get_uint("split.count");
  const auto split_no = f.meta_.get_uint("split.no");
  if (split_count && *split_count > 1 && options.open_split_parts) {
    if (split_no.value_or(0) != 0) {
      return make_error(errc::invalid_argument, path + ": this is part " + std::to_string(*split_no + 1) + " of " +
                                                    std::to_string(*split_count) +
                                                    " of a split model; open the first part (-00001-of-...)");
    }
    if (*split_count > 9999) {
      return make_error(errc::malformed, path + ": split.count " + std::to_string(*split_count) + " is implausible");
    }
    const auto paths = split_part_paths(path, static_cast<std::uint32_t>(*split_count));
    if (!paths) {
      return make_error(errc::invalid_argument, path + ": split model (split.count = " + std::to_string(*split_count) +
                                                    ") but the file is not named <name>-00001-of-" +
                                                    std::to_string(*split_count) + ".gguf");
    }
    for (std::uint32_t i = 1; i < *split_count; ++i) {
      const std::string& part_path = (*paths)[i];
      auto part_map = mapped_file::open(part_path);
      if (!part_map) return std::move(part_map).err().with_context("opening split part " + std::to_string(i + 1));
      f.parts_.push_back({part_path, std::move(*part_map), {}, 0});
      part& pt = f.parts_.back();
      pt.bytes = pt.map.bytes();
      std::uint32_t version = 0;
      std::uint64_t alignment = 0;
      metadata part_meta;
      file_parser p(pt.bytes, part_path);
      SPITE_TRY(p.parse(i, version, alignment, part_meta, f.tensors_, pt.data_offset));
      if (part_meta.get_uint("split.no") != std::optional<std::uint64_t>(i) ||
          part_meta.get_uint("split.count") != split_count) {
        return make_error(errc::malformed, part_path + ": split.no / split.count do not say part " +
                                               std::to_string(i + 1) + " of " + std::to_string(*split_count));
      }
    }
    if (const auto expected = f.meta_.get_uint("split.tensors.count"); expected && *expected != f.tensors_.size()) {
      return make_error(errc::malformed, path + ": split.tensors.count is " + std::to_string(*expected) + " but the " +
                                             std::to_string(*split_count) + " parts hold " +
                                             std::to_string(f.tensors_.size()) + " tensors");
    }
  }
  SPITE_TRY(index_tensors(path, f.tensors_, f.tensor_index_));
  return f;
}

}  // namespace spite::gguf
