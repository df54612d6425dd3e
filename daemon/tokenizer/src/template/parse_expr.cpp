#include <algorithm>

#include "template/parser_impl.hpp"

namespace spite::tokenizer::template_detail {
namespace {

bool is_compare_op(std::string_view op) {
  return op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=";
}

cmpop compare_op(std::string_view op) {
  if (op == "==") return cmpop::eq;
  if (op == "!=") return cmpop::ne;
  if (op == "<") return cmpop::lt;
  if (op == "<=") return cmpop::le;
  if (op == ">") return cmpop::gt;
  return cmpop::ge;
}

}  // namespace

result<expr_ptr> parser::parse_tuple(bool simplified, bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                             bool explicit_parentheses) {
  const int line = cur().line;
  std::vector<expr_ptr> items;
  bool is_tuple = false;
  for (;;) {
    if (!items.empty()) SPITE_TRY(expect_op(","));
    if (is_tuple_end(extra_end)) break;
    auto e = simplified ? parse_primary() : parse_expression(with_condexpr);
    if (!e) return e;
    items.push_back(std::move(*e));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) return fail("Expected an expression, got '" + describe(cur()) + "'");
  }
  auto t = make_expr(expr_kind::tuple, line);
  t->items = std::move(items);
  return t;
}

result<expr_ptr> parser::parse_condexpr() {
  int line = cur().line;
  auto e1 = parse_or();
  if (!e1) return e1;
  expr_ptr left = std::move(*e1);
  while (skip_name("if")) {
    auto test = parse_or();
    if (!test) return test;
    expr_ptr other;
    if (skip_name("else")) {
      auto e3 = parse_condexpr();
      if (!e3) return e3;
      other = std::move(*e3);
    }
    auto c = make_expr(expr_kind::cond, line);
    c->items.push_back(std::move(left));
    c->items.push_back(std::move(*test));
    c->items.push_back(std::move(other));
    left = std::move(c);
    line = cur().line;
  }
  return left;
}

result<expr_ptr> parser::parse_binary_chain(expr_kind kind, std::string_view keyword, result<expr_ptr> (parser::*next)()) {
  const int line = cur().line;
  auto l = (this->*next)();
  if (!l) return l;
  expr_ptr left = std::move(*l);
  while (skip_name(keyword)) {
    auto r = (this->*next)();
    if (!r) return r;
    auto e = make_expr(kind, line);
    e->items.push_back(std::move(left));
    e->items.push_back(std::move(*r));
    left = std::move(e);
  }
  return left;
}

result<expr_ptr> parser::parse_not() {
  if (is_name("not")) {
    const int line = cur().line;
    advance();
    depth_guard g(depth_);
    if (depth_ > k_max_parse_depth) return fail("expression nesting too deep");
    auto inner = parse_not();
    if (!inner) return inner;
    auto e = make_expr(expr_kind::op_not, line);
    e->items.push_back(std::move(*inner));
    return e;
  }
  return parse_compare();
}

result<expr_ptr> parser::parse_compare() {
  const int line = cur().line;
  auto first = parse_math1();
  if (!first) return first;
  auto e = make_expr(expr_kind::compare, line);
  e->items.push_back(std::move(*first));
  for (;;) {
    cmpop op;
    if (cur().type == tok::op && is_compare_op(cur().text)) {
      op = compare_op(cur().text);
      advance();
    } else if (skip_name("in")) {
      op = cmpop::in;
    } else if (is_name("not") && peek().type == tok::name && peek().text == "in") {
      advance();
      advance();
      op = cmpop::not_in;
    } else {
      break;
    }
    auto rhs = parse_math1();
    if (!rhs) return rhs;
    e->cmp.push_back(op);
    e->items.push_back(std::move(*rhs));
  }
  if (e->cmp.empty()) return std::move(e->items[0]);
  return e;
}

result<expr_ptr> parser::parse_math(std::initializer_list<std::pair<std::string_view, binop>> ops,
                            result<expr_ptr> (parser::*next)()) {
  const int line = cur().line;
  auto l = (this->*next)();
  if (!l) return l;
  expr_ptr left = std::move(*l);
  for (;;) {
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return is_op(o.first); });
    if (it == ops.end()) break;
    advance();
    auto r = (this->*next)();
    if (!r) return r;
    auto e = make_expr(expr_kind::binary, line);
    e->op = it->second;
    e->items.push_back(std::move(left));
    e->items.push_back(std::move(*r));
    left = std::move(e);
  }
  return left;
}

result<expr_ptr> parser::parse_concat() {
  const int line = cur().line;
  auto first = parse_math2();
  if (!first) return first;
  if (!is_op("~")) return first;
  auto e = make_expr(expr_kind::concat, line);
  e->items.push_back(std::move(*first));
  while (skip_op("~")) {
    auto next = parse_math2();
    if (!next) return next;
    e->items.push_back(std::move(*next));
  }
  return e;
}

