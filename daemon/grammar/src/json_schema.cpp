// The structural half of the JSON-schema compiler: keywords, types, objects, arrays, enum/const,
// anyOf/oneOf/allOf and $ref. Every schema becomes a GBNF rule (or a primitive one); $ref
// targets get a rule each, named before their body is compiled, which is what makes recursive
// schemas work.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "json_schema_internal.hpp"
#include "spite/grammar/json_schema.hpp"

namespace spite::grammar {

namespace {

using detail::json;
using detail::malformed;
using detail::pointer_segment;
using detail::unsupported;

// Keywords that describe rather than constrain: ignoring them is right.
const std::set<std::string, std::less<>> annotation_keys = {
    "title",    "description", "default",   "examples",      "$schema",        "$id",      "$comment",
    "deprecated", "readOnly",  "writeOnly", "discriminator", "contentEncoding", "contentMediaType", "$anchor"};
// Holders of definitions, reached only through $ref.
const std::set<std::string, std::less<>> container_keys = {"$defs", "definitions"};
// Constraints this compiler enforces; any other keyword is refused.
const std::set<std::string, std::less<>> enforced_keys = {
    "type",         "nullable",   "enum",        "const",     "anyOf",       "oneOf",     "allOf",
    "$ref",         "properties", "required",    "additionalProperties",     "items",     "prefixItems",
    "additionalItems", "minItems", "maxItems",   "minLength", "maxLength",   "pattern",   "format",
    "minimum",      "maximum",    "exclusiveMinimum", "exclusiveMaximum", "uniqueItems"};

const std::set<std::string, std::less<>> type_names = {"object", "array", "string", "number", "integer", "boolean", "null"};

bool passive(const std::string& key) { return annotation_keys.contains(key) || container_keys.contains(key); }

// The keys of `s` that constrain, apart from `except`.
json constraints_except(const json& s, std::initializer_list<const char*> except) {
  json out = json::object();
  for (const auto& [k, v] : s.items()) {
    if (passive(k) || std::any_of(except.begin(), except.end(), [&](const char* e) { return k == e; })) continue;
    out[k] = v;
  }
  return out;
}

std::string last_segment(const std::string& ref) {
  const auto slash = ref.find_last_of('/');
  return slash == std::string::npos ? ref : ref.substr(slash + 1);
}

bool value_has_type(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  }
  if (t == "boolean") return v.is_boolean();
  return v.is_null();
}

class compiler {
 public:
  compiler(const json& root, const schema_options& options) : root_(root), options_(options) {}

  result<std::string> run() {
    auto body = visit(root_, "", "root", 0);
    if (!body) return std::move(body).err();
    return rules_.text(*body);
  }

 private:
  result<void> count_expansion(const std::string& ptr) {
    if (++expansions_ > options_.max_expansions) {
      return unsupported("a schema that expands to more than " + std::to_string(options_.max_expansions) + " subschemas", ptr);
    }
    return ok();
  }

  result<std::string> visit(const json& s, const std::string& ptr, const std::string& hint, std::size_t depth) {
    if (depth > options_.max_depth) return unsupported("schemas nested deeper than " + std::to_string(options_.max_depth), ptr);
    SPITE_TRY(count_expansion(ptr));
    if (s.is_boolean()) return s.get<bool>() ? rules_.prim("value") : never();
    if (!s.is_object()) return malformed("a schema must be an object or a boolean", ptr);
    for (const auto& [k, v] : s.items()) {
      if (passive(k)) continue;
      if (!enforced_keys.contains(k)) return unsupported(k, ptr);
      if (k == "uniqueItems" && v != false) return unsupported("uniqueItems", ptr);
      if (k == "nullable" && !v.is_boolean()) return malformed("'nullable' must be a boolean", ptr);
    }
    if (s.contains("$ref")) {
      const json rest = constraints_except(s, {"$ref"});
      if (rest.empty()) return reference(s["$ref"], ptr, depth);
      // Since draft 2019-09 keywords beside $ref apply too: the same as allOf of both.
      json both = json::object();
      both["allOf"] = json::array({json::object({{"$ref", s["$ref"]}}), rest});
      return visit(both, ptr, hint, depth + 1);
    }
    if (s.contains("allOf")) {
      auto merged = merge_all_of(s, ptr, depth);
      if (!merged) return std::move(merged).err();
      return visit(*merged, ptr, hint, depth + 1);
    }
    if (s.contains("anyOf") || s.contains("oneOf")) return any_of(s, ptr, hint, depth);
    if (s.contains("enum") || s.contains("const")) return enumeration(s, ptr, hint);
    return typed(s, ptr, hint, depth);
  }

