// Operators, attribute and item access, calls and iteration with Python's and jinja2's semantics.
#include <cmath>
#include <limits>

#include "template/format.hpp"
#include "template/interp.hpp"
#include "template/text.hpp"

namespace spite::tokenizer::template_detail {

error undefined_error(const value& u) {
  const std::string& hint = u.undefined_hint();
  if (u.flavor() == value::flavour::unsafe) return security_error(hint);
  return make_error(errc::malformed, "UndefinedError: " + (hint.empty() ? std::string("undefined value") : hint));
}

bool truthy(const value& v) {
  switch (v.type()) {
    case value::kind::undefined:
    case value::kind::none: return false;
    case value::kind::boolean: return v.as_bool();
    case value::kind::integer: return v.as_int() != 0;
    case value::kind::floating: return v.as_float() != 0;
    case value::kind::string: return !v.as_string().empty();
    case value::kind::list: return !v.as_list().empty();
    case value::kind::dict: return !v.as_dict().empty();
    case value::kind::object:
      if (is_object(v, object_kind::loop)) return as<loop_object>(v).size() != 0;
      return true;
  }
  return false;
}

value make_generator(value_list items, std::string type_name) {
  return value::from_object(std::make_shared<generator_object>(std::move(items), std::move(type_name)));
}

value lazy_generator(result<value> made) {
  if (made) return std::move(*made);
  auto g = std::make_shared<generator_object>(value_list{});
  g->failure = std::move(made).err();
  return value::from_object(std::move(g));
}

namespace {

std::string object_type_repr(const value& obj) {
  if (obj.is_none()) return "None";
  return type_name(obj) + " object";
}

}  // namespace

value missing_attribute(const value& obj, std::string_view name) {
  return value::undefined(py_string_repr(object_type_repr(obj)) + " has no attribute " + py_string_repr(name));
}

value missing_item(const value& obj, const value& key) {
  if (key.is_string()) return missing_attribute(obj, key.as_string());
  return value::undefined(py_string_repr(object_type_repr(obj)) + " has no element " + py_repr(key));
}

result<std::vector<std::optional<value>>> bind_args(const call_args& args, std::string_view function,
                                                    std::initializer_list<std::string_view> params,
                                                    std::size_t required) {
  std::vector<std::optional<value>> out(params.size());
  if (args.pos.size() > params.size())
    return type_error(std::string(function) + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
                      std::to_string(args.pos.size()) + " given)");
  for (std::size_t i = 0; i < args.pos.size(); ++i) out[i] = args.pos[i];
  for (const auto& [k, v] : args.kw) {
    std::size_t idx = 0;
    for (auto p : params) {
      if (p == k) break;
      ++idx;
    }
    if (idx == params.size())
      return type_error(std::string(function) + "() got an unexpected keyword argument '" + k + "'");
    if (out[idx]) return type_error(std::string(function) + "() got multiple values for argument '" + k + "'");
    out[idx] = v;
  }
  for (std::size_t i = 0; i < required; ++i)
    if (!out[i])
      return type_error(std::string(function) + "() missing required argument '" + std::string(*(params.begin() + i)) +
                        "'");
  return out;
}

result<value> interp::filter(std::string_view name, const value& input, call_args args) {
  return apply_filter(*this, name, input, args);
}

result<bool> interp::test(std::string_view name, const value& v, call_args args) {
  return apply_test(*this, name, v, args);
}

namespace {

value loop_attribute(const value& self, const std::string& name) {
  const auto& l = as<loop_object>(self);
  const auto n = static_cast<std::int64_t>(l.size());
  const auto i = static_cast<std::int64_t>(l.index0);
  if (name == "index") return value(i + 1);
  if (name == "index0") return value(i);
  if (name == "revindex") return value(n - i);
  if (name == "revindex0") return value(n - i - 1);
  if (name == "first") return value(i == 0);
  if (name == "last") return value(i == n - 1);
  if (name == "length") return value(n);
  if (name == "depth") return value(static_cast<std::int64_t>(l.depth0 + 1));
  if (name == "depth0") return value(static_cast<std::int64_t>(l.depth0));
  if (name == "previtem")
    return i == 0 ? value::undefined("there is no previous item") : l.items.as_list()[l.index0 - 1];
  if (name == "nextitem") return i == n - 1 ? value::undefined("there is no next item") : l.items.as_list()[l.index0 + 1];
  if (name == "cycle" || name == "changed") return value::from_object(std::make_shared<method_object>(self, name));
  return missing_attribute(self, name);
}

bool plain_sequence(const value& v) {
  return v.is_list() && (v.flavor() == value::flavour::plain || v.flavor() == value::flavour::tuple);
}

}  // namespace

result<value> interp::getattr(const value& obj, const std::string& name) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (is_object(obj, object_kind::namespace_)) {
    if (const value* v = as<namespace_object>(obj).attrs.find(name)) return *v;
    return missing_attribute(obj, name);
  }
  if (is_object(obj, object_kind::loop)) return loop_attribute(obj, name);
  // groupby() yields (grouper, list) named tuples.
  if (obj.is_list() && obj.flavor() == value::flavour::tuple && obj.as_list().size() == 2 &&
      (name == "grouper" || name == "list"))
    return obj.as_list()[name == "grouper" ? 0 : 1];
  if (!name.empty() && name[0] != '_')
    if (auto m = find_method(obj, name)) return std::move(*m);
  if (obj.is_dict())
    if (const value* v = obj.as_dict().find(name)) return *v;
  return missing_attribute(obj, name);
}

