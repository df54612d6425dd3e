// Statement execution: output, if, for, set, macros, call and filter blocks.
#include "template/format.hpp"
#include "template/interp.hpp"

namespace spite::tokenizer::template_detail {

result<std::string> interp::render(const program& prog, const value& context) {
  auto root = std::make_shared<scope>();
  if (context.is_dict()) root->context = &context.as_dict();
  std::string out;
  out_ = &out;
  SPITE_TPL_LET(flow f, exec(prog.body, root));
  (void)f;
  return out;
}

interp::~interp() {
  for (const auto& weak : tracked_) {
    const auto o = weak.lock();
    if (!o) continue;
    switch (o->kind) {
      case object_kind::macro: static_cast<macro_object&>(*o).closure.reset(); break;
      case object_kind::namespace_: static_cast<namespace_object&>(*o).attrs = value_dict{}; break;
      case object_kind::loop: {
        auto& l = static_cast<loop_object&>(*o);
        l.outer.reset();
        l.last_changed = value();
        break;
      }
      default: break;
    }
  }
}

value interp::track(std::shared_ptr<object> o) {
  tracked_.push_back(o);
  return value::from_object(std::move(o));
}

result<void> interp::emit(std::string_view text) {
  if (out_->size() + text.size() > opts_.max_output_bytes)
    return limit_error("output exceeds " + std::to_string(opts_.max_output_bytes) + " bytes");
  out_->append(text);
  return ok();
}

result<void> interp::check_size(std::size_t bytes) const {
  if (bytes > opts_.max_output_bytes)
    return limit_error("a string exceeds " + std::to_string(opts_.max_output_bytes) + " bytes");
  return ok();
}

result<void> interp::count_iterations(std::size_t n) {
  iterations_ += n;
  if (iterations_ > opts_.max_loop_iterations)
    return limit_error("more than " + std::to_string(opts_.max_loop_iterations) + " loop iterations");
  return ok();
}

result<flow> interp::exec(const stmt_list& body, const scope_ptr& sc) {
  nesting_guard g(nesting_);
  if (nesting_ > opts_.max_nesting) return too_deep();
  for (const auto& s : body) {
    auto r = exec_stmt(*s, sc);
    if (!r) {
      if (!located_) return locate(std::move(r).err(), s->line);
      return r;
    }
    if (*r != flow::normal) return r;
  }
  return flow::normal;
}

result<std::string> interp::capture(const stmt_list& body, const scope_ptr& sc) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  auto r = exec(body, sc);
  out_ = saved;
  if (!r) return std::move(r).err();
  return buffer;
}

namespace {

// The filters of a filter block or block set: the innermost has no input expression.
result<value> apply_filter_chain(interp& in, const expr& f, value input, const scope_ptr& sc) {
  if (f.items[0]) {
    SPITE_TPL_LET(value inner, apply_filter_chain(in, *f.items[0], std::move(input), sc));
    input = std::move(inner);
  }
  SPITE_TPL_LET(call_args args, in.eval_args(f.args, sc));
  return in.filter(f.name, input, std::move(args));
}

}  // namespace

result<void> interp::assign(const target& t, value v, const scope_ptr& sc) {
  switch (t.type) {
    case target::kind::name: sc->set(t.name, std::move(v)); return ok();
    case target::kind::ns_attr: {
      const value* ns = sc->find(t.name);
      if (!ns || !is_object(*ns, object_kind::namespace_))
        return runtime_error("cannot assign attribute on non-namespace object");
      as<namespace_object>(*ns).attrs.set(value(t.attr), std::move(v));
      return ok();
    }
    case target::kind::tuple: {
      SPITE_TPL_LET(seq items, iterate(v));
      const std::size_t want = t.items.size();
      if (items->size() > want) return value_error("too many values to unpack (expected " + std::to_string(want) + ")");
      if (items->size() < want)
        return value_error("not enough values to unpack (expected " + std::to_string(want) + ", got " +
                           std::to_string(items->size()) + ")");
      for (std::size_t i = 0; i < want; ++i) SPITE_TRY(assign(t.items[i], (*items)[i], sc));
      return ok();
    }
  }
  return ok();
}

