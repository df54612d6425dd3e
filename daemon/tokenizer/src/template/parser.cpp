#include <algorithm>

#include "template/parser_impl.hpp"

namespace spite::tokenizer::template_detail {
namespace {

// Whether the tree reads a name (for a macro's caller, varargs and kwargs).
bool reads_name(const expr* e, std::string_view name);
bool reads_name(const stmt_list& body, std::string_view name);

bool reads_name(const call_spec& c, std::string_view name) {
  for (const auto& a : c.args)
    if (reads_name(a.get(), name)) return true;
  for (const auto& [k, v] : c.kwargs)
    if (reads_name(v.get(), name)) return true;
  return reads_name(c.dyn_args.get(), name) || reads_name(c.dyn_kwargs.get(), name);
}

bool reads_name(const expr* e, std::string_view name) {
  if (!e) return false;
  if (e->kind == expr_kind::name && e->name == name) return true;
  for (const auto& i : e->items)
    if (reads_name(i.get(), name)) return true;
  return reads_name(e->args, name);
}

bool reads_name(const stmt_list& body, std::string_view name) {
  for (const auto& s : body) {
    if (reads_name(s->value_expr.get(), name) || reads_name(s->cond.get(), name) || reads_name(s->body, name) ||
        reads_name(s->else_body, name))
      return true;
    if (s->macro) {
      for (const auto& d : s->macro->defaults)
        if (reads_name(d.get(), name)) return true;
      if (reads_name(s->macro->body, name)) return true;
    }
    for (const auto& [t, v] : s->with_assignments)
      if (reads_name(v.get(), name)) return true;
  }
  return false;
}

}  // namespace

result<stmt_list> parser::parse_body(std::initializer_list<std::string_view> ends) {
  stmt_list body;
  while (cur().type != tok::eof) {
    const token& t = cur();
    if (t.type == tok::text) {
      auto s = std::make_unique<stmt>();
      s->kind = stmt_kind::text;
      s->line = t.line;
      s->text = t.text;
      body.push_back(std::move(s));
      advance();
    } else if (t.type == tok::var_begin) {
      advance();
      auto s = std::make_unique<stmt>();
      s->kind = stmt_kind::print;
      s->line = cur().line;
      auto e = parse_tuple(false, true, {}, false);
      if (!e) return std::move(e).err();
      s->value_expr = std::move(*e);
      SPITE_TRY(expect(tok::var_end, "end of print statement"));
      body.push_back(std::move(s));
    } else if (t.type == tok::block_begin) {
      advance();
      if (cur().type == tok::name && std::find(ends.begin(), ends.end(), cur().text) != ends.end()) return body;
      auto s = parse_statement();
      if (!s) return std::move(s).err();
      for (auto& x : *s) body.push_back(std::move(x));
      SPITE_TRY(expect(tok::block_end, "end of statement block"));
    } else {
      return fail("unexpected '" + describe(t) + "'");
    }
  }
  if (ends.size() != 0) {
    std::string names;
    for (auto e : ends) names += (names.empty() ? "'" : " or '") + std::string(e) + "'";
    return fail("unexpected end of template, expected " + names);
  }
  return body;
}

result<stmt_list> parser::parse_statement() {
  depth_guard g(depth_);
  if (depth_ > k_max_parse_depth) return fail("template nesting too deep");
  if (cur().type != tok::name) return fail("tag name expected");
  const std::string tag = cur().text;
  const int line = cur().line;
  auto s = std::make_unique<stmt>();
  s->line = line;
  stmt_list out;
  if (tag == "if") {
    advance();
    SPITE_TRY(parse_if(*s));
  } else if (tag == "for") {
    advance();
    SPITE_TRY(parse_for(*s));
  } else if (tag == "set") {
    advance();
    SPITE_TRY(parse_set(*s));
  } else if (tag == "macro") {
    advance();
    SPITE_TRY(parse_macro(*s));
  } else if (tag == "call") {
    advance();
    SPITE_TRY(parse_call_block(*s));
  } else if (tag == "filter") {
    advance();
    s->kind = stmt_kind::filter_block;
    auto f = parse_filter(nullptr, true);
    if (!f) return std::move(f).err();
    s->value_expr = std::move(*f);
    auto body = parse_statements({"endfilter"}, true);
    if (!body) return std::move(body).err();
    s->body = std::move(*body);
  } else if (tag == "generation" || tag == "with") {
    advance();
    s->kind = stmt_kind::scope;
    while (tag == "with" && cur().type != tok::block_end) {
      if (!s->with_assignments.empty()) SPITE_TRY(expect_op(","));
      auto t = parse_target(false, false, {}, false);
      if (!t) return std::move(t).err();
      SPITE_TRY(expect_op("="));
      auto v = parse_expression(true);
      if (!v) return std::move(v).err();
      s->with_assignments.emplace_back(std::move(*t), std::move(*v));
    }
    int_guard loops(loop_depth_, tag == "generation" ? 0 : loop_depth_);
    auto body = parse_statements({tag == "with" ? "endwith" : "endgeneration"}, true);
    if (!body) return std::move(body).err();
    s->body = std::move(*body);
  } else if (tag == "break" || tag == "continue") {
    advance();
    if (loop_depth_ == 0) return fail("'" + tag + "' outside loop", line);
    s->kind = tag == "break" ? stmt_kind::break_ : stmt_kind::continue_;
  } else if (tag == "print") {
    advance();
    while (cur().type != tok::block_end) {
      if (!out.empty()) SPITE_TRY(expect_op(","));
      auto e = parse_expression(true);
      if (!e) return std::move(e).err();
      auto p = std::make_unique<stmt>();
      p->kind = stmt_kind::print;
      p->line = line;
      p->value_expr = std::move(*e);
      out.push_back(std::move(p));
    }
    return out;
  } else if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
             tag == "autoescape") {
    return make_error(errc::unsupported,
                      "chat template line " + std::to_string(line) + ": the '" + tag + "' tag is not supported");
  } else {
    return fail("Encountered unknown tag '" + tag + "'.");
  }
  out.push_back(std::move(s));
  return out;
}