result<expr_ptr> parser::parse_unary(bool with_filter) {
  depth_guard g(depth_);
  if (depth_ > k_max_parse_depth) return fail("expression nesting too deep");
  const int line = cur().line;
  expr_ptr node;
  if (is_op("-") || is_op("+")) {
    const bool neg = is_op("-");
    advance();
    auto inner = parse_unary(false);
    if (!inner) return inner;
    node = make_expr(neg ? expr_kind::neg : expr_kind::pos, line);
    node->items.push_back(std::move(*inner));
  } else {
    auto p = parse_primary();
    if (!p) return p;
    node = std::move(*p);
  }
  auto post = parse_postfix(std::move(node));
  if (!post || !with_filter) return post;
  return parse_filter_expr(std::move(*post));
}

result<expr_ptr> parser::parse_primary() {
  depth_guard g(depth_);
  if (depth_ > k_max_parse_depth) return fail("expression nesting too deep");
  const token& t = cur();
  const int line = t.line;
  if (t.type == tok::name) {
    const std::string n = t.text;
    advance();
    auto e = make_expr(expr_kind::constant, line);
    if (n == "true" || n == "True") {
      e->constant = value(true);
    } else if (n == "false" || n == "False") {
      e->constant = value(false);
    } else if (n == "none" || n == "None") {
      e->constant = value::none();
    } else {
      e->kind = expr_kind::name;
      e->name = n;
    }
    return e;
  }
  if (t.type == tok::string) {
    std::string s;
    while (cur().type == tok::string) {
      s += cur().text;
      advance();
    }
    auto e = make_expr(expr_kind::constant, line);
    e->constant = value(std::move(s));
    return e;
  }
  if (t.type == tok::integer || t.type == tok::floating) {
    auto e = make_expr(expr_kind::constant, line);
    e->constant = t.type == tok::integer ? value(t.int_value) : value(t.float_value);
    advance();
    return e;
  }
  if (skip_op("(")) {
    auto e = parse_tuple(false, true, {}, true);
    if (!e) return e;
    SPITE_TRY(expect_op(")"));
    return e;
  }
  if (is_op("[")) return parse_list();
  if (is_op("{")) return parse_dict();
  return fail("unexpected '" + describe(t) + "'");
}

result<expr_ptr> parser::parse_list() {
  auto e = make_expr(expr_kind::list, cur().line);
  advance();
  while (!is_op("]")) {
    if (!e->items.empty()) SPITE_TRY(expect_op(","));
    if (is_op("]")) break;
    auto item = parse_expression(true);
    if (!item) return item;
    e->items.push_back(std::move(*item));
  }
  SPITE_TRY(expect_op("]"));
  return e;
}

result<expr_ptr> parser::parse_dict() {
  auto e = make_expr(expr_kind::dict, cur().line);
  advance();
  while (!is_op("}")) {
    if (!e->items.empty()) SPITE_TRY(expect_op(","));
    if (is_op("}")) break;
    auto key = parse_expression(true);
    if (!key) return key;
    SPITE_TRY(expect_op(":"));
    auto val = parse_expression(true);
    if (!val) return val;
    e->items.push_back(std::move(*key));
    e->items.push_back(std::move(*val));
  }
  SPITE_TRY(expect_op("}"));
  return e;
}

result<expr_ptr> parser::parse_postfix(expr_ptr node) {
  for (;;) {
    if (is_op(".") || is_op("[")) {
      auto s = parse_subscript(std::move(node));
      if (!s) return s;
      node = std::move(*s);
    } else if (is_op("(")) {
      auto c = parse_call(std::move(node));
      if (!c) return c;
      node = std::move(*c);
    } else {
      return node;
    }
  }
}

result<expr_ptr> parser::parse_filter_expr(expr_ptr node) {
  for (;;) {
    if (is_op("|")) {
      auto f = parse_filter(std::move(node), false);
      if (!f) return f;
      node = std::move(*f);
    } else if (is_name("is")) {
      auto t = parse_test(std::move(node));
      if (!t) return t;
      node = std::move(*t);
    } else if (is_op("(")) {
      auto c = parse_call(std::move(node));
      if (!c) return c;
      node = std::move(*c);
    } else {
      return node;
    }
  }
}

result<expr_ptr> parser::parse_subscript(expr_ptr node) {
  const int line = cur().line;
  if (skip_op(".")) {
    if (cur().type == tok::name) {
      auto e = make_expr(expr_kind::getattr, line);
      e->name = cur().text;
      advance();
      e->items.push_back(std::move(node));
      return e;
    }
    if (cur().type != tok::integer) return fail("expected name or number");
    auto e = make_expr(expr_kind::getitem, line);
    auto k = make_expr(expr_kind::constant, cur().line);
    k->constant = value(cur().int_value);
    advance();
    e->items.push_back(std::move(node));
    e->items.push_back(std::move(k));
    return e;
  }
  advance();  // [
  std::vector<expr_ptr> args;
  while (!is_op("]")) {
    if (!args.empty()) SPITE_TRY(expect_op(","));
    auto a = parse_subscribed();
    if (!a) return a;
    args.push_back(std::move(*a));
  }
  SPITE_TRY(expect_op("]"));
  auto e = make_expr(expr_kind::getitem, line);
  e->items.push_back(std::move(node));
  if (args.size() == 1) {
    e->items.push_back(std::move(args[0]));
  } else {
    // Python has no tuple of slices: jinja2's generated code does not compile.
    for (const auto& a : args)
      if (a->kind == expr_kind::slice) return fail("invalid syntax", line);
    auto t = make_expr(expr_kind::tuple, line);
    t->items = std::move(args);
    e->items.push_back(std::move(t));
  }
  return e;
}

