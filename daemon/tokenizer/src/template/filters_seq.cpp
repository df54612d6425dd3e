// Filters over sequences: map, select, sort, unique, join, sum, min, max, dictsort, groupby, ...
// Like jinja2, map/select/reject/selectattr/rejectattr/unique/batch/slice yield one-shot
// generators (so `|length` and `|tojson` refuse them until `|list`).
#include <algorithm>

#include "template/format.hpp"
#include "template/interp.hpp"
#include "template/text.hpp"

namespace spite::tokenizer::template_detail {

result<value> attribute_path(interp& in, value item, const value& attribute, const std::optional<value>& fallback) {
  std::vector<value> parts;
  if (attribute.is_string()) {
    for (const auto& p : py_split(attribute.as_string(), std::string("."), -1)) {
      const bool digits = !p.empty() && p.find_first_not_of("0123456789") == std::string::npos;
      parts.push_back(digits ? value(static_cast<std::int64_t>(std::stoll(p))) : value(p));
    }
  } else if (!attribute.is_none()) {
    parts.push_back(attribute);
  }
  for (const auto& p : parts) {
    SPITE_TPL_LET(item, in.getitem(item, p));
    if (fallback && !fallback->is_none() && item.is_undefined()) item = *fallback;
  }
  return item;
}

namespace {

value ignore_case(const value& v) { return v.is_string() ? value(py_lower(v.as_string())) : v; }

// A stable merge sort whose comparison may fail (Python raises on '<' between str and int).
template <class Less>
result<void> stable_sort(std::vector<std::size_t>& order, Less less) {
  std::vector<std::size_t> buffer(order.size());
  for (std::size_t width = 1; width < order.size(); width *= 2) {
    for (std::size_t lo = 0; lo < order.size(); lo += 2 * width) {
      const std::size_t mid = std::min(lo + width, order.size());
      const std::size_t hi = std::min(lo + 2 * width, order.size());
      std::size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        SPITE_TPL_LET(bool right_first, less(order[j], order[i]));
        buffer[k++] = right_first ? order[j++] : order[i++];
      }
      while (i < mid) buffer[k++] = order[i++];
      while (j < hi) buffer[k++] = order[j++];
    }
    order.swap(buffer);
  }
  return ok();
}

// sorted()'s reverse= must be an int or bool.
result<bool> reverse_flag(const std::optional<value>& v) {
  if (!v) return false;
  if (!is_integral(*v)) return type_error(quoted_type(*v) + " object cannot be interpreted as an integer");
  return to_i64(*v) != 0;
}

// Sorts items by keys; returns the new order.
result<std::vector<std::size_t>> sorted_order(const value_list& keys, bool reverse) {
  std::vector<std::size_t> order(keys.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  SPITE_TRY(stable_sort(order, [&](std::size_t a, std::size_t b) {
    return reverse ? py_less(keys[b], keys[a]) : py_less(keys[a], keys[b]);
  }));
  return order;
}

// The key of make_multi_attrgetter: a list of one value per comma-separated attribute.
result<value> multi_key(interp& in, const value& item, const std::optional<value>& attribute, bool case_sensitive) {
  value_list key;
  if (!attribute || attribute->is_none()) {
    key.push_back(case_sensitive ? item : ignore_case(item));
  } else {
    const auto parts = attribute->is_string() ? py_split(attribute->as_string(), std::string(","), -1)
                                              : std::vector<std::string>{};
    if (!attribute->is_string()) {
      SPITE_TPL_LET(value v, attribute_path(in, item, *attribute));
      key.push_back(case_sensitive ? v : ignore_case(v));
    }
    for (const auto& p : parts) {
      SPITE_TPL_LET(value v, attribute_path(in, item, value(p)));
      key.push_back(case_sensitive ? v : ignore_case(v));
    }
  }
  return value(std::move(key));
}

result<value> f_sort(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "sort", {"reverse", "case_sensitive", "attribute"}));
  SPITE_TPL_LET(seq items, in.iterate(v));
  value_list keys;
  for (const auto& item : *items) {
    SPITE_TPL_LET(value k, multi_key(in, item, a[2], a[1] && truthy(*a[1])));
    keys.push_back(std::move(k));
  }
  SPITE_TPL_LET(bool reverse, reverse_flag(a[0]));
  SPITE_TPL_LET(auto order, sorted_order(keys, reverse));
  value_list out;
  for (auto i : order) out.push_back((*items)[i]);
  return value(std::move(out));
}