result<void> parser::parse_if(stmt& s) {
  stmt* node = &s;
  for (;;) {
    node->kind = stmt_kind::if_;
    auto test = parse_tuple(false, false, {}, false);
    if (!test) return std::move(test).err();
    node->value_expr = std::move(*test);
    auto body = parse_statements({"elif", "else", "endif"}, false);
    if (!body) return std::move(body).err();
    node->body = std::move(*body);
    const std::string which = cur().text;
    const int line = cur().line;
    advance();
    if (which == "elif") {
      auto next = std::make_unique<stmt>();
      next->line = line;
      stmt* raw = next.get();
      node->else_body.push_back(std::move(next));
      node = raw;
      continue;
    }
    if (which == "else") {
      auto else_body = parse_statements({"endif"}, true);
      if (!else_body) return std::move(else_body).err();
      node->else_body = std::move(*else_body);
    }
    return ok();
  }
}

result<void> parser::parse_for(stmt& s) {
  s.kind = stmt_kind::for_;
  auto t = parse_target(true, false, {"in"}, false);
  if (!t) return std::move(t).err();
  s.tgt = std::move(*t);
  SPITE_TRY(expect_name_kw("in"));
  auto iter = parse_tuple(false, false, {"recursive"}, false);
  if (!iter) return std::move(iter).err();
  s.value_expr = std::move(*iter);
  if (skip_name("if")) {
    auto c = parse_expression(true);
    if (!c) return std::move(c).err();
    s.cond = std::move(*c);
  }
  s.recursive = skip_name("recursive");
  {
    int_guard loops(loop_depth_, loop_depth_ + 1);
    auto body = parse_statements({"endfor", "else"}, false);
    if (!body) return std::move(body).err();
    s.body = std::move(*body);
  }
  const bool has_else = is_name("else");
  advance();
  if (has_else) {
    auto else_body = parse_statements({"endfor"}, true);
    if (!else_body) return std::move(else_body).err();
    s.else_body = std::move(*else_body);
  }
  return ok();
}

result<void> parser::parse_set(stmt& s) {
  auto t = parse_target(true, false, {}, true);
  if (!t) return std::move(t).err();
  s.tgt = std::move(*t);
  if (skip_op("=")) {
    s.kind = stmt_kind::set;
    auto e = parse_tuple(false, true, {}, false);
    if (!e) return std::move(e).err();
    s.value_expr = std::move(*e);
    return ok();
  }
  s.kind = stmt_kind::set_block;
  if (is_op("|")) {
    auto f = parse_filter(nullptr, false);
    if (!f) return std::move(f).err();
    s.value_expr = std::move(*f);
  }
  auto body = parse_statements({"endset"}, true);
  if (!body) return std::move(body).err();
  s.body = std::move(*body);
  return ok();
}

result<void> parser::parse_signature(macro_def& m) {
  SPITE_TRY(expect_op("("));
  while (!is_op(")")) {
    if (!m.params.empty()) SPITE_TRY(expect_op(","));
    auto t = parse_target(false, true, {}, false);
    if (!t) return std::move(t).err();
    if (std::find(m.params.begin(), m.params.end(), t->name) != m.params.end())
      return fail("duplicate argument '" + t->name + "' in macro definition");
    m.params.push_back(t->name);
    if (skip_op("=")) {
      auto d = parse_expression(true);
      if (!d) return std::move(d).err();
      m.defaults.push_back(std::move(*d));
    } else if (!m.defaults.empty()) {
      return fail("non-default argument follows default argument");
    }
  }
  return expect_op(")");
}