  // A rule no string matches; alternatives using it are dropped when the grammar compiles.
  std::string never() { return rules_.add("never", R"([^\x00-\U0010FFFF])"); }

  result<std::string> reference(const json& ref, const std::string& ptr, std::size_t depth) {
    if (!ref.is_string()) return malformed("'$ref' must be a string", ptr);
    const std::string r = ref.get<std::string>();
    if (const auto it = refs_.find(r); it != refs_.end()) return it->second;
    auto target = resolve(r, ptr);
    if (!target) return std::move(target).err();
    const std::string name = rules_.reserve(last_segment(r));
    refs_.emplace(r, name);
    auto body = visit(**target, r.substr(1), last_segment(r), depth + 1);
    if (!body) return std::move(body).err();
    rules_.define(name, *body);
    return name;
  }

  result<const json*> resolve(const std::string& ref, const std::string& ptr) {
    if (ref.empty() || ref[0] != '#') return unsupported("$ref to '" + ref + "' (only local references '#/...')", ptr);
    const json* at = &root_;
    std::size_t pos = 1;
    if (ref.size() > 1 && ref[1] != '/') return unsupported("$ref to the anchor '" + ref + "'", ptr);
    while (pos < ref.size()) {
      const std::size_t next = std::min(ref.find('/', pos + 1), ref.size());
      std::string key;
      for (std::size_t i = pos + 1; i < next; ++i) {
        if (ref[i] == '~' && i + 1 < next && (ref[i + 1] == '0' || ref[i + 1] == '1')) {
          key += ref[++i] == '0' ? '~' : '/';
        } else {
          key += ref[i];
        }
      }
      if (at->is_object() && at->contains(key)) {
        at = &(*at)[key];
      } else if (at->is_array() && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
                 key.size() < 9 && std::stoul(key) < at->size()) {
        at = &(*at)[std::stoul(key)];
      } else {
        return malformed("$ref '" + ref + "' points nowhere", ptr);
      }
      pos = next;
    }
    return at;
  }

  // allOf: the members' keywords combined into one schema. Properties and required lists add up,
  // types intersect, a keyword two members give differently is refused.
  result<json> merge_all_of(const json& s, const std::string& ptr, std::size_t depth) {
    std::vector<json> members;
    SPITE_TRY(collect(s, ptr, depth, members));
    json out = json::object();
    for (const json& m : members) {
      for (const auto& [k, v] : m.items()) {
        if (passive(k)) continue;
        if (k == "properties") {
          if (!v.is_object()) return malformed("'properties' must be an object", ptr);
          json& props = out["properties"];
          if (props.is_null()) props = json::object();
          for (const auto& [name, sub] : v.items()) {
            props[name] = props.contains(name) ? json::object({{"allOf", json::array({props[name], sub})}}) : sub;
          }
        } else if (k == "required") {
          if (!v.is_array()) return malformed("'required' must be an array", ptr);
          json& req = out["required"];
          if (req.is_null()) req = json::array();
          for (const auto& name : v) {
            if (std::find(req.begin(), req.end(), name) == req.end()) req.push_back(name);
          }
        } else if (k == "type") {
          auto t = intersect_types(out.contains("type") ? out["type"] : json(), v, ptr);
          if (!t) return std::move(t).err();
          out["type"] = *t;
        } else if (!out.contains(k)) {
          out[k] = v;
        } else if (out[k] != v) {
          return unsupported("allOf members that give '" + k + "' different values", ptr);
        }
      }
    }
    // additionalProperties: false in one member forbids what another member adds.
    for (const json& m : members) {
      if (!m.contains("additionalProperties") || m["additionalProperties"] != false || !out.contains("properties")) continue;
      for (const auto& [name, _] : out["properties"].items()) {
        if (!m.contains("properties") || !m["properties"].contains(name)) {
          return unsupported("allOf where additionalProperties: false excludes the property '" + name + "' of another member", ptr);
        }
      }
    }
    return out;
  }

