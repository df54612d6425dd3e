// Interpreter objects (value::kind::object) and variable scopes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/tokenizer/template.hpp"
#include "template/ast.hpp"

namespace spite::tokenizer::template_detail {

// Variables of one scope. Lookups walk to the parent; the root also sees the render context.
// jinja2 gives each for-loop iteration, macro call and block body a scope of its own, so a set
// inside them does not leak out (namespace() exists for that).
struct scope {
  std::shared_ptr<scope> parent;
  std::vector<std::pair<std::string, value>> vars;
  const value_dict* context = nullptr;  // root scope only

  const value* find(std::string_view name) const {
    for (const scope* s = this; s; s = s->parent.get()) {
      for (const auto& [k, v] : s->vars)
        if (k == name) return &v;
      if (s->context)
        if (const value* v = s->context->find(name)) return v;
    }
    return nullptr;
  }
  void set(std::string_view name, value v) {
    for (auto& [k, old] : vars)
      if (k == name) {
        old = std::move(v);
        return;
      }
    vars.emplace_back(std::string(name), std::move(v));
  }
};
using scope_ptr = std::shared_ptr<scope>;

inline scope_ptr child_scope(const scope_ptr& parent) {
  auto s = std::make_shared<scope>();
  s->parent = parent;
  return s;
}

enum class object_kind : std::uint8_t { macro, builtin, method, namespace_, loop, generator };

struct object {
  explicit object(object_kind k) : kind(k) {}
  virtual ~object() = default;
  object_kind kind;
};

struct macro_object : object {
  macro_object(const macro_def* d, scope_ptr c) : object(object_kind::macro), def(d), closure(std::move(c)) {}
  const macro_def* def;
  scope_ptr closure;  // the scope the macro was defined in (lexical lookup)
};

enum class builtin_id : std::uint8_t {
  range, dict, namespace_, raise_exception, strftime_now, lipsum, cycler, joiner,
};

struct builtin_object : object {
  explicit builtin_object(builtin_id i) : object(object_kind::builtin), id(i) {}
  builtin_id id;
};

// A method bound to its receiver: "a,b".split, messages.index, d.get ...
struct method_object : object {
  method_object(value s, std::string n) : object(object_kind::method), self(std::move(s)), name(std::move(n)) {}
  value self;
  std::string name;
};

// namespace(): the one mutable object a template can make ({% set ns.x = ... %}).
struct namespace_object : object {
  namespace_object() : object(object_kind::namespace_) {}
  value_dict attrs;
};

// `loop` inside a for body; one object per loop, advanced in place like jinja2's LoopContext.
struct loop_object : object {
  loop_object() : object(object_kind::loop) {}
  value items;  // the (filtered) list being iterated
  std::size_t index0 = 0;
  std::size_t depth0 = 0;
  bool has_last_changed = false;
  value last_changed;
  bool exhausted = false;           // the template iterated `loop` itself, consuming the rest
  const stmt* recursive = nullptr;  // the for statement of a recursive loop
  scope_ptr outer;                  // and the scope it runs in
  std::size_t size() const { return items.as_list().size(); }
};

// A one-shot iterator: what map/select/reject/items/unique/batch/reverse give in Python.
// Iterating it consumes it; length, indexing and tojson refuse it.
struct generator_object : object {
  explicit generator_object(value_list v, std::string what = "generator")
      : object(object_kind::generator), items(std::move(v)), type_name(std::move(what)) {}
  value_list items;
  std::size_t pos = 0;
  std::string type_name;  // Python's name for it: generator, list_reverseiterator, ...
  // Python computes generators lazily: what failed while making the items is raised only when
  // the generator is consumed.
  std::optional<error> failure;
};

inline bool is_object(const value& v, object_kind k) { return v.is_object() && v.object()->kind == k; }

template <class T>
T& as(const value& v) {
  return *static_cast<T*>(v.object());
}

}  // namespace spite::tokenizer::template_detail