result<stmt_list> parser::parse_function_body(macro_def& m, std::string_view end) {
  int_guard loops(loop_depth_, 0);
  auto body = parse_statements({end}, true);
  if (!body) return body;
  m.uses_caller = reads_name(*body, "caller");
  m.uses_varargs = reads_name(*body, "varargs");
  m.uses_kwargs = reads_name(*body, "kwargs");
  return body;
}

result<void> parser::parse_macro(stmt& s) {
  s.kind = stmt_kind::macro;
  auto m = std::make_shared<macro_def>();
  m->line = s.line;
  auto name = parse_target(false, true, {}, false);
  if (!name) return std::move(name).err();
  m->name = name->name;
  SPITE_TRY(parse_signature(*m));
  auto body = parse_function_body(*m, "endmacro");
  if (!body) return std::move(body).err();
  m->body = std::move(*body);
  s.macro = std::move(m);
  return ok();
}

result<void> parser::parse_call_block(stmt& s) {
  s.kind = stmt_kind::call_block;
  auto m = std::make_shared<macro_def>();
  m->name = "caller";
  m->line = s.line;
  if (is_op("(")) SPITE_TRY(parse_signature(*m));
  auto call = parse_expression(true);
  if (!call) return std::move(call).err();
  if ((*call)->kind != expr_kind::call) return fail("expected call", s.line);
  s.value_expr = std::move(*call);
  auto body = parse_function_body(*m, "endcall");
  if (!body) return std::move(body).err();
  m->body = std::move(*body);
  s.macro = std::move(m);
  return ok();
}

result<target> parser::parse_target(bool with_tuple, bool name_only, std::initializer_list<std::string_view> extra_end,
                            bool with_namespace) {
  if (name_only) {
    target t;
    t.line = cur().line;
    auto n = expect_name();
    if (!n) return std::move(n).err();
    t.name = *n;
    SPITE_TRY(check_assignable(t));
    return t;
  }
  if (!with_tuple) return parse_primary_target(with_namespace);
  target tuple;
  tuple.type = target::kind::tuple;
  tuple.line = cur().line;
  bool is_tuple = false;
  for (;;) {
    if (!tuple.items.empty()) SPITE_TRY(expect_op(","));
    if (is_tuple_end(extra_end)) break;
    auto t = parse_primary_target(with_namespace);
    if (!t) return t;
    tuple.items.push_back(std::move(*t));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (tuple.items.empty()) return fail("Expected an expression, got '" + describe(cur()) + "'");
    return std::move(tuple.items[0]);
  }
  return tuple;
}

result<target> parser::parse_primary_target(bool with_namespace) {
  target t;
  t.line = cur().line;
  if (cur().type == tok::name) {
    t.name = cur().text;
    advance();
    SPITE_TRY(check_assignable(t));
    if (with_namespace && is_op(".")) {
      advance();
      auto attr = expect_name();
      if (!attr) return std::move(attr).err();
      t.type = target::kind::ns_attr;
      t.attr = *attr;
    }
    return t;
  }
  if (skip_op("(")) {
    t.type = target::kind::tuple;
    while (!is_op(")")) {
      if (!t.items.empty()) SPITE_TRY(expect_op(","));
      if (is_op(")")) break;
      auto item = parse_primary_target(false);
      if (!item) return item;
      t.items.push_back(std::move(*item));
    }
    SPITE_TRY(expect_op(")"));
    if (t.items.size() == 1 && t.items[0].type != target::kind::tuple) return std::move(t.items[0]);
    return t;
  }
  return fail("can't assign to '" + describe(cur()) + "'");
}

namespace {

// What jinja2 rejects when it compiles a template, beyond syntax:
// - an unknown filter or test, unless it sits in an if statement (test and branches, not nested
//   loops or macros) or a conditional expression: there the error waits until the filter runs;
// - assigning to `loop` anywhere inside a for statement;
// - a dict literal whose constant prefix has an unhashable key, inside an expression that
//   jinja2's optimizer folds (calls, filters, tests, operators, attribute and item access).
class checker {
 public:
  result<void> body(const stmt_list& list, bool soft, bool in_for) {
    for (const auto& s : list) SPITE_TRY(statement(*s, soft, in_for));
    return ok();
  }