  // Flattens allOf members, following $ref and nested allOf.
  result<void> collect(const json& m, const std::string& ptr, std::size_t depth, std::vector<json>& out) {
    if (depth > options_.max_depth) return unsupported("schemas nested deeper than " + std::to_string(options_.max_depth), ptr);
    SPITE_TRY(count_expansion(ptr));
    if (m.is_boolean()) {
      if (m.get<bool>()) return ok();
      return unsupported("allOf with a false member (nothing matches)", ptr);
    }
    if (!m.is_object()) return malformed("a schema must be an object or a boolean", ptr);
    if (m.contains("$ref")) {
      if (!m["$ref"].is_string()) return malformed("'$ref' must be a string", ptr);
      const std::string r = m["$ref"].get<std::string>();
      auto target = resolve(r, ptr);
      if (!target) return std::move(target).err();
      SPITE_TRY(collect(**target, r.substr(1), depth + 1, out));
      const json rest = constraints_except(m, {"$ref"});
      if (!rest.empty()) SPITE_TRY(collect(rest, ptr, depth + 1, out));
      return ok();
    }
    if (m.contains("allOf")) {
      const json& all = m["allOf"];
      if (!all.is_array() || all.empty()) return malformed("'allOf' must be a non-empty array", ptr);
      for (std::size_t i = 0; i < all.size(); ++i) SPITE_TRY(collect(all[i], ptr + "/allOf/" + std::to_string(i), depth + 1, out));
      const json rest = constraints_except(m, {"allOf"});
      if (!rest.empty()) SPITE_TRY(collect(rest, ptr, depth + 1, out));
      return ok();
    }
    for (const auto& [k, v] : m.items()) {
      if (!passive(k) && !enforced_keys.contains(k)) return unsupported(k, ptr);
    }
    out.push_back(m);
    return ok();
  }

  result<json> intersect_types(const json& a, const json& b, const std::string& ptr) {
    auto list = [](const json& t) {
      std::vector<std::string> out;
      if (t.is_string()) out.push_back(t.get<std::string>());
      if (t.is_array()) {
        for (const auto& x : t) {
          if (x.is_string()) out.push_back(x.get<std::string>());
        }
      }
      return out;
    };
    if (a.is_null()) return b;
    const auto la = list(a), lb = list(b);
    auto has = [](const std::vector<std::string>& l, const std::string& t) { return std::find(l.begin(), l.end(), t) != l.end(); };
    json out = json::array();
    for (const auto& t : la) {
      if (has(lb, t) || (t == "integer" && has(lb, "number"))) out.push_back(t);
    }
    for (const auto& t : lb) {
      if (t == "integer" && has(la, "number") && !has(la, "integer")) out.push_back(t);
    }
    if (out.empty()) return malformed("the allOf members allow no common type", ptr);
    return out;
  }

  result<std::string> any_of(const json& s, const std::string& ptr, const std::string& hint, std::size_t depth) {
    if (s.contains("anyOf") && s.contains("oneOf")) return unsupported("anyOf together with oneOf", ptr);
    const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
    const json& branches = s[key];
    if (!branches.is_array() || branches.empty()) return malformed(std::string("'") + key + "' must be a non-empty array", ptr);
    // Keywords beside anyOf apply to every branch: anyOf[A, B] + S == anyOf[allOf(S, A), allOf(S, B)]
    // (S first, so that its properties keep their place before the branch's).
    const json rest = constraints_except(s, {"anyOf", "oneOf"});
    std::vector<std::string> alts;
    for (std::size_t i = 0; i < branches.size(); ++i) {
      const json branch = rest.empty() ? branches[i] : json::object({{"allOf", json::array({rest, branches[i]})}});
      auto alt = visit(branch, ptr + "/" + key + "/" + std::to_string(i), hint, depth + 1);
      if (!alt) return std::move(alt).err();
      if (std::find(alts.begin(), alts.end(), *alt) == alts.end()) alts.push_back(*alt);
    }
    return alts.size() == 1 ? alts[0] : rules_.add(hint, detail::join(alts, " | "));
  }

