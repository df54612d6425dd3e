// The recursive-descent parser (internal to parser.cpp and parse_expr.cpp).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "template/parser.hpp"

namespace spite::tokenizer::template_detail {

constexpr int k_max_parse_depth = 256;

inline expr_ptr make_expr(expr_kind k, int line) {
  auto e = std::make_unique<expr>();
  e->kind = k;
  e->line = line;
  return e;
}

class parser {
 public:
  explicit parser(std::vector<token> tokens) : t_(std::move(tokens)) {}

  result<std::shared_ptr<program>> run() {
    auto prog = std::make_shared<program>();
    auto body = parse_body({});
    if (!body) return std::move(body).err();
    prog->body = std::move(*body);
    return prog;
  }

 private:
  std::vector<token> t_;
  std::size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;

  const token& cur() const { return t_[i_]; }
  const token& peek(std::size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(std::string_view op) const { return cur().type == tok::op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == tok::name && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    advance();
    return true;
  }

  static std::string describe(const token& t) {
    switch (t.type) {
      case tok::text: return "template data";
      case tok::var_begin: return "begin of print statement";
      case tok::var_end: return "end of print statement";
      case tok::block_begin: return "begin of statement block";
      case tok::block_end: return "end of statement block";
      case tok::string: return "string";
      case tok::integer: return "integer";
      case tok::floating: return "float";
      case tok::eof: return "end of template";
      default: return t.text;
    }
  }

  error fail(const std::string& what, int line = 0) const {
    return make_error(errc::malformed,
                      "chat template line " + std::to_string(line ? line : cur().line) + ": " + what);
  }
  error fail_unexpected(std::string_view expected) const {
    if (cur().type == tok::eof) return fail("unexpected end of template, expected '" + std::string(expected) + "'");
    return fail("expected token '" + std::string(expected) + "', got '" + describe(cur()) + "'");
  }
  result<void> expect_op(std::string_view op) {
    if (!skip_op(op)) return fail_unexpected(op);
    return ok();
  }
  result<void> expect_name_kw(std::string_view n) {
    if (!skip_name(n)) return fail_unexpected(n);
    return ok();
  }
  result<std::string> expect_name() {
    if (cur().type != tok::name) return fail_unexpected("name");
    std::string n = cur().text;
    advance();
    return n;
  }
  result<void> expect(tok type, std::string_view what) {
    if (cur().type != type) return fail_unexpected(what);
    advance();
    return ok();
  }

  struct depth_guard {
    explicit depth_guard(int& d) : d_(d) { ++d_; }
    ~depth_guard() { --d_; }
    int& d_;
  };
  struct int_guard {
    int_guard(int& f, int v) : f_(f), old_(f) { f_ = v; }
    ~int_guard() { f_ = old_; }
    int& f_;
    int old_;
  };

  // ---- statements ----

  // Parses until {% <one of ends> %}; leaves the end tag's name as the current token.
  result<stmt_list> parse_body(std::initializer_list<std::string_view> ends);

  result<stmt_list> parse_statements(std::initializer_list<std::string_view> ends, bool drop_needle) {
    skip_op(":");
    SPITE_TRY(expect(tok::block_end, "end of statement block"));
    auto body = parse_body(ends);
    if (!body) return body;
    if (drop_needle) advance();
    return body;
  }

  result<stmt_list> parse_statement();

  result<void> parse_if(stmt& s);

  result<void> parse_for(stmt& s);

  result<void> parse_set(stmt& s);

  result<void> parse_signature(macro_def& m);

  result<stmt_list> parse_function_body(macro_def& m, std::string_view end);

  result<void> parse_macro(stmt& s);

  result<void> parse_call_block(stmt& s);

  // ---- assignment targets ----

  result<target> parse_target(bool with_tuple, bool name_only, std::initializer_list<std::string_view> extra_end,
                              bool with_namespace);

  result<void> check_assignable(const target& t) const {
    static const std::string_view reserved[] = {"true", "false", "none", "True", "False", "None"};
    for (auto r : reserved)
      if (t.name == r) return fail("can't assign to 'const'", t.line);
    return ok();
  }

  result<target> parse_primary_target(bool with_namespace);

  // ---- expressions ----

  // jinja2 also lists extra end words ("in" after a for target) but never matches them (it passes
  // them to Token.test_any as one tuple), so `for a, in xs` is a syntax error there: same here.
  bool is_tuple_end(std::initializer_list<std::string_view> /*extra_end*/) const {
    return cur().type == tok::var_end || cur().type == tok::block_end || is_op(")");
  }

  result<expr_ptr> parse_tuple(bool simplified, bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                               bool explicit_parentheses);

  result<expr_ptr> parse_expression(bool with_condexpr) {
    depth_guard g(depth_);
    if (depth_ > k_max_parse_depth) return fail("expression nesting too deep");
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  result<expr_ptr> parse_condexpr();

  result<expr_ptr> parse_binary_chain(expr_kind kind, std::string_view keyword, result<expr_ptr> (parser::*next)());

  result<expr_ptr> parse_or() { return parse_binary_chain(expr_kind::op_or, "or", &parser::parse_and); }
  result<expr_ptr> parse_and() { return parse_binary_chain(expr_kind::op_and, "and", &parser::parse_not); }

  result<expr_ptr> parse_not();

  result<expr_ptr> parse_compare();

  result<expr_ptr> parse_math(std::initializer_list<std::pair<std::string_view, binop>> ops,
                              result<expr_ptr> (parser::*next)());

  result<expr_ptr> parse_math1() { return parse_math({{"+", binop::add}, {"-", binop::sub}}, &parser::parse_concat); }

  result<expr_ptr> parse_concat();

  result<expr_ptr> parse_math2() {
    return parse_math({{"*", binop::mul}, {"/", binop::div}, {"//", binop::floordiv}, {"%", binop::mod}},
                      &parser::parse_pow);
  }

  result<expr_ptr> parse_pow() { return parse_math({{"**", binop::pow}}, &parser::parse_unary_filtered); }
  result<expr_ptr> parse_unary_filtered() { return parse_unary(true); }

  result<expr_ptr> parse_unary(bool with_filter);

  result<expr_ptr> parse_primary();

  result<expr_ptr> parse_list();

  result<expr_ptr> parse_dict();

  result<expr_ptr> parse_postfix(expr_ptr node);

  result<expr_ptr> parse_filter_expr(expr_ptr node);

  result<expr_ptr> parse_subscript(expr_ptr node);

  result<expr_ptr> parse_subscribed();

  result<call_spec> parse_call_args();

  result<expr_ptr> parse_call(expr_ptr node) {
    auto e = make_expr(expr_kind::call, cur().line);
    auto args = parse_call_args();
    if (!args) return std::move(args).err();
    e->args = std::move(*args);
    e->items.push_back(std::move(node));
    return e;
  }

  result<std::string> parse_dotted_name();

  result<expr_ptr> parse_filter(expr_ptr node, bool start_inline);

  result<expr_ptr> parse_test(expr_ptr node);
};

}  // namespace spite::tokenizer::template_detail