result<value> f_dictsort(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "dictsort", {"case_sensitive", "by", "reverse"}));
  const bool case_sensitive = a[0] && truthy(*a[0]);
  const std::string by = a[1] ? py_str(*a[1]) : "key";
  if (by != "key" && by != "value") return runtime_error("You can only sort by either \"key\" or \"value\"");
  if (v.is_undefined()) return undefined_error(v);
  if (!v.is_dict()) return make_error(errc::malformed, "AttributeError: '" + type_name(v) + "' object has no attribute 'items'");
  value_list pairs, keys;
  for (const auto& [k, x] : v.as_dict()) {
    pairs.push_back(make_tuple({k, x}));
    const value& key = by == "key" ? k : x;
    keys.push_back(case_sensitive ? key : ignore_case(key));
  }
  SPITE_TPL_LET(bool reverse, reverse_flag(a[2]));
  SPITE_TPL_LET(auto order, sorted_order(keys, reverse));
  value_list out;
  for (auto i : order) out.push_back(pairs[i]);
  (void)in;
  return value(std::move(out));
}

result<value> f_unique(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "unique", {"case_sensitive", "attribute"}));
  const bool case_sensitive = a[0] && truthy(*a[0]);
  SPITE_TPL_LET(seq items, in.iterate(v));
  value_list seen, out;
  for (const auto& item : *items) {
    value key = item;
    if (a[1] && !a[1]->is_none()) {
      SPITE_TPL_LET(key, attribute_path(in, item, *a[1]));
    }
    if (!case_sensitive) key = ignore_case(key);
    if ((key.is_list() && key.flavor() != value::flavour::tuple) || key.is_dict())
      return type_error("unhashable type: '" + type_name(key) + "'");
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return make_generator(std::move(out));
}

result<value> min_max(interp& in, const value& v, call_args& args, bool want_max) {
  SPITE_TPL_LET(auto a, bind_args(args, want_max ? "max" : "min", {"case_sensitive", "attribute"}));
  const bool case_sensitive = a[0] && truthy(*a[0]);
  SPITE_TPL_LET(seq items, in.iterate(v));
  if (items->empty()) return value::undefined("No aggregated item, sequence was empty.");
  const auto key_of = [&](const value& item) -> result<value> {
    value key = item;
    if (a[1] && !a[1]->is_none()) {
      SPITE_TPL_LET(key, attribute_path(in, item, *a[1]));
    }
    return case_sensitive ? key : ignore_case(key);
  };
  std::size_t best = 0;
  SPITE_TPL_LET(value best_key, key_of((*items)[0]));
  for (std::size_t i = 1; i < items->size(); ++i) {
    SPITE_TPL_LET(value key, key_of((*items)[i]));
    SPITE_TPL_LET(bool better, want_max ? py_less(best_key, key) : py_less(key, best_key));
    if (better) {
      best = i;
      best_key = std::move(key);
    }
  }
  return (*items)[best];
}

result<value> f_min(interp& in, const value& v, call_args& args) { return min_max(in, v, args, false); }
result<value> f_max(interp& in, const value& v, call_args& args) { return min_max(in, v, args, true); }

result<value> f_join(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "join", {"d", "attribute"}));
  const std::string sep = a[0] ? py_str(*a[0]) : "";
  SPITE_TPL_LET(seq items, in.iterate(v));
  std::string out;
  for (std::size_t i = 0; i < items->size(); ++i) {
    value item = (*items)[i];
    if (a[1] && !a[1]->is_none()) {
      SPITE_TPL_LET(item, attribute_path(in, item, *a[1]));
    }
    if (i) out += sep;
    out += py_str(item);
    SPITE_TRY(in.check_size(out.size()));
  }
  return value(std::move(out));
}

result<value> f_sum(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "sum", {"attribute", "start"}));
  value acc = a[1] ? *a[1] : value(0);
  if (acc.is_string()) return type_error("sum() can't sum strings [use ''.join(seq) instead]");
  SPITE_TPL_LET(seq items, in.iterate(v));
  for (const auto& x : *items) {
    value item = x;
    if (a[0] && !a[0]->is_none()) {
      SPITE_TPL_LET(item, attribute_path(in, item, *a[0]));
    }
    SPITE_TPL_LET(acc, in.binary(binop::add, acc, item));
  }
  return acc;
}