  result<std::vector<std::string>> types_of(const json& s, const std::string& ptr) {
    std::vector<std::string> types;
    if (const auto it = s.find("type"); it != s.end()) {
      const json list = it->is_array() ? *it : json::array({*it});
      for (const auto& t : list) {
        if (!t.is_string() || !type_names.contains(t.get<std::string>())) return malformed("unknown type " + t.dump(), ptr);
        types.push_back(t.get<std::string>());
      }
      if (types.empty()) return malformed("'type' lists no type", ptr);
    }
    if (s.value("nullable", false) && std::find(types.begin(), types.end(), "null") == types.end() && !types.empty()) {
      types.push_back("null");
    }
    return types;
  }

  result<std::string> enumeration(const json& s, const std::string& ptr, const std::string& hint) {
    for (const auto& [k, v] : s.items()) {
      if (!passive(k) && k != "enum" && k != "const" && k != "type" && k != "nullable") {
        return unsupported(k + " beside enum or const", ptr);
      }
    }
    json values = json::array();
    if (s.contains("const")) {
      if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), s["const"]) == s["enum"].end()) {
        return malformed("const is not one of enum", ptr);
      }
      values.push_back(s["const"]);
    } else {
      if (!s["enum"].is_array() || s["enum"].empty()) return malformed("'enum' must be a non-empty array", ptr);
      values = s["enum"];
    }
    auto types = types_of(s, ptr);
    if (!types) return std::move(types).err();
    std::vector<std::string> alts;
    for (const auto& v : values) {
      const bool fits = types->empty() || std::any_of(types->begin(), types->end(), [&](const auto& t) { return value_has_type(v, t); });
      const std::string lit = detail::json_literal(v);
      if (fits && std::find(alts.begin(), alts.end(), lit) == alts.end()) alts.push_back(lit);
    }
    if (s.value("nullable", false) && std::find(alts.begin(), alts.end(), "\"null\"") == alts.end()) alts.push_back("\"null\"");
    if (alts.empty()) return malformed("no value of enum or const has the schema's type", ptr);
    return rules_.add(hint, detail::join(alts, " | "));
  }

  result<std::string> typed(const json& s, const std::string& ptr, const std::string& hint, std::size_t depth) {
    auto listed = types_of(s, ptr);
    if (!listed) return std::move(listed).err();
    std::vector<std::string> types = *listed;
    if (types.empty()) {
      // No type: each keyword constrains only values of its own type. Generating just the types
      // whose keywords appear stays within what the schema accepts.
      auto uses = [&](std::initializer_list<const char*> keys) {
        return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
      };
      if (uses({"properties", "required", "additionalProperties"})) types.push_back("object");
      if (uses({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) types.push_back("array");
      if (uses({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
      if (uses({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
      if (types.empty()) return rules_.prim("value");
      if (s.value("nullable", false)) types.push_back("null");
    }
    std::vector<std::string> alts;
    for (const auto& t : types) {
      result<std::string> alt = std::string();
      if (t == "object") {
        alt = object(s, ptr, hint, depth);
      } else if (t == "array") {
        alt = array(s, ptr, hint, depth);
      } else if (t == "string") {
        alt = detail::string_rule(rules_, s, ptr, hint, options_);
      } else if (t == "number") {
        alt = detail::number_rule(rules_, s, ptr, hint);
      } else if (t == "integer") {
        alt = detail::integer_rule(rules_, s, ptr, hint);
      } else {
        alt = rules_.prim(t);
      }
      if (!alt) return std::move(alt).err();
      if (std::find(alts.begin(), alts.end(), *alt) == alts.end()) alts.push_back(*alt);
    }
    return alts.size() == 1 ? alts[0] : rules_.add(hint, detail::join(alts, " | "));
  }

  result<std::string> object(const json& s, const std::string& ptr, const std::string& hint, std::size_t depth) {
    static const json any = true;
    struct member {
      std::string name;
      const json* schema;
      bool required;
    };
    std::vector<member> members;
    const json* props = s.contains("properties") ? &s["properties"] : nullptr;
    if (props && !props->is_object()) return malformed("'properties' must be an object", ptr);
    std::vector<std::string> required;
    if (const auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) return malformed("'required' must be an array of strings", ptr);
      for (const auto& r : *it) {
        if (!r.is_string()) return malformed("'required' must be an array of strings", ptr);
        required.push_back(r.get<std::string>());
      }
    }
    auto is_required = [&](const std::string& n) { return std::find(required.begin(), required.end(), n) != required.end(); };
    if (props) {
      for (const auto& [name, sub] : props->items()) members.push_back({name, &sub, is_required(name)});
    }
    for (const auto& r : required) {
      if (!props || !props->contains(r)) members.push_back({r, &any, true});
    }
    bool extra = !props || props->empty();
    const json* extra_schema = &any;
    if (const auto it = s.find("additionalProperties"); it != s.end()) {
      if (it->is_boolean()) {
        extra = it->get<bool>();
      } else if (it->is_object()) {
        extra = true;
        extra_schema = &*it;
      } else {
        return malformed("'additionalProperties' must be a boolean or a schema", ptr);
      }
    }
    const std::string ws = rules_.prim("ws");
    const std::string sep = ws + " \",\" " + ws + " ";
    std::vector<std::string> kv;
    for (const auto& m : members) {
      auto value = visit(*m.schema, ptr + "/properties" + pointer_segment(m.name), m.name, depth + 1);
      if (!value) return std::move(value).err();
      kv.push_back(rules_.add(hint + "-" + m.name + "-kv", detail::json_literal(m.name) + " " + ws + " \":\" " + ws + " " + *value));
    }
    // first_i: members from i on, none written yet; after_i: the same once one is written (each
    // then starts with a comma). Optional members may be skipped, extra keys come last.
    std::string after = ws, first = "\"\"";
    if (extra) {
      auto value = visit(*extra_schema, ptr + "/additionalProperties", hint + "-extra", depth + 1);
      if (!value) return std::move(value).err();
      std::vector<std::string> names;
      for (const auto& m : members) names.push_back(m.name);
      const std::string key = names.empty() ? rules_.prim("string") : detail::key_excluding(rules_, names);
      const std::string extra_kv = rules_.add(hint + "-extra-kv", key + " " + ws + " \":\" " + ws + " " + *value);
      after = rules_.add(hint + "-rest", "( " + sep + extra_kv + " )* " + ws);
      first = "( " + extra_kv + " " + after + " )?";
    }
    for (std::size_t i = members.size(); i-- > 0;) {
      const std::string a = rules_.add(hint + "-rest", after), f = rules_.add(hint + "-rest", first);
      if (members[i].required) {
        after = sep + kv[i] + " " + a;
        first = kv[i] + " " + a;
      } else {
        after = sep + kv[i] + " " + a + " | " + a;
        first = kv[i] + " " + a + " | " + f;
      }
    }
    return rules_.add(hint, "\"{\" " + ws + " " + rules_.add(hint + "-members", first) + " \"}\"");
  }

  result<std::string> array(const json& s, const std::string& ptr, const std::string& hint, std::size_t depth) {
    static const json any = true;
    const json* prefix = nullptr;
    std::string prefix_ptr;
    const json* items = s.contains("items") ? &s["items"] : &any;
    std::string items_ptr = ptr + "/items";
    if (s.contains("prefixItems")) {
      prefix = &s["prefixItems"];
      prefix_ptr = ptr + "/prefixItems";
      if (items->is_array()) return malformed("'items' must be a schema when 'prefixItems' is given", ptr);
    } else if (items->is_array()) {  // draft 4-7 tuples: items is the prefix, additionalItems the rest
      prefix = items;
      prefix_ptr = ptr + "/items";
      items = s.contains("additionalItems") ? &s["additionalItems"] : &any;
      items_ptr = ptr + "/additionalItems";
    }
    if (prefix && !prefix->is_array()) return malformed("'prefixItems' must be an array", ptr);
    const std::size_t k = prefix ? prefix->size() : 0;
    auto min = count(s, "minItems", ptr);
    if (!min) return std::move(min).err();
    auto max = count(s, "maxItems", ptr);
    if (!max) return std::move(max).err();
    const bool more = !(items->is_boolean() && !items->get<bool>());
    std::size_t lo = min->value_or(0);
    std::optional<std::size_t> hi = *max;
    if (!more) hi = std::min(hi.value_or(k), k);
    if (hi && *hi < lo) return malformed("minItems is above maxItems (or above the number of prefixItems)", ptr);
    const std::string ws = rules_.prim("ws");
    const std::string sep = ws + " \",\" " + ws + " ";
    if (hi && *hi == 0) return rules_.add(hint, "\"[\" " + ws + " \"]\"");
    std::vector<std::string> element;
    for (std::size_t j = 0; j < k; ++j) {
      auto e = visit((*prefix)[j], prefix_ptr + "/" + std::to_string(j), hint + "-item", depth + 1);
      if (!e) return std::move(e).err();
      element.push_back(*e);
    }
    std::string item;
    if (more) {
      auto e = visit(*items, items_ptr, hint + "-item", depth + 1);
      if (!e) return std::move(e).err();
      item = *e;
    }
    auto bounds = [](std::size_t a, std::optional<std::size_t> b) {
      return "{" + std::to_string(a) + "," + (b ? std::to_string(*b) : "") + "}";
    };
    std::string body;
    if (k == 0) {
      body = item + " ( " + sep + item + " )" + bounds(lo > 0 ? lo - 1 : 0, hi ? std::optional<std::size_t>(*hi - 1) : std::nullopt);
    } else {
      // rest_j: what follows once j elements are written.
      std::string rest = "\"\"";
      if (more && (!hi || *hi > k)) {
        rest = "( " + sep + item + " )" + bounds(lo > k ? lo - k : 0, hi ? std::optional<std::size_t>(*hi - k) : std::nullopt);
      }
      for (std::size_t j = k - 1; j >= 1; --j) {
        const std::string next = rules_.add(hint + "-rest", rest);
        if (hi && j >= *hi) {
          rest = "\"\"";
        } else {
          rest = sep + element[j] + " " + next + (j >= lo ? " | \"\"" : "");
        }
      }
      body = element[0] + " " + rules_.add(hint + "-rest", rest);
    }
    const std::string list = rules_.add(hint + "-items", body);
    return rules_.add(hint, "\"[\" " + ws + (lo == 0 ? " ( " + list + " " + ws + " )? " : " " + list + " " + ws + " ") + "\"]\"");
  }

  result<std::optional<std::size_t>> count(const json& s, const char* key, const std::string& ptr) {
    const auto it = s.find(key);
    if (it == s.end()) return std::optional<std::size_t>{};
    if (!(it->is_number_unsigned() || (it->is_number_integer() && it->get<std::int64_t>() >= 0))) {
      return malformed(std::string("'") + key + "' must be a non-negative integer", ptr);
    }
    if (it->get<std::uint64_t>() > options_.max_bound) return unsupported(std::string(key) + " above " + std::to_string(options_.max_bound), ptr);
    return std::optional<std::size_t>{it->get<std::size_t>()};
  }

  const json& root_;
  const schema_options& options_;
  detail::rule_set rules_;
  std::map<std::string, std::string> refs_;  // $ref -> rule name
  std::size_t expansions_ = 0;
};

}  // namespace

result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const schema_options& options) {
  compiler c(schema, options);
  return c.run();
}

result<std::string> json_schema_text_to_gbnf(std::string_view schema_text, const schema_options& options) {
  if (schema_text.size() > options.max_schema_bytes) {
    return make_error(errc::invalid_argument, "the JSON schema is " + std::to_string(schema_text.size()) +
                                                  " bytes, more than the limit of " + std::to_string(options.max_schema_bytes));
  }
  const json schema = json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return make_error(errc::invalid_argument, "the JSON schema is not valid JSON");
  return json_schema_to_gbnf(schema, options);
}

std::string json_object_gbnf() {
  detail::rule_set rules;
  return rules.text(rules.prim("object"));
}

result<std::shared_ptr<const grammar>> json_schema_grammar(const nlohmann::ordered_json& schema, const schema_options& options) {
  auto text = json_schema_to_gbnf(schema, options);
  if (!text) return std::move(text).err();
  auto g = grammar::parse(*text);
  if (!g) {
    // The compiler writes valid GBNF, so what fails here is the schema's content: a root that
    // can never finish (required properties whose schema is false, ...) or a size limit.
    return make_error(errc::invalid_argument, "the JSON schema cannot be enforced: " + g.err().message);
  }
  return g;
}

result<std::shared_ptr<const grammar>> json_object_grammar() { return grammar::parse(json_object_gbnf()); }

}  // namespace spite::grammar