result<value> interp::getitem(const value& obj, const value& key) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (obj.is_dict()) {
    if (!(key.is_list() && key.flavor() != value::flavour::tuple) && !key.is_dict())
      if (const value* v = obj.as_dict().find(key)) return *v;
  } else if ((plain_sequence(obj) || obj.is_string()) && is_integral(key)) {
    std::int64_t i = to_i64(key);
    if (obj.is_string()) {
      const auto cps = decode_utf8(obj.as_string());
      const auto n = static_cast<std::int64_t>(cps.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        std::string c;
        append_utf8(c, cps[static_cast<std::size_t>(i)]);
        return is_markup(obj) ? markup(std::move(c)) : value(std::move(c));
      }
    } else {
      const auto& items = obj.as_list();
      const auto n = static_cast<std::int64_t>(items.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return items[static_cast<std::size_t>(i)];
    }
  }
  // Not found: jinja2 falls back to the attribute of that name.
  if (key.is_string()) {
    if (is_object(obj, object_kind::namespace_) || is_object(obj, object_kind::loop)) return getattr(obj, key.as_string());
    const std::string& name = key.as_string();
    if (!name.empty() && name[0] != '_')
      if (auto m = find_method(obj, name)) return std::move(*m);
  }
  return missing_item(obj, key);
}

result<value> interp::call(const value& callee, call_args args) {
  if (callee.is_undefined()) return undefined_error(callee);
  if (callee.is_object()) {
    switch (callee.object()->kind) {
      case object_kind::macro: return call_macro(as<macro_object>(callee), std::move(args));
      case object_kind::builtin: return call_builtin(*this, as<builtin_object>(callee).id, args);
      case object_kind::method: return call_method(*this, as<method_object>(callee), args);
      case object_kind::loop: return call_loop(as<loop_object>(callee), std::move(args));
      default: break;
    }
  }
  return type_error(quoted_type(callee) + " object is not callable");
}

namespace {

error unsupported_operands(const char* op, const value& a, const value& b) {
  return type_error(std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) + "' and '" +
                    type_name(b) + "'");
}

error overflow() { return limit_error("integer overflow (template integers are 64-bit)"); }

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t py_mod(std::int64_t a, std::int64_t b) {
  std::int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double py_fmod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  if (r == 0) r = std::copysign(0.0, b);
  return r;
}