result<value> f_map(interp& in, const value& v, call_args& args) {
  if (!truthy(v)) return make_generator({});
  SPITE_TPL_LET(seq items, in.iterate(v));
  value_list out;
  out.reserve(items->size());
  const auto find_kw = [&](std::string_view k) -> const value* {
    for (const auto& [name, x] : args.kw)
      if (name == k) return &x;
    return nullptr;
  };
  if (args.pos.empty() && find_kw("attribute")) {
    const value attribute = *find_kw("attribute");
    std::optional<value> fallback;
    if (const value* d = find_kw("default")) fallback = *d;
    for (const auto& [k, x] : args.kw)
      if (k != "attribute" && k != "default") return runtime_error("Unexpected keyword argument '" + k + "'");
    for (const auto& item : *items) {
      SPITE_TPL_LET(value r, attribute_path(in, item, attribute, fallback));
      out.push_back(std::move(r));
    }
    return make_generator(std::move(out));
  }
  if (args.pos.empty()) return runtime_error("map requires a filter argument");
  const std::string name = py_str(args.pos[0]);
  call_args rest;
  rest.pos.assign(args.pos.begin() + 1, args.pos.end());
  rest.kw = args.kw;
  for (const auto& item : *items) {
    SPITE_TPL_LET(value r, in.filter(name, item, rest));
    out.push_back(std::move(r));
  }
  return make_generator(std::move(out));
}

result<value> select_reject(interp& in, const value& v, call_args& args, bool select, bool by_attribute) {
  if (!truthy(v)) return make_generator({});
  std::size_t off = 0;
  std::optional<value> attribute;
  if (by_attribute) {
    if (args.pos.empty()) return runtime_error("Missing parameter for attribute name");
    attribute = args.pos[0];
    off = 1;
  }
  std::optional<std::string> test_name;
  call_args rest;
  if (args.pos.size() > off) {
    test_name = py_str(args.pos[off]);
    rest.pos.assign(args.pos.begin() + static_cast<std::ptrdiff_t>(off + 1), args.pos.end());
    rest.kw = args.kw;
  }
  SPITE_TPL_LET(seq items, in.iterate(v));
  value_list out;
  for (const auto& item : *items) {
    value subject = item;
    if (attribute) {
      SPITE_TPL_LET(subject, attribute_path(in, item, *attribute));
    }
    bool pass = false;
    if (test_name) {
      SPITE_TPL_LET(pass, in.test(*test_name, subject, rest));
    } else {
      pass = truthy(subject);
    }
    if (pass == select) out.push_back(item);
  }
  return make_generator(std::move(out));
}

result<value> f_select(interp& in, const value& v, call_args& args) { return select_reject(in, v, args, true, false); }
result<value> f_reject(interp& in, const value& v, call_args& args) { return select_reject(in, v, args, false, false); }
result<value> f_selectattr(interp& in, const value& v, call_args& args) { return select_reject(in, v, args, true, true); }
result<value> f_rejectattr(interp& in, const value& v, call_args& args) {
  return select_reject(in, v, args, false, true);
}

result<value> f_reverse(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "reverse", {}));
  (void)a;
  if (v.is_string()) return slice_value(v, std::nullopt, std::nullopt, -1);
  if (v.is_none() || is_number(v)) return runtime_error("argument must be iterable");
  const bool reversible = v.is_list() || v.is_dict() || v.is_undefined();
  SPITE_TPL_LET(seq items, in.iterate(v));
  value_list out(items->rbegin(), items->rend());
  if (!reversible) return value(std::move(out));  // a generator: jinja2 reverses a list copy
  return make_generator(std::move(out), v.is_dict() ? "dict_reversekeyiterator" : "list_reverseiterator");
}