result<expr_ptr> parser::parse_subscribed() {
  const int line = cur().line;
  std::vector<expr_ptr> parts;
  if (skip_op(":")) {
    parts.push_back(nullptr);
  } else {
    auto e = parse_expression(true);
    if (!e) return e;
    if (!skip_op(":")) return e;
    parts.push_back(std::move(*e));
  }
  if (is_op(":") || is_op("]") || is_op(",")) {
    parts.push_back(nullptr);
  } else {
    auto e = parse_expression(true);
    if (!e) return e;
    parts.push_back(std::move(*e));
  }
  if (skip_op(":")) {
    if (is_op("]") || is_op(",")) {
      parts.push_back(nullptr);
    } else {
      auto e = parse_expression(true);
      if (!e) return e;
      parts.push_back(std::move(*e));
    }
  } else {
    parts.push_back(nullptr);
  }
  auto s = make_expr(expr_kind::slice, line);
  s->items = std::move(parts);
  return s;
}

result<call_spec> parser::parse_call_args() {
  const int line = cur().line;
  SPITE_TRY(expect_op("("));
  call_spec c;
  bool require_comma = false;
  const auto invalid = [&] { return fail("invalid syntax for function call expression", line); };
  while (!is_op(")")) {
    if (require_comma) {
      SPITE_TRY(expect_op(","));
      if (is_op(")")) break;
    }
    if (skip_op("*")) {
      if (c.dyn_args || c.dyn_kwargs) return invalid();
      auto e = parse_expression(true);
      if (!e) return std::move(e).err();
      c.dyn_args = std::move(*e);
    } else if (skip_op("**")) {
      if (c.dyn_kwargs) return invalid();
      auto e = parse_expression(true);
      if (!e) return std::move(e).err();
      c.dyn_kwargs = std::move(*e);
    } else if (cur().type == tok::name && peek().type == tok::op && peek().text == "=") {
      if (c.dyn_kwargs) return invalid();
      std::string key = cur().text;
      for (const auto& [k, v] : c.kwargs)
        if (k == key) return fail("keyword argument repeated: " + key, line);
      advance();
      advance();
      auto e = parse_expression(true);
      if (!e) return std::move(e).err();
      c.kwargs.emplace_back(std::move(key), std::move(*e));
    } else {
      if (c.dyn_args || c.dyn_kwargs || !c.kwargs.empty()) return invalid();
      auto e = parse_expression(true);
      if (!e) return std::move(e).err();
      c.args.push_back(std::move(*e));
    }
    require_comma = true;
  }
  SPITE_TRY(expect_op(")"));
  return c;
}

result<std::string> parser::parse_dotted_name() {
  auto n = expect_name();
  if (!n) return n;
  std::string name = *n;
  while (skip_op(".")) {
    auto part = expect_name();
    if (!part) return part;
    name += "." + *part;
  }
  return name;
}

result<expr_ptr> parser::parse_filter(expr_ptr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) advance();
    start_inline = false;
    const int line = cur().line;
    auto name = parse_dotted_name();
    if (!name) return std::move(name).err();
    auto e = make_expr(expr_kind::filter, line);
    e->name = *name;
    if (is_op("(")) {
      auto args = parse_call_args();
      if (!args) return std::move(args).err();
      e->args = std::move(*args);
    }
    e->items.push_back(std::move(node));
    node = std::move(e);
  }
  return node;
}

result<expr_ptr> parser::parse_test(expr_ptr node) {
  const int line = cur().line;
  advance();  // is
  const bool negated = skip_name("not");
  auto name = parse_dotted_name();
  if (!name) return std::move(name).err();
  auto e = make_expr(expr_kind::test, line);
  e->name = *name;
  const token& t = cur();
  if (is_op("(")) {
    auto args = parse_call_args();
    if (!args) return std::move(args).err();
    e->args = std::move(*args);
  } else if ((t.type == tok::name || t.type == tok::string || t.type == tok::integer || t.type == tok::floating ||
              is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) return fail("You cannot chain multiple tests with is");
    auto arg = parse_primary();
    if (!arg) return arg;
    auto post = parse_postfix(std::move(*arg));
    if (!post) return post;
    e->args.args.push_back(std::move(*post));
  }
  e->items.push_back(std::move(node));
  if (!negated) return e;
  auto n = make_expr(expr_kind::op_not, line);
  n->items.push_back(std::move(e));
  return n;
}

}  // namespace spite::tokenizer::template_detail