 private:
  static error fail(int line, const std::string& what) {
    return make_error(errc::malformed, "chat template line " + std::to_string(line) + ": " + what);
  }

  static bool literal(const expr* e) {
    if (!e || e->kind == expr_kind::constant) return true;
    if (e->kind != expr_kind::list && e->kind != expr_kind::tuple && e->kind != expr_kind::dict) return false;
    for (const auto& i : e->items)
      if (!literal(i.get())) return false;
    return true;
  }

  static bool unhashable(const expr* e) {
    if (e->kind == expr_kind::list || e->kind == expr_kind::dict) return true;
    if (e->kind == expr_kind::tuple)
      for (const auto& i : e->items)
        if (unhashable(i.get())) return true;
    return false;
  }

  result<void> target_names(const target& t, bool in_for) {
    if (in_for && t.type == target::kind::name && t.name == "loop")
      return fail(t.line, "Can't assign to special loop variable in for-loop target");
    for (const auto& i : t.items) SPITE_TRY(target_names(i, in_for));
    return ok();
  }

  static bool folds(expr_kind k) {
    switch (k) {
      case expr_kind::constant:
      case expr_kind::name:
      case expr_kind::list:
      case expr_kind::tuple:
      case expr_kind::dict:
      case expr_kind::slice: return false;
      default: return true;
    }
  }

  result<void> expression(const expr* e, bool soft, bool folding = false) {
    if (!e) return ok();
    if (e->kind == expr_kind::cond) soft = true;
    folding = folding || folds(e->kind);
    if (!soft && e->kind == expr_kind::filter && !is_known_filter(e->name))
      return fail(e->line, "No filter named '" + e->name + "'.");
    if (!soft && e->kind == expr_kind::test && !is_known_test(e->name))
      return fail(e->line, "No test named '" + e->name + "'.");
    if (e->kind == expr_kind::dict && folding) {
      for (std::size_t i = 0; i + 1 < e->items.size(); i += 2) {
        if (!literal(e->items[i].get()) || !literal(e->items[i + 1].get())) break;
        if (unhashable(e->items[i].get()))
          return fail(e->line, std::string("TypeError: unhashable type: '") +
                                   (e->items[i]->kind == expr_kind::dict ? "dict" : "list") + "'");
      }
    }
    for (const auto& i : e->items) SPITE_TRY(expression(i.get(), soft, folding));
    return arguments(e->args, soft, folding);
  }

  result<void> arguments(const call_spec& c, bool soft, bool folding) {
    for (const auto& a : c.args) SPITE_TRY(expression(a.get(), soft, folding));
    for (const auto& [k, v] : c.kwargs) SPITE_TRY(expression(v.get(), soft, folding));
    SPITE_TRY(expression(c.dyn_args.get(), soft, folding));
    return expression(c.dyn_kwargs.get(), soft, folding);
  }

  result<void> statement(const stmt& s, bool soft, bool in_for) {
    switch (s.kind) {
      case stmt_kind::if_:
        SPITE_TRY(expression(s.value_expr.get(), true));
        SPITE_TRY(body(s.body, true, in_for));
        return body(s.else_body, true, in_for);
      case stmt_kind::for_:
        SPITE_TRY(target_names(s.tgt, true));
        SPITE_TRY(expression(s.value_expr.get(), soft));
        SPITE_TRY(expression(s.cond.get(), false));
        SPITE_TRY(body(s.body, false, true));
        return body(s.else_body, false, true);
      case stmt_kind::macro:
      case stmt_kind::call_block:
        SPITE_TRY(expression(s.value_expr.get(), soft));
        for (const auto& d : s.macro->defaults) SPITE_TRY(expression(d.get(), false));
        return body(s.macro->body, false, in_for);
      case stmt_kind::set:
        SPITE_TRY(target_names(s.tgt, in_for));
        return expression(s.value_expr.get(), soft);
      case stmt_kind::set_block:
        SPITE_TRY(target_names(s.tgt, in_for));
        [[fallthrough]];
      case stmt_kind::filter_block:
        SPITE_TRY(expression(s.value_expr.get(), false));
        return body(s.body, false, in_for);
      case stmt_kind::scope:
        for (const auto& [t, v] : s.with_assignments) SPITE_TRY(expression(v.get(), soft));
        return body(s.body, false, in_for);
      default: return expression(s.value_expr.get(), soft);
    }
  }
};

}  // namespace

result<std::shared_ptr<program>> parse(std::vector<token> tokens) {
  auto prog = parser(std::move(tokens)).run();
  if (!prog) return prog;
  SPITE_TRY(checker().body((*prog)->body, false, false));
  return prog;
}

}  // namespace spite::tokenizer::template_detail
