// Expression evaluation.
#include "template/format.hpp"
#include "template/interp.hpp"

namespace spite::tokenizer::template_detail {

error interp::locate(error e, int line) {
  located_ = true;
  if (e.code == errc::invalid_argument) return e;  // raise_exception: the template's own words
  e.message = "chat template line " + std::to_string(line) + ": " + e.message;
  return e;
}

error interp::too_deep() const {
  return limit_error("template nesting deeper than " + std::to_string(opts_.max_nesting) + " levels");
}

result<value> interp::eval(const expr& e, const scope_ptr& sc) {
  nesting_guard g(nesting_);
  if (nesting_ > opts_.max_nesting) return locate(too_deep(), e.line);
  auto r = eval_inner(e, sc);
  if (!r && !located_) return locate(std::move(r).err(), e.line);
  return r;
}

result<call_args> interp::eval_args(const call_spec& spec, const scope_ptr& sc) {
  call_args a;
  a.pos.reserve(spec.args.size());
  for (const auto& x : spec.args) {
    SPITE_TPL_LET(value v, eval(*x, sc));
    a.pos.push_back(std::move(v));
  }
  for (const auto& [k, x] : spec.kwargs) {
    SPITE_TPL_LET(value v, eval(*x, sc));
    a.kw.emplace_back(k, std::move(v));
  }
  if (spec.dyn_args) {
    SPITE_TPL_LET(value v, eval(*spec.dyn_args, sc));
    SPITE_TPL_LET(seq items, iterate(v));
    for (const auto& x : *items) a.pos.push_back(x);
  }
  if (spec.dyn_kwargs) {
    SPITE_TPL_LET(value v, eval(*spec.dyn_kwargs, sc));
    if (!v.is_dict()) return type_error("argument after ** must be a mapping, not " + type_name(v));
    for (const auto& [k, x] : v.as_dict()) {
      if (!k.is_string()) return type_error("keywords must be strings");
      a.kw.emplace_back(k.as_string(), x);
    }
  }
  return a;
}

result<value> interp::eval_compare(const expr& e, const scope_ptr& sc) {
  SPITE_TPL_LET(value left, eval(*e.items[0], sc));
  for (std::size_t i = 0; i < e.cmp.size(); ++i) {
    SPITE_TPL_LET(value right, eval(*e.items[i + 1], sc));
    SPITE_TPL_LET(bool r, compare(e.cmp[i], left, right));
    if (!r) return value(false);
    left = std::move(right);
  }
  return value(true);
}

namespace {

// Literals jinja2's optimizer folds when it compiles the template.
bool is_constant(const expr* e) {
  if (!e) return true;
  if (e->kind == expr_kind::constant) return true;
  if (e->kind != expr_kind::list && e->kind != expr_kind::tuple && e->kind != expr_kind::dict) return false;
  for (const auto& i : e->items)
    if (!is_constant(i.get())) return false;
  return true;
}

}  // namespace

// jinja2 compiles a slice to Python's own subscription, so a bad slice raises; but a slice of
// literals is folded at compile time through the sandbox's getitem, which gives undefined.
result<value> interp::eval_slice(const expr& e, const scope_ptr& sc) {
  const expr& slice = *e.items[1];
  SPITE_TPL_LET(value obj, eval(*e.items[0], sc));
  std::optional<std::int64_t> parts[3];
  bool bad_index = false;
  for (int i = 0; i < 3; ++i) {
    if (!slice.items[i]) continue;
    SPITE_TPL_LET(value v, eval(*slice.items[i], sc));
    if (is_integral(v)) {
      parts[i] = to_i64(v);
    } else if (!v.is_none()) {
      bad_index = true;
    }
  }
  const bool folded = is_constant(e.items[0].get()) && is_constant(slice.items[0].get()) &&
                      is_constant(slice.items[1].get()) && is_constant(slice.items[2].get());
  if (obj.is_undefined()) return undefined_error(obj);
  const bool sliceable =
      obj.is_string() || (obj.is_list() && (obj.flavor() == value::flavour::plain || obj.flavor() == value::flavour::tuple));
  if (!sliceable || bad_index) {
    if (folded) return missing_item(obj, value("slice"));
    if (!sliceable)
      return type_error(obj.is_dict() ? std::string("unhashable type: 'slice'") : quoted_type(obj) + " object is not subscriptable");
    return type_error("slice indices must be integers or None or have an __index__ method");
  }
  return slice_value(obj, parts[0], parts[1], parts[2]);
}

result<value> interp::eval_inner(const expr& e, const scope_ptr& sc) {
  switch (e.kind) {
    case expr_kind::constant: return e.constant;
    case expr_kind::name: {
      if (const value* v = sc->find(e.name)) return *v;
      if (auto g = find_global(e.name)) return std::move(*g);
      return value::undefined("'" + e.name + "' is undefined");
    }
    case expr_kind::list:
    case expr_kind::tuple: {
      value_list items;
      items.reserve(e.items.size());
      for (const auto& x : e.items) {
        SPITE_TPL_LET(value v, eval(*x, sc));
        items.push_back(std::move(v));
      }
      return e.kind == expr_kind::list ? value(std::move(items)) : make_tuple(std::move(items));
    }
    case expr_kind::dict: {
      value_dict d;
      for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
        SPITE_TPL_LET(value k, eval(*e.items[i], sc));
        SPITE_TPL_LET(value v, eval(*e.items[i + 1], sc));
        if ((k.is_list() && k.flavor() != value::flavour::tuple) || k.is_dict() || k.is_undefined())
          return type_error("unhashable type: '" + type_name(k) + "'");
        d.set(std::move(k), std::move(v));
      }
      return value(std::move(d));
    }
    case expr_kind::getattr: {
      SPITE_TPL_LET(value obj, eval(*e.items[0], sc));
      return getattr(obj, e.name);
    }
    case expr_kind::getitem: {
      if (e.items[1]->kind == expr_kind::slice) return eval_slice(e, sc);
      SPITE_TPL_LET(value obj, eval(*e.items[0], sc));
      SPITE_TPL_LET(value key, eval(*e.items[1], sc));
      return getitem(obj, key);
    }
    case expr_kind::slice: return runtime_error("slice outside a subscript");
    case expr_kind::call: {
      SPITE_TPL_LET(value callee, eval(*e.items[0], sc));
      SPITE_TPL_LET(call_args args, eval_args(e.args, sc));
      return call(callee, std::move(args));
    }
    case expr_kind::filter: {
      SPITE_TPL_LET(value input, eval(*e.items[0], sc));
      SPITE_TPL_LET(call_args args, eval_args(e.args, sc));
      return filter(e.name, input, std::move(args));
    }
    case expr_kind::test: {
      SPITE_TPL_LET(value v, eval(*e.items[0], sc));
      SPITE_TPL_LET(call_args args, eval_args(e.args, sc));
      SPITE_TPL_LET(bool r, test(e.name, v, std::move(args)));
      return value(r);
    }
    case expr_kind::op_not: {
      SPITE_TPL_LET(value v, eval(*e.items[0], sc));
      return value(!truthy(v));
    }
    case expr_kind::neg:
    case expr_kind::pos: {
      SPITE_TPL_LET(value v, eval(*e.items[0], sc));
      if (v.is_undefined()) return undefined_error(v);
      const bool neg = e.kind == expr_kind::neg;
      if (v.is_float()) return value(neg ? -v.as_float() : v.as_float());
      if (is_integral(v)) {
        const std::int64_t i = to_i64(v);
        if (!neg) return value(i);
        if (i == INT64_MIN) return limit_error("integer overflow");
        return value(-i);
      }
      return type_error(std::string("bad operand type for unary ") + (neg ? "-" : "+") + ": '" + type_name(v) + "'");
    }
    case expr_kind::binary: {
      SPITE_TPL_LET(value a, eval(*e.items[0], sc));
      SPITE_TPL_LET(value b, eval(*e.items[1], sc));
      return binary(e.op, a, b);
    }
    case expr_kind::compare: return eval_compare(e, sc);
    case expr_kind::op_and:
    case expr_kind::op_or: {
      SPITE_TPL_LET(value a, eval(*e.items[0], sc));
      if (truthy(a) == (e.kind == expr_kind::op_or)) return a;
      return eval(*e.items[1], sc);
    }
    case expr_kind::concat: {
      std::string s;
      for (const auto& x : e.items) {
        SPITE_TPL_LET(value v, eval(*x, sc));
        s += py_str(v);
        SPITE_TRY(check_size(s.size()));
      }
      return value(std::move(s));
    }
    case expr_kind::cond: {
      SPITE_TPL_LET(value t, eval(*e.items[1], sc));
      if (truthy(t)) return eval(*e.items[0], sc);
      if (e.items[2]) return eval(*e.items[2], sc);
      return value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return runtime_error("unknown expression");
}

}  // namespace spite::tokenizer::template_detail