result<flow> interp::exec_for(const stmt& s, const value& iterable, const scope_ptr& sc, std::size_t depth0) {
  SPITE_TPL_LET(seq items, iterate(iterable));
  value list = items.holder;
  if (s.cond) {
    value_list kept;
    for (const auto& item : *items) {
      SPITE_TRY(count_iterations(1));
      auto test_scope = child_scope(sc);
      SPITE_TRY(assign(s.tgt, item, test_scope));
      SPITE_TPL_LET(value keep, eval(*s.cond, test_scope));
      if (truthy(keep)) kept.push_back(item);
    }
    list = value(std::move(kept));
  }
  const value_list& elements = list.as_list();
  if (elements.empty()) {
    if (s.else_body.empty()) return flow::normal;
    SPITE_TPL_LET(flow f, exec(s.else_body, child_scope(sc)));
    (void)f;
    return flow::normal;
  }
  auto loop = std::make_shared<loop_object>();
  loop->items = list;
  loop->depth0 = depth0;
  if (s.recursive) {
    loop->recursive = &s;
    loop->outer = sc;
  }
  const value loop_value = track(loop);
  for (std::size_t i = 0; i < elements.size(); ++i) {
    SPITE_TRY(count_iterations(1));
    loop->index0 = i;
    auto iteration = child_scope(sc);
    SPITE_TRY(assign(s.tgt, elements[i], iteration));
    iteration->set("loop", loop_value);
    SPITE_TPL_LET(flow f, exec(s.body, iteration));
    if (f == flow::break_ || loop->exhausted) break;
  }
  return flow::normal;
}

// loop(children) in a recursive for: the body again over the children, one level deeper.
result<value> interp::call_loop(const loop_object& loop, call_args args) {
  if (!loop.recursive) return type_error("'LoopContext' object is not callable");
  if (args.pos.size() != 1 || !args.kw.empty()) return type_error("loop() takes exactly one argument");
  if (depth_ >= opts_.max_call_depth)
    return limit_error("recursive loop calls nested deeper than " + std::to_string(opts_.max_call_depth));
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  ++depth_;
  auto r = exec_for(*loop.recursive, args.pos[0], loop.outer, loop.depth0 + 1);
  --depth_;
  out_ = saved;
  if (!r) return std::move(r).err();
  return value(std::move(buffer));
}

result<value> interp::call_macro(const macro_object& m, call_args args) {
  const macro_def& def = *m.def;
  if (depth_ >= opts_.max_call_depth)
    return limit_error("macro calls nested deeper than " + std::to_string(opts_.max_call_depth));
  const std::string who = "macro '" + def.name + "'";
  auto sc = child_scope(m.closure);
  const std::size_t n = def.params.size();
  std::vector<bool> bound(n, false);
  for (std::size_t i = 0; i < args.pos.size() && i < n; ++i) {
    sc->set(def.params[i], args.pos[i]);
    bound[i] = true;
  }
  if (args.pos.size() > n) {
    if (!def.uses_varargs) return type_error(who + " takes not more than " + std::to_string(n) + " argument(s)");
    sc->set("varargs", make_tuple(value_list(args.pos.begin() + static_cast<std::ptrdiff_t>(n), args.pos.end())));
  } else if (def.uses_varargs) {
    sc->set("varargs", make_tuple({}));
  }
  value_dict extra;
  bool has_caller = false;
  for (auto& [k, v] : args.kw) {
    std::size_t idx = n;
    for (std::size_t i = 0; i < n; ++i)
      if (def.params[i] == k) idx = i;
    if (idx < n) {
      if (bound[idx]) return type_error(who + " got multiple values for argument '" + k + "'");
      sc->set(k, std::move(v));
      bound[idx] = true;
    } else if (k == "caller" && def.uses_caller) {
      sc->set("caller", std::move(v));
      has_caller = true;
    } else if (def.uses_kwargs) {
      extra.set(value(k), std::move(v));
    } else {
      return type_error(who + " takes no keyword argument '" + k + "'");
    }
  }
  if (def.uses_kwargs) sc->set("kwargs", value(std::move(extra)));
  if (def.uses_caller && !has_caller) sc->set("caller", value::undefined("No caller defined"));
  const std::size_t first_default = n - def.defaults.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (bound[i]) continue;
    if (i >= first_default) {
      SPITE_TPL_LET(value d, eval(*def.defaults[i - first_default], sc));
      sc->set(def.params[i], std::move(d));
    } else {
      sc->set(def.params[i], value::undefined("parameter '" + def.params[i] + "' was not provided"));
    }
  }
  ++depth_;
  auto text = capture(def.body, sc);
  --depth_;
  if (!text) return std::move(text).err();
  return value(std::move(*text));
}