result<value> repeat(interp& in, const value& seqv, std::int64_t times) {
  if (times < 0) times = 0;
  if (seqv.is_string()) {
    const std::string& s = seqv.as_string();
    if (!s.empty()) SPITE_TRY(in.check_size(s.size() * static_cast<std::size_t>(std::min<std::int64_t>(times, 1 << 30))));
    std::string out;
    out.reserve(s.size() * static_cast<std::size_t>(times));
    for (std::int64_t i = 0; i < times; ++i) out += s;
    return is_markup(seqv) ? markup(std::move(out)) : value(std::move(out));
  }
  const auto& items = seqv.as_list();
  if (!items.empty() && times > 0) SPITE_TRY(in.count_iterations(items.size() * static_cast<std::size_t>(times)));
  value_list out;
  for (std::int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return value(std::move(out)).with_flavour(seqv.flavor());
}

}  // namespace

result<value> interp::binary(binop op, const value& a, const value& b) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  const bool nums = is_number(a) && is_number(b);
  const bool ints = is_integral(a) && is_integral(b);
  switch (op) {
    case binop::add: {
      if (ints) {
        std::int64_t r;
        if (__builtin_add_overflow(to_i64(a), to_i64(b), &r)) return overflow();
        return value(r);
      }
      if (nums) return value(to_f64(a) + to_f64(b));
      if (a.is_string() && b.is_string()) {
        // Markup escapes the plain operand (markupsafe's __add__ / __radd__).
        const bool ma = is_markup(a), mb = is_markup(b);
        std::string s = (mb && !ma) ? html_escape(a.as_string()) : a.as_string();
        s += (ma && !mb) ? html_escape(b.as_string()) : b.as_string();
        SPITE_TRY(check_size(s.size()));
        return (ma || mb) ? markup(std::move(s)) : value(std::move(s));
      }
      if (plain_sequence(a) && plain_sequence(b) && a.flavor() == b.flavor()) {
        value_list out = a.as_list();
        out.insert(out.end(), b.as_list().begin(), b.as_list().end());
        return value(std::move(out)).with_flavour(a.flavor());
      }
      if (a.is_string() || plain_sequence(a))
        return type_error("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
      return unsupported_operands("+", a, b);
    }
    case binop::sub:
      if (ints) {
        std::int64_t r;
        if (__builtin_sub_overflow(to_i64(a), to_i64(b), &r)) return overflow();
        return value(r);
      }
      if (nums) return value(to_f64(a) - to_f64(b));
      return unsupported_operands("-", a, b);
    case binop::mul:
      if (ints) {
        std::int64_t r;
        if (__builtin_mul_overflow(to_i64(a), to_i64(b), &r)) return overflow();
        return value(r);
      }
      if (nums) return value(to_f64(a) * to_f64(b));
      if ((a.is_string() || plain_sequence(a)) && is_integral(b)) return repeat(*this, a, to_i64(b));
      if ((b.is_string() || plain_sequence(b)) && is_integral(a)) return repeat(*this, b, to_i64(a));
      if (a.is_string() || plain_sequence(a) || b.is_string() || plain_sequence(b))
        return type_error("can't multiply sequence by non-int of type '" +
                          type_name(a.is_string() || plain_sequence(a) ? b : a) + "'");
      return unsupported_operands("*", a, b);
    case binop::div:
      if (!nums) return unsupported_operands("/", a, b);
      if (to_f64(b) == 0) return make_error(errc::malformed, "ZeroDivisionError: division by zero");
      return value(to_f64(a) / to_f64(b));
    case binop::floordiv:
      if (!nums) return unsupported_operands("//", a, b);
      if (to_f64(b) == 0) return make_error(errc::malformed, "ZeroDivisionError: integer division or modulo by zero");
      if (ints) {
        if (to_i64(a) == std::numeric_limits<std::int64_t>::min() && to_i64(b) == -1) return overflow();
        return value(floor_div(to_i64(a), to_i64(b)));
      }
      return value(std::floor(to_f64(a) / to_f64(b)));
    case binop::mod:
      if (a.is_string()) {
        SPITE_TPL_LET(std::string s, percent_format(a.as_string(), b));
        SPITE_TRY(check_size(s.size()));
        return value(std::move(s));
      }
      if (!nums) return unsupported_operands("%", a, b);
      if (to_f64(b) == 0) return make_error(errc::malformed, "ZeroDivisionError: integer division or modulo by zero");
      if (ints) {
        if (to_i64(b) == -1) return value(std::int64_t{0});
        return value(py_mod(to_i64(a), to_i64(b)));
      }
      return value(py_fmod(to_f64(a), to_f64(b)));
    case binop::pow: {
      if (!nums) return unsupported_operands("** or pow()", a, b);
      if (ints && to_i64(b) >= 0) {
        std::int64_t base = to_i64(a), e = to_i64(b), r = 1;
        while (e > 0) {
          if (e & 1)
            if (__builtin_mul_overflow(r, base, &r)) return overflow();
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) return overflow();
        }
        return value(r);
      }
      if (to_f64(a) == 0 && to_f64(b) < 0)
        return make_error(errc::malformed, "ZeroDivisionError: 0.0 cannot be raised to a negative power");
      return value(std::pow(to_f64(a), to_f64(b)));
    }
  }
  return runtime_error("unknown operator");
}