result<value> f_batch(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "batch", {"linecount", "fill_with"}, 1));
  if (!is_integral(*a[0])) return type_error(quoted_type(*a[0]) + " object cannot be interpreted as an integer");
  const std::int64_t n = to_i64(*a[0]);
  SPITE_TPL_LET(seq items, in.iterate(v));
  value_list out, tmp;
  for (const auto& item : *items) {
    if (static_cast<std::int64_t>(tmp.size()) == n) {
      out.push_back(value(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(item);
  }
  if (!tmp.empty()) {
    if (a[1] && !a[1]->is_none())
      while (static_cast<std::int64_t>(tmp.size()) < n) tmp.push_back(*a[1]);
    out.push_back(value(std::move(tmp)));
  }
  return make_generator(std::move(out));
}

result<value> f_slice(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "slice", {"slices", "fill_with"}, 1));
  if (!is_integral(*a[0])) return type_error(quoted_type(*a[0]) + " object cannot be interpreted as an integer");
  const std::int64_t slices = to_i64(*a[0]);
  if (slices == 0) return make_error(errc::malformed, "ZeroDivisionError: integer division or modulo by zero");
  SPITE_TPL_LET(seq items, in.iterate(v));
  const auto n = static_cast<std::int64_t>(items->size());
  const std::int64_t per = n / slices, extra = n % slices;
  SPITE_TRY(in.count_iterations(static_cast<std::size_t>(std::max<std::int64_t>(slices, 0))));
  value_list out;
  std::int64_t offset = 0;
  for (std::int64_t s = 0; s < slices; ++s) {
    const std::int64_t start = offset + s * per;
    if (s < extra) ++offset;
    const std::int64_t end = offset + (s + 1) * per;
    value_list part;
    for (std::int64_t i = std::max<std::int64_t>(start, 0); i < std::min(end, n); ++i)
      part.push_back((*items)[static_cast<std::size_t>(i)]);
    if (a[1] && !a[1]->is_none() && s >= extra) part.push_back(*a[1]);
    out.push_back(value(std::move(part)));
  }
  return make_generator(std::move(out));
}

result<value> f_groupby(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "groupby", {"attribute", "default", "case_sensitive"}, 1));
  const bool case_sensitive = a[2] && truthy(*a[2]);
  SPITE_TPL_LET(seq items, in.iterate(v));
  value_list keys;
  for (const auto& item : *items) {
    SPITE_TPL_LET(value k, attribute_path(in, item, *a[0], a[1]));
    keys.push_back(case_sensitive ? k : ignore_case(k));
  }
  SPITE_TPL_LET(auto order, sorted_order(keys, false));
  value_list out;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    value_list group;
    while (j < order.size() && keys[order[j]] == keys[order[i]]) group.push_back((*items)[order[j++]]);
    value grouper = keys[order[i]];
    if (!case_sensitive) {
      SPITE_TPL_LET(grouper, attribute_path(in, group[0], *a[0], a[1]));
    }
    out.push_back(make_tuple({grouper, value(std::move(group))}));
    i = j;
  }
  return value(std::move(out));
}

using filter_fn = result<value> (*)(interp&, const value&, call_args&);

struct seq_filter {
  std::string_view name;
  filter_fn fn;
};

constexpr seq_filter k_seq_filters[] = {
    {"batch", f_batch},       {"dictsort", f_dictsort}, {"groupby", f_groupby}, {"join", f_join},
    {"map", f_map},           {"max", f_max},           {"min", f_min},         {"reject", f_reject},
    {"rejectattr", f_rejectattr}, {"reverse", f_reverse}, {"select", f_select},  {"selectattr", f_selectattr},
    {"slice", f_slice},       {"sort", f_sort},         {"sum", f_sum},         {"unique", f_unique},
};

const seq_filter* find_seq_filter(std::string_view name) {
  for (const auto& f : k_seq_filters)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace

bool is_seq_filter(std::string_view name) { return find_seq_filter(name) != nullptr; }

result<value> apply_seq_filter(interp& in, std::string_view name, const value& input, call_args& args) {
  // Generator filters bind their arguments when called and do the rest when consumed.
  if (name == "unique") SPITE_TRY(bind_args(args, name, {"case_sensitive", "attribute"}));
  if (name == "batch") SPITE_TRY(bind_args(args, name, {"linecount", "fill_with"}, 1));
  if (name == "slice") SPITE_TRY(bind_args(args, name, {"slices", "fill_with"}, 1));
  auto r = find_seq_filter(name)->fn(in, input, args);
  static constexpr std::string_view lazy[] = {"map", "select", "reject", "selectattr", "rejectattr", "unique", "batch", "slice"};
  for (auto l : lazy)
    if (l == name) return lazy_generator(std::move(r));
  return r;
}

}  // namespace spite::tokenizer::template_detail