result<flow> interp::exec_stmt(const stmt& s, const scope_ptr& sc) {
  switch (s.kind) {
    case stmt_kind::text: SPITE_TRY(emit(s.text)); return flow::normal;
    case stmt_kind::print: {
      SPITE_TPL_LET(value v, eval(*s.value_expr, sc));
      if (v.is_string()) {
        SPITE_TRY(emit(v.as_string()));
      } else {
        SPITE_TRY(emit(py_str(v)));
      }
      return flow::normal;
    }
    case stmt_kind::if_: {
      SPITE_TPL_LET(value t, eval(*s.value_expr, sc));
      return exec(truthy(t) ? s.body : s.else_body, sc);
    }
    case stmt_kind::for_: {
      SPITE_TPL_LET(value iterable, eval(*s.value_expr, sc));
      return exec_for(s, iterable, sc, 0);
    }
    case stmt_kind::set: {
      SPITE_TPL_LET(value v, eval(*s.value_expr, sc));
      SPITE_TRY(assign(s.tgt, std::move(v), sc));
      return flow::normal;
    }
    case stmt_kind::set_block: {
      SPITE_TPL_LET(std::string text, capture(s.body, child_scope(sc)));
      value v(std::move(text));
      if (s.value_expr) {
        SPITE_TPL_LET(value filtered, apply_filter_chain(*this, *s.value_expr, std::move(v), sc));
        v = std::move(filtered);
      }
      SPITE_TRY(assign(s.tgt, std::move(v), sc));
      return flow::normal;
    }
    case stmt_kind::macro:
      sc->set(s.macro->name, track(std::make_shared<macro_object>(s.macro.get(), sc)));
      return flow::normal;
    case stmt_kind::call_block: {
      const expr& call_expr = *s.value_expr;
      SPITE_TPL_LET(value callee, eval(*call_expr.items[0], sc));
      SPITE_TPL_LET(call_args args, eval_args(call_expr.args, sc));
      args.kw.emplace_back("caller", track(std::make_shared<macro_object>(s.macro.get(), sc)));
      SPITE_TPL_LET(value r, call(callee, std::move(args)));
      SPITE_TRY(emit(py_str(r)));
      return flow::normal;
    }
    case stmt_kind::filter_block: {
      SPITE_TPL_LET(std::string text, capture(s.body, child_scope(sc)));
      SPITE_TPL_LET(value v, apply_filter_chain(*this, *s.value_expr, value(std::move(text)), sc));
      SPITE_TRY(emit(py_str(v)));
      return flow::normal;
    }
    case stmt_kind::scope: {
      auto inner = child_scope(sc);
      for (const auto& [t, e] : s.with_assignments) {
        SPITE_TPL_LET(value v, eval(*e, sc));
        SPITE_TRY(assign(t, std::move(v), inner));
      }
      SPITE_TPL_LET(flow f, exec(s.body, inner));
      return f;
    }
    case stmt_kind::break_: return flow::break_;
    case stmt_kind::continue_: return flow::continue_;
  }
  return flow::normal;
}

}  // namespace spite::tokenizer::template_detail