namespace {

// Python's ordering: numbers with numbers, strings with strings, lists and tuples element-wise.
result<int> compare3(const value& a, const value& b) {
  if (is_number(a) && is_number(b)) {
    if (is_integral(a) && is_integral(b)) return to_i64(a) < to_i64(b) ? -1 : to_i64(a) > to_i64(b) ? 1 : 0;
    const double x = to_f64(a), y = to_f64(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (plain_sequence(a) && plain_sequence(b) && a.flavor() == b.flavor()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i] == y[i]) continue;
      return compare3(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return type_error("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

}  // namespace

result<bool> py_less(const value& a, const value& b) {
  if (a.is_float() || b.is_float())
    if (is_number(a) && is_number(b)) return to_f64(a) < to_f64(b);
  SPITE_TPL_LET(int c, compare3(a, b));
  return c < 0;
}

result<bool> interp::compare(cmpop op, const value& a, const value& b) {
  switch (op) {
    case cmpop::eq: return a == b;
    case cmpop::ne: return !(a == b);
    case cmpop::in: return contains(b, a);
    case cmpop::not_in: {
      SPITE_TPL_LET(bool r, contains(b, a));
      return !r;
    }
    default: break;
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if ((a.is_float() || b.is_float()) && is_number(a) && is_number(b)) {
    const double x = to_f64(a), y = to_f64(b);
    switch (op) {
      case cmpop::lt: return x < y;
      case cmpop::le: return x <= y;
      case cmpop::gt: return x > y;
      default: return x >= y;
    }
  }
  auto c = compare3(a, b);
  if (!c) {
    static const char* names[] = {"==", "!=", "<", "<=", ">", ">="};
    return type_error(std::string("'") + names[static_cast<int>(op)] + "' not supported between instances of '" +
                      type_name(a) + "' and '" + type_name(b) + "'");
  }
  switch (op) {
    case cmpop::lt: return *c < 0;
    case cmpop::le: return *c <= 0;
    case cmpop::gt: return *c > 0;
    default: return *c >= 0;
  }
}

result<bool> interp::contains(const value& container, const value& item) {
  if (container.is_string()) {
    if (!item.is_string()) return type_error("'in <string>' requires string as left operand, not " + type_name(item));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) {
    if ((item.is_list() && item.flavor() != value::flavour::tuple) || item.is_dict())
      return type_error("unhashable type: '" + type_name(item) + "'");
    return container.as_dict().find(item) != nullptr;
  }
  if (is_object(container, object_kind::loop)) {
    SPITE_TPL_LET(seq items, iterate(container));
    for (const auto& x : *items)
      if (x == item) return true;
    return false;
  }
  if (container.is_list() || container.is_undefined() || is_object(container, object_kind::generator)) {
    if (is_object(container, object_kind::generator)) {
      auto& g = as<generator_object>(container);
      if (g.failure) return *g.failure;
      while (g.pos < g.items.size())
        if (g.items[g.pos++] == item) return true;
      return false;
    }
    if (container.is_undefined()) return false;
    for (const auto& x : container.as_list())
      if (x == item) return true;
    return false;
  }
  return type_error("argument of type '" + type_name(container) + "' is not iterable");
}

result<seq> interp::iterate(const value& v) {
  switch (v.type()) {
    case value::kind::list: return seq{v, &v.as_list()};
    case value::kind::undefined: {
      value empty{value_list{}};
      return seq{empty, &empty.as_list()};
    }
    case value::kind::dict: {
      value_list keys;
      keys.reserve(v.as_dict().size());
      for (const auto& [k, x] : v.as_dict()) keys.push_back(k);
      value holder(std::move(keys));
      return seq{holder, &holder.as_list()};
    }
    case value::kind::string: {
      value_list chars;
      const std::string& s = v.as_string();
      for (std::size_t i = 0; i < s.size();) {
        std::size_t len = 1;
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0xC0) len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        len = std::min(len, s.size() - i);
        std::string piece = s.substr(i, len);
        chars.push_back(is_markup(v) ? markup(std::move(piece)) : value(std::move(piece)));
        i += len;
      }
      value holder(std::move(chars));
      return seq{holder, &holder.as_list()};
    }
    case value::kind::object:
      if (is_object(v, object_kind::generator)) {
        auto& g = as<generator_object>(v);
        if (g.failure) return *g.failure;
        value holder(value_list(g.items.begin() + static_cast<std::ptrdiff_t>(g.pos), g.items.end()));
        g.pos = g.items.size();
        return seq{holder, &holder.as_list()};
      }
      if (is_object(v, object_kind::loop)) {
        // Iterating `loop` advances the loop itself, like jinja2's LoopContext: the rest of the
        // items come as (item, loop) pairs and the for statement ends after this iteration.
        auto& l = as<loop_object>(v);
        value_list rest;
        for (std::size_t i = l.index0 + 1; i < l.size(); ++i) rest.push_back(make_tuple({l.items.as_list()[i], v}));
        l.index0 += rest.size();
        l.exhausted = true;
        value holder(std::move(rest));
        return seq{holder, &holder.as_list()};
      }
      break;
    default: break;
  }
  return type_error(quoted_type(v) + " object is not iterable");
}

result<std::size_t> interp::length(const value& v) {
  switch (v.type()) {
    case value::kind::undefined: return std::size_t{0};
    case value::kind::string: return count_code_points(v.as_string());
    case value::kind::list: return v.as_list().size();
    case value::kind::dict: return v.as_dict().size();
    case value::kind::object:
      if (is_object(v, object_kind::loop)) return as<loop_object>(v).size();
      break;
    default: break;
  }
  return type_error("object of type '" + type_name(v) + "' has no len()");
}

result<value> slice_value(const value& obj, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                          std::optional<std::int64_t> step_opt) {
  const std::int64_t step = step_opt.value_or(1);
  if (step == 0) return value_error("slice step cannot be zero");
  u32string cps;
  if (obj.is_string()) cps = decode_utf8(obj.as_string());
  const auto n = static_cast<std::int64_t>(obj.is_string() ? cps.size() : obj.as_list().size());
  const auto adjust = [&](std::optional<std::int64_t> v, std::int64_t dflt) {
    if (!v) return dflt;
    std::int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  const std::int64_t lo = adjust(start, step > 0 ? 0 : n - 1);
  const std::int64_t hi = adjust(stop, step > 0 ? n : -1);
  std::vector<std::size_t> picks;
  for (std::int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) picks.push_back(static_cast<std::size_t>(i));
  if (obj.is_string()) {
    std::string out;
    for (auto i : picks) append_utf8(out, cps[i]);
    return is_markup(obj) ? markup(std::move(out)) : value(std::move(out));
  }
  value_list out;
  out.reserve(picks.size());
  for (auto i : picks) out.push_back(obj.as_list()[i]);
  return value(std::move(out)).with_flavour(obj.flavor());
}

}  // namespace spite::tokenizer::template_detail
