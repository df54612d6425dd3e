// The syntax tree of a compiled template (jinja2's nodes, reduced to what the interpreter needs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spite/tokenizer/template.hpp"

namespace spite::tokenizer::template_detail {

enum class expr_kind : std::uint8_t {
  constant,  // `constant`
  name,      // `name`
  list,      // items
  tuple,     // items
  dict,      // items: key0, value0, key1, value1, ...
  getattr,   // items[0] . name
  getitem,   // items[0] [ items[1] ]
  slice,     // items: start, stop, step (each may be null); only as a getitem key
  call,      // items[0] ( args )
  filter,    // items[0] | name ( args ); items[0] is null in filter blocks and block sets
  test,      // items[0] is name ( args )
  op_not,    // not items[0]
  neg,       // - items[0]
  pos,       // + items[0]
  binary,    // items[0] op items[1]
  compare,   // items[0] cmp[0] items[1] cmp[1] items[2] ...
  op_and,    // items[0] and items[1]
  op_or,     // items[0] or items[1]
  concat,    // items[0] ~ items[1] ~ ...
  cond,      // items[0] if items[1] else items[2] (items[2] may be null)
};

enum class binop : std::uint8_t { add, sub, mul, div, floordiv, mod, pow };
enum class cmpop : std::uint8_t { eq, ne, lt, le, gt, ge, in, not_in };

struct expr;
using expr_ptr = std::unique_ptr<expr>;

// Arguments of a call, filter or test.
struct call_spec {
  std::vector<expr_ptr> args;
  std::vector<std::pair<std::string, expr_ptr>> kwargs;
  expr_ptr dyn_args;    // *args
  expr_ptr dyn_kwargs;  // **kwargs
};

struct expr {
  expr_kind kind = expr_kind::constant;
  int line = 0;
  binop op = binop::add;
  value constant;
  std::string name;
  std::vector<expr_ptr> items;
  std::vector<cmpop> cmp;
  call_spec args;
};

// The left side of set and for: a name, `ns.attr` (set only) or a tuple of targets.
struct target {
  enum class kind : std::uint8_t { name, ns_attr, tuple } type = kind::name;
  std::string name;
  std::string attr;
  std::vector<target> items;
  int line = 0;
};

struct stmt;
using stmt_ptr = std::unique_ptr<stmt>;
using stmt_list = std::vector<stmt_ptr>;

// A macro, or the anonymous `caller` of a call block.
struct macro_def {
  std::string name;
  std::vector<std::string> params;
  std::vector<expr_ptr> defaults;  // for the last defaults.size() params
  stmt_list body;
  bool uses_caller = false;   // the body reads `caller`
  bool uses_varargs = false;  // the body reads `varargs`: extra positional arguments allowed
  bool uses_kwargs = false;   // the body reads `kwargs`: unknown keyword arguments allowed
  int line = 0;
};

enum class stmt_kind : std::uint8_t {
  text,          // text
  print,         // expr
  if_,           // expr (test), body, else_body (elif is a nested if)
  for_,          // tgt in expr [if cond], body, else_body
  set,           // tgt = expr
  set_block,     // tgt, expr (optional filter with null input), body
  macro,         // macro
  call_block,    // expr (the call), macro (caller)
  filter_block,  // expr (filter with null input), body
  scope,         // body in a new scope: {% generation %}, {% with %}
  break_,
  continue_,
};

struct stmt {
  stmt_kind kind = stmt_kind::text;
  int line = 0;
  std::string text;
  bool recursive = false;  // for ... recursive: the body may call loop(children)
  expr_ptr value_expr;
  expr_ptr cond;
  target tgt;
  stmt_list body;
  stmt_list else_body;
  std::shared_ptr<macro_def> macro;
  // {% with a = 1 %}: assignments made in the new scope before the body.
  std::vector<std::pair<target, expr_ptr>> with_assignments;
};

struct program {
  stmt_list body;
};

}  // namespace spite::tokenizer::template_detail
