// Unit tests of the chat-template interpreter. The expected outputs and error kinds are what
// Python's jinja2 3.1 gives for the same template and data in transformers' environment
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls).
#include <catch2/catch.hpp>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "spite/tokenizer/template.hpp"

namespace {

using spite::errc;
using spite::tokenizer::chat_template;
using spite::tokenizer::render_options;
using spite::tokenizer::value;
using spite::tokenizer::value_dict;
using spite::tokenizer::value_list;

struct render_case {
  const char* name;
  const char* source;
  const char* context;  // JSON object, or "" for none
  const char* expected;  // output, or the Python exception type for error tables
};

render_options fixed_clock() {
  render_options o;
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  t.tm_hour = 12;
  o.now = t;
  return o;
}

value context_of(const char* json) {
  if (json == nullptr || *json == '\0') return value(value_dict{});
  return spite::tokenizer::from_json(nlohmann::ordered_json::parse(json));
}

spite::result<std::string> render(const std::string& source, const char* context = "",
                                  const render_options& options = fixed_clock()) {
  auto t = chat_template::compile(source);
  if (!t) return t.err();
  return t->render(context_of(context), options);
}

std::string render_ok(const std::string& source, const char* context = "") {
  auto r = render(source, context);
  INFO(source);
  if (!r) FAIL("render failed: " << r.err().message);
  return *r;
}

void check_table(const std::vector<render_case>& cases) {
  for (const auto& c : cases) {
    INFO(c.name << "\n  template: " << c.source);
    auto r = render(c.source, c.context);
    if (!r) FAIL("render failed: " << r.err().message);
    CHECK(*r == c.expected);
  }
}

}  // namespace

TEST_CASE("templates render like jinja2", "[template]") {
  const std::vector<render_case> cases = {
// ---- whitespace
    {"trim_blocks drops the newline after a block tag", "{% if true %}\nyes\n{% endif %}\nafter", "", "yes\nafter"},
    {"lstrip_blocks strips indentation before a block tag", "<a>\n    {% if true %}\n    x\n    {% endif %}\n</a>", "", "<a>\n    x\n</a>"},
    {"lstrip_blocks keeps text before a tag on the same line", "text  {% if true %}x{% endif %}", "", "text  x"},
    {"lstrip_blocks does not touch print tags", "  {{ 'v' }}\n", "", "  v"},
    {"minus strips all whitespace before", "a \n\n  {%- if true %}b{% endif %}", "", "ab"},
    {"minus strips all whitespace after", "{% if true -%}  \n\n  b{% endif %}", "", "b"},
    {"print tags strip both ways", "a  \n {{- 'x' -}} \n  b", "", "axb"},
    {"plus keeps indentation", "  {%+ if true %}x{% endif %}", "", "  x"},
    {"plus at the end keeps the newline", "{% if true +%}\nx{% endif %}", "", "\nx"},
    {"comments are removed and trimmed", "a\n  {# note #}\nb\n{#- gone -#}\n c", "", "a\nbc"},
    {"one trailing newline is dropped", "x\n\n", "", "x\n"},
    {"newlines are normalised", "a\r\nb\rc\r\n", "", "a\nb\nc"},
    {"raw blocks are not evaluated", "{% raw %}{{ x }}{% if %}{% endraw %}", "", "{{ x }}{% if %}"},
    {"raw with whitespace control", "a  {%- raw -%}  {{ x }}  {%- endraw -%}  b", "", "a{{ x }}b"},
    {"loop body with trim and lstrip", "{% for m in ['a', 'b'] %}\n  <{{ m }}>\n{% endfor %}\n", "", "  <a>\n  <b>\n"},
    {"unicode whitespace counts for minus", "x　 {%- if true %}y{% endif %}", "", "xy"},
// ---- expressions
    {"integer arithmetic", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }}", "", "7 9 3 -4 2 1024 64"},
    {"true division gives floats", "{{ 7 / 2 }} {{ 6 / 2 }} {{ 1 / 3 }}", "", "3.5 3.0 0.3333333333333333"},
    {"python float repr", "{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 1.0 }} {{ 2.5e-4 }} {{ 123456789.125 }}", "", "0.30000000000000004 1e+16 1e-05 1.0 0.00025 123456789.125"},
    {"bools and ints mix", "{{ true + 1 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'x' * true }}", "", "2 True True x"},
    {"comparisons chain", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ (1, 2) == (1, 2) }}", "", "True False True True True"},
    {"in and not in", "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 1 in missing }}", "", "True True True True False"},
    {"and/or return an operand", "{{ 0 or '' or 'x' }} {{ 1 and 'y' }} {{ [] or {} }} {{ none and 1 }}", "", "x y {} None"},
    {"not binds looser than is", "{{ not x is defined }} {{ not 1 == 2 }} {{ not not 'a' }}", "", "True True True"},
    {"conditional expression", "{{ 'a' if true else 'b' }} {{ 'a' if false else 'b' }} [{{ 'a' if false }}] {{ 1 if 0 else 2 if 0 else 3 }}", "", "a b [] 3"},
    {"tilde concatenates str() of anything", "{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ missing }}", "", "a1NoneTrue[1]"},
    {"string and list operators", "{{ 'ab' * 3 }} {{ 2 * 'c' }} {{ [1] * 2 }} {{ [1] + [2] }} {{ 'x' + 'y' }}", "", "ababab cc [1, 1] [1, 2] xy"},
    {"attribute and subscript access", "{{ d.a.b }} {{ d['a']['b'] }} {{ d.l.0 }} {{ d.l[-1] }} {{ d['missing'] }}|", "{\"d\": {\"a\": {\"b\": \"deep\"}, \"l\": [1, 2]}}", "deep deep 1 2 |"},
    {"dict methods win over keys for dot access", "{{ d.items is callable }} {{ d['items'] }}", "{\"d\": {\"items\": \"key\"}}", "True key"},
    {"slicing", "{{ 'hello'[1:3] }} {{ 'abc'[::-1] }} {{ [1, 2, 3, 4, 5][::2] }} {{ [1, 2, 3][-2:] }} {{ [1, 2, 3][::-2] }} {{ 'abc'[5:] }}|", "", "el cba [1, 3, 5] [2, 3] [3, 1] |"},
    {"literals", "{{ [1, 'a', none, true] }} {{ {'k': [1, 2]} }} {{ (1,) }} {{ () }} {{ 'a' 'b' }} {{ 0x1f }} {{ 1_000 }}", "", "[1, 'a', None, True] {'k': [1, 2]} (1,) () ab 31 1000"},
    {"slicing literals folds to undefined on bad indices", "[{{ 'abc'[:'x'] }}][{{ [1, 2][1.5:] }}]", "", "[][]"},
    {"string escapes", "{{ 'tab\\there' }}|{{ 'q\\'s' }}|{{ \"d\\\"q\" }}|{{ '\\u00e9\\x41' }}", "", "tab\there|q's|d\"q|éA"},
    {"negative numbers and filters", "{{ -2 ** 2 }} {{ -3 | abs }} {{ - 1 + 2 }}", "", "4 3 1"},
    {"calls with keyword arguments", "{{ 'a-b-c'.split('-', maxsplit=1) }} {{ range(1, 7, 2) | list }}", "", "['a', 'b-c'] [1, 3, 5]"},
// ---- python_str
    {"str of constants", "{{ true }} {{ false }} {{ none }} {{ 42 }} {{ -7 }}", "", "True False None 42 -7"},
    {"undefined prints nothing", "[{{ missing }}][{{ d.missing }}]", "{\"d\": {}}", "[][]"},
    {"lists and dicts print as repr", "{{ ['x', 'y'] }} {{ {'a': 1, 'b': none} }} {{ [{'t': 'text'}] }} {{ ('p', 1) }}", "", "['x', 'y'] {'a': 1, 'b': None} [{'t': 'text'}] ('p', 1)"},
    {"repr picks quotes like python", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'back\\\\slash'] }}", "", "[\"it's\", 'say \"hi\"', 'both \\' \"', 'back\\\\slash']"},
    {"repr escapes control characters", "{{ ['a\\nb\\tc\\r', '\\x01\\x7f', '\\u200b\\u00a0'] }}", "", "['a\\nb\\tc\\r', '\\x01\\x7f', '\\u200b\\xa0']"},
    {"repr keeps printable unicode", "{{ ['é', '中文', '😀'] }}", "", "['é', '中文', '😀']"},
    {"dict views print like python", "{{ d.keys() }} {{ d.values() }} {{ d.items() }}", "{\"d\": {\"a\": 1}}", "dict_keys(['a']) dict_values([1]) dict_items([('a', 1)])"},
    {"namespace prints its attributes", "{{ namespace(a=1, b='x') }}", "", "<Namespace {'a': 1, 'b': 'x'}>"},
    {"input keeps key order", "{{ d }} {{ d | tojson }}", "{\"d\": {\"z\": 1, \"a\": 2, \"m\": 3}}", "{'z': 1, 'a': 2, 'm': 3} {\"z\": 1, \"a\": 2, \"m\": 3}"},
// ---- loops
    {"loop variables", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", "", "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
    {"previtem, nextitem and cycle", "{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }} {{ loop.cycle('odd', 'even') }};{% endfor %}", "", "<1>2 odd;1<2>3 even;2<3> odd;"},
    {"for else runs on empty input", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}", "", "empty"},
    {"loop filtering counts only kept items", "{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.index }}/{{ loop.length }} {% endfor %}", "", "2/1/2 4/2/2 "},
    {"break and continue", "{% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}", "", "0246"},
    {"tuple unpacking", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {% for a, (b, c) in [[1, [2, 3]]] %}{{ a }}{{ b }}{{ c }}{% endfor %}", "{\"d\": {\"b\": 1, \"a\": 2}}", "b=1;a=2; 123"},
    {"iterating a dict gives keys", "{% for k in d %}{{ k }}{% endfor %}", "{\"d\": {\"x\": 1, \"y\": 2}}", "xy"},
    {"nested loops shadow loop", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}", "", "121|122|"},
    {"iterating undefined is empty", "{% for x in missing %}{{ x }}{% else %}none{% endfor %}", "", "none"},
    {"recursive loops", "{% for n in tree recursive %}({{ n.name }}{% if n.kids %}{{ loop(n.kids) }}{% endif %}){% endfor %}", "{\"tree\": [{\"name\": \"a\", \"kids\": [{\"name\": \"b\"}]}, {\"name\": \"c\"}]}", "(a(b))(c)"},
    {"loop.changed", "{% for x in [1, 1, 2] %}{{ loop.changed(x) }} {% endfor %}", "", "True False True "},
    {"iterating loop consumes it", "{% for x in [1, 2, 3] %}{{ loop.index }}{{ 9 in loop }}{{ loop.index }}{{ loop.last }}|{% endfor %}", "", "1False3True|"},
// ---- scoping
    {"set inside a loop does not leak", "{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %} {{ x }}", "", "inner outer"},
    {"each iteration starts from the outer value", "{% set x = 0 %}{% for i in [1, 2, 3] %}{% set x = x + i %}{{ x }}{% endfor %}", "", "123"},
    {"set inside if is visible after it", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}", "", "5"},
    {"namespace carries state out of loops", "{% set ns = namespace(total=0, seen=false) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% if i == 2 %}{% set ns.seen = true %}{% endif %}{% endfor %}{{ ns.total }} {{ ns.seen }}", "", "6 True"},
    {"namespace is shared by reference", "{% set a = namespace(v=1) %}{% set b = a %}{% set b.v = 2 %}{{ a.v }} {{ a['v'] }} {{ a.nothing is defined }}", "", "2 2 False"},
    {"block set captures output", "{% set body %}Hi {{ name }}!{% endset %}[{{ body }}] {% set up | upper %}shout{% endset %}{{ up }}", "{\"name\": \"Ann\"}", "[Hi Ann!] SHOUT"},
    {"tuple assignment", "{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set c, d = 'xy' %}{{ c }}{{ d }}", "", "12 xy"},
    {"with opens a scope", "{% with x = 5 %}{{ x }}{% endwith %}[{{ x }}]", "", "5[]"},
    {"macros see their defining scope", "{% set v = 'top' %}{% macro m() %}{{ v }}{% endmacro %}{% for i in [1] %}{% set v = 'loop' %}{{ m() }}{% endfor %}", "", "top"},
// ---- macros
    {"macro defaults and keywords", "{% macro m(a, b='B', c=none) %}[{{ a }}|{{ b }}|{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(1, c=3) }}{{ m(a=5) }}", "", "[1|B|None][1|2|None][1|B|3][5|B|None]"},
    {"defaults can use earlier parameters", "{% macro m(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ m('x') }}", "", "x!"},
    {"missing parameters are undefined", "{% macro m(a, b) %}{{ a }}[{{ b }}]{{ b is defined }}{% endmacro %}{{ m(1) }}", "", "1[]False"},
    {"varargs and kwargs", "{% macro m(a) %}{{ a }} {{ varargs }} {{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}", "", "1 (2, 3) {'k': 'v'}"},
    {"recursive macros", "{% macro count(n) %}{{ n }}{% if n > 0 %},{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }}", "", "3,2,1,0"},
    {"call blocks", "{% macro box(t) %}<{{ t }}:{{ caller() }}>{% endmacro %}{% call box('b') %}inside{% endcall %}", "", "<b:inside>"},
    {"call blocks with arguments", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}[{{ v }}]{% endcall %}", "", "[1][2]"},
    {"filter blocks", "{% filter upper %}hello {{ 'you' }}{% endfilter %}|{% filter trim %}  x  {% endfilter %}", "", "HELLO YOU|x"},
    {"generation blocks render their body", "{% generation %}answer {{ 1 + 1 }}{% endgeneration %}", "", "answer 2"},
    {"macro output is a string", "{% macro m() %}abc{% endmacro %}{{ m() | length }} {{ m() is string }}", "", "3 True"},
// ---- filters
    {"string case filters", "{{ 'hello WORLD' | upper }} {{ 'HeLLo' | lower }} {{ 'hello world-x(y' | title }} {{ 'hELLO' | capitalize }}", "", "HELLO WORLD hello Hello World-X(Y Hello"},
    {"trim and replace", "[{{ '  x  ' | trim }}] [{{ 'xxhixx' | trim('x') }}] {{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }}", "", "[x] [hi] a+b+c bba"},
    {"length and count", "{{ 'héllo' | length }} {{ [1, 2] | count }} {{ {'a': 1} | length }} {{ missing | length }}", "", "5 2 1 0"},
    {"default", "{{ missing | default('d') }} {{ '' | default('e', true) }} {{ 0 | d('z', boolean=true) }} {{ none | default('n') }} {{ 0 | default('kept') }}", "", "d e z None 0"},
    {"join, first, last, list", "{{ [1, 2, 3] | join('-') }} {{ ['a', 'b'] | join }} {{ [1, 2] | first }} {{ [1, 2] | last }} {{ 'ab' | list }} {{ [] | first }}|", "", "1-2-3 ab 1 2 ['a', 'b'] |"},
    {"join with attribute", "{{ users | join(', ', attribute='name') }}", "{\"users\": [{\"name\": \"a\"}, {\"name\": \"b\"}]}", "a, b"},
    {"map", "{{ users | map(attribute='name') | list }} {{ ['a', 'b'] | map('upper') | join }} {{ users | map(attribute='age', default=0) | list }}", "{\"users\": [{\"name\": \"a\", \"age\": 3}, {\"name\": \"b\"}]}", "['a', 'b'] AB [3, 0]"},
    {"select and reject", "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3] | reject('>', 1) | list }} {{ [0, 1, '', 'x'] | select | list }}", "", "[1, 3] [1] [1, 'x']"},
    {"selectattr and rejectattr", "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | list }} {{ ms | rejectattr('role', 'eq', 'user') | list | length }} {{ ms | selectattr('c', 'defined') | list | length }}", "{\"ms\": [{\"role\": \"user\", \"c\": 1}, {\"role\": \"system\", \"c\": 2}, {\"role\": \"user\"}]}", "[1, Undefined] 1 2"},
    {"items and dictsort", "{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %} {{ d | dictsort }} {{ d | dictsort(by='value', reverse=true) }}", "{\"d\": {\"b\": 2, \"a\": 3, \"C\": 1}}", "b2a3C1 [('a', 3), ('b', 2), ('C', 1)] [('a', 3), ('b', 2), ('C', 1)]"},
    {"sort", "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) }} {{ xs | sort(attribute='n') | map(attribute='n') | list }}", "{\"xs\": [{\"n\": 2}, {\"n\": 1}]}", "[1, 2, 3] ['A', 'b', 'c'] ['A', 'b', 'c'] [3, 2, 1] [1, 2]"},
    {"unique, min, max, sum", "{{ [1, 2, 1, 3] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }} {{ [4, 2, 8] | min }} {{ [4, 2, 8] | max }} {{ [1, 2, 3] | sum }} {{ xs | sum(attribute='n', start=10) }}", "{\"xs\": [{\"n\": 2}, {\"n\": 1}]}", "[1, 2, 3] ['a', 'b'] 2 8 6 13"},
    {"indent", "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'x\\ny' | indent('> ', first=true) }}", "", "a\n    b\n\n    c|  a\n  b|a\n  \n  b|> x\n> y"},
    {"numbers", "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '0x1f' | int(base=16) }} {{ '3.5' | float }} {{ 'x' | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 2.1 | round(0, 'ceil') }} {{ 5 | round }}", "", "42 4 0 7 3 31 3.5 0.0 3 2.57 2.0 3.0 5"},
    {"string, safe and escape", "{{ 5 | string }} {{ none | string }} {{ [1] | string }} {{ '<b>' | safe }} {{ '<a href=\"x\">&' | escape }}", "", "5 None [1] <b> &lt;a href=&#34;x&#34;&gt;&amp;"},
    {"safe strings escape what is added to them", "{{ 'Use '|safe + '<tool>' + ' now'|safe }}", "", "Use &lt;tool&gt; now"},
    {"reverse, batch, slice, center, wordcount", "{{ 'abc' | reverse }} {{ [1, 2, 3] | reverse | list }} {{ [1, 2, 3] | batch(2, 0) | list }} {{ [1, 2, 3, 4, 5] | slice(2) | list }} [{{ 'x' | center(5) }}] {{ 'a b  c' | wordcount }}", "", "cba [3, 2, 1] [[1, 2], [3, 0]] [[1, 2, 3], [4, 5]] [  x  ] 3"},
    {"format and groupby", "{{ '%s=%d' | format('a', 3) }} {% for g in xs | groupby('k') %}{{ g.grouper }}:{{ g.list | length }} {% endfor %}", "{\"xs\": [{\"k\": \"b\"}, {\"k\": \"a\"}, {\"k\": \"b\"}]}", "a=3 a:1 b:2 "},
    {"tojson defaults", "{{ x | tojson }}", "{\"x\": {\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\\n\\t</script>&\", \"e\": [], \"f\": {}}}", "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\\n\\t</script>&\", \"e\": [], \"f\": {}}"},
    {"tojson indent", "{{ x | tojson(indent=2) }}", "{\"x\": {\"b\": [1, {\"c\": null}], \"a\": [], \"d\": {}}}", "{\n  \"b\": [\n    1,\n    {\n      \"c\": null\n    }\n  ],\n  \"a\": [],\n  \"d\": {}\n}"},
    {"tojson sort_keys, separators, ensure_ascii", "{{ x | tojson(sort_keys=true) }} {{ x | tojson(separators=(',', ':')) }} {{ 'é😀' | tojson(ensure_ascii=true) }} {{ [1, 2] | tojson(indent='\\t') }}", "{\"x\": {\"b\": 1, \"a\": [2, 3]}}", "{\"a\": [2, 3], \"b\": 1} {\"b\":1,\"a\":[2,3]} \"\\u00e9\\ud83d\\ude00\" [\n\t1,\n\t2\n]"},
    {"tojson key conversion", "{{ {1: 'a', none: 'b', true: 'c', 1.5: 'd'} | tojson }}", "", "{\"1\": \"c\", \"null\": \"b\", \"1.5\": \"d\"}"},
// ---- tests
    {"type tests", "{{ 'a' is string }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ {} is mapping }} {{ [] is sequence }} {{ 'x' is sequence }} {{ 1 is iterable }} {{ none is none }} {{ range is callable }}", "", "True True True True True True True True False True True"},
    {"defined and undefined", "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ d.k is defined }} {{ d.z is defined }}", "{\"x\": 1, \"d\": {\"k\": null}}", "True False True True False"},
    {"true and false are identity tests", "{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }}", "", "True False True False"},
    {"number tests", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }}", "", "True True True False"},
    {"comparison tests", "{{ 2 is eq 2 }} {{ 2 is equalto 2 }} {{ 2 is ne 3 }} {{ 2 is lt 3 }} {{ 2 is gt 3 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 'a' is in 'abc' }}", "", "True True True True False True False True"},
    {"sameas, lower, upper, escaped", "{{ none is sameas none }} {{ 1 is sameas true }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ 'x' | safe is escaped }}", "", "True False True True True"},
    {"filter and test tests", "{{ 'upper' is filter }} {{ 'from_json' is filter }} {{ 'odd' is test }}", "", "True False True"},
    {"is not", "{{ 1 is not string }} {{ none is not none }}", "", "True False"},
// ---- methods
    {"strip family", "[{{ '  x  '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\\n\\nx\\n'.lstrip('\\n') }}][{{ 'x  '.rstrip() }}]", "", "[x][a][x\n][x]"},
    {"split family", "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'x</think>y'.split('</think>')[-1] }} {{ 'a\\nb\\r\\nc'.splitlines() }}", "", "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a b', 'c'] y ['a', 'b', 'c']"},
    {"search", "{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ 'héllo'.index('l') }}", "", "True True 2 3 -1 2 2"},
    {"case and predicates", "{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'Hi'.upper() }}{{ 'Hi'.lower() }} {{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ '  '.isspace() }} {{ 'ab'.islower() }}", "", "Hello World Hello HIhi True True True True"},
    {"replace, join, pad", "{{ 'aXbX'.replace('X', '-') }} {{ ', '.join(['a', 'b']) }} {{ 'ab'.center(6, '*') }} {{ 'ab'.ljust(4) }}| {{ '7'.zfill(3) }} {{ 'a=b'.partition('=') }}", "", "a-b- a, b **ab** ab  | 007 ('a', '=', 'b')"},
    {"format", "{{ '{} and {}'.format('a', 'b') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '<{name}>'.format(name='n') }} {{ '{:>5}|{:<4}|{:^5}'.format('a', 'b', 'c') }} {{ '{:.2f} {:05d} {:,}'.format(3.14159, 42, 1234567) }} {{ '{!r}'.format('q') }}", "", "a and b xyx <n>     a|b   |  c   3.14 00042 1,234,567 'q'"},
    {"percent formatting", "{{ '%s is %d' % ('x', 3) }} {{ '%05.1f' % 3.14159 }} {{ '%-4s|' % 'ab' }} {{ '%(a)s' % {'a': 1} }} {{ '%x' % 255 }}", "", "x is 3 003.1 ab  | 1 ff"},
    {"dict methods", "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }} {{ 'a' in d.keys() }}", "{\"d\": {\"a\": 1, \"b\": 2}}", "1 None dflt ['a', 'b'] [1, 2] [('a', 1), ('b', 2)] True"},
    {"list methods", "{{ xs.index(2) }} {{ xs.count(1) }} {{ xs.copy() }}", "{\"xs\": [1, 2, 1]}", "1 2 [1, 2, 1]"},
    {"globals", "{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(5, 0, -2) | list }} {{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }}", "", "[0, 1, 2] [1, 2, 3] [5, 3, 1] {'a': 1, 'b': 2} {'x': 1}"},
    {"strftime_now uses the given clock", "{{ strftime_now('%Y-%m-%d') }} | {{ strftime_now('%d %b %Y') }} | {{ strftime_now('%B %d, %Y') }} | {{ strftime_now('%A %H:%M:%S %p %j %-d/%-m') }}", "", "2026-01-15 | 15 Jan 2026 | January 15, 2026 | Thursday 12:00:00 PM 015 15/1"},
  };
  check_table(cases);
}

TEST_CASE("templates fail where jinja2 raises, naming the Python exception", "[template]") {
  const std::vector<render_case> cases = {
// ---- undefined
    {"attribute of undefined", "{{ x.y }}", "", "UndefinedError"},
    {"item of undefined", "{{ x['y'] }}", "", "UndefinedError"},
    {"calling undefined", "{{ x() }}", "", "UndefinedError"},
    {"method of undefined", "{{ x.get('y') }}", "", "UndefinedError"},
    {"adding to undefined", "{{ 'text' + x }}", "", "UndefinedError"},
    {"arithmetic with undefined", "{{ x - 1 }}", "", "UndefinedError"},
    {"comparing undefined", "{{ x < 1 }}", "", "UndefinedError"},
    {"int of undefined", "{{ x | int }}", "", "UndefinedError"},
    {"indent of undefined", "{{ x | indent }}", "", "UndefinedError"},
    {"deep attribute of a missing key", "{{ d.missing.deeper }}", "{\"d\": {}}", "UndefinedError"},
// ---- type
    {"str plus list", "{{ 'a' + [1] }}", "", "TypeError"},
    {"str plus dict", "{{ 'args: ' + d }}", "{\"d\": {\"a\": 1}}", "TypeError"},
    {"str plus int", "{{ 'a' + 1 }}", "", "TypeError"},
    {"length of none", "{{ none | length }}", "", "TypeError"},
    {"iterating none", "{% for x in none %}{% endfor %}", "", "TypeError"},
    {"in none", "{{ 1 in none }}", "", "TypeError"},
    {"items of a string", "{% for k, v in 'abc' | items %}{% endfor %}", "", "TypeError"},
    {"tojson of a generator", "{{ xs | map(attribute='a') | tojson }}", "{\"xs\": [{\"a\": 1}]}", "TypeError"},
    {"length of a generator", "{{ xs | select | length }}", "{\"xs\": [1]}", "TypeError"},
    {"tojson of undefined", "{{ x | tojson }}", "", "TypeError"},
    {"ordering str and int", "{{ 1 < 'a' }}", "", "TypeError"},
    {"sorting mixed types", "{{ [1, 'a'] | sort }}", "", "TypeError"},
    {"calling a string", "{{ 'abc'() }}", "", "TypeError"},
    {"too many macro arguments", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "", "TypeError"},
    {"unknown macro keyword", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", "", "TypeError"},
    {"join of non-strings", "{{ ''.join([1]) }}", "", "TypeError"},
    {"slicing none", "{{ x[1:] }}", "{\"x\": null}", "TypeError"},
    {"slicing with a string index", "{{ x['a':] }}", "{\"x\": \"abc\"}", "TypeError"},
    {"sort with a non-int reverse", "{{ [2, 1] | sort(reverse='yes') }}", "", "TypeError"},
    {"dict of undefined", "{{ dict(missing) }}", "", "UndefinedError"},
// ---- security
    {"list.append", "{% set xs = [] %}{{ xs.append(1) }}", "", "SecurityError"},
    {"list.pop", "{% set xs = [1] %}{{ xs.pop() }}", "", "SecurityError"},
    {"dict.update", "{% set d = {} %}{{ d.update({'a': 1}) }}", "", "SecurityError"},
    {"dict.pop", "{{ d.pop('a') }}", "{\"d\": {\"a\": 1}}", "SecurityError"},
// ---- other
    {"unpacking too many values", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", "", "ValueError"},
    {"assigning to a non-namespace", "{% set x = 1 %}{% set x.a = 2 %}", "", "TemplateRuntimeError"},
    {"division by zero", "{{ 1 / 0 }}", "", "ZeroDivisionError"},
    {"unknown filter inside an if runs late", "{% if true %}{{ x | from_json }}{% endif %}", "", "TemplateRuntimeError"},
    {"range beyond the sandbox limit", "{{ range(100001) | list }}", "", "OverflowError"},
    {"index of a missing element", "{{ [1].index(2) }}", "", "ValueError"},
  };
  for (const auto& c : cases) {
    INFO(c.name << "\n  template: " << c.source);
    auto r = render(c.source, c.context);
    REQUIRE_FALSE(r.ok());
    INFO("message: " << r.err().message);
    CHECK(r.err().message.find(std::string(c.expected) + ":") != std::string::npos);
    CHECK(r.err().message.rfind("chat template line ", 0) == 0);
  }
}

TEST_CASE("templates that jinja2 refuses to compile do not compile", "[template]") {
  const std::vector<render_case> cases = {
    {"unknown filter", "{{ x | from_json }}", "", "TemplateAssertionError"},
    {"unknown test", "{{ x is frobnicated }}", "", "TemplateAssertionError"},
    {"unknown tag", "{% frobnicate %}", "", "TemplateSyntaxError"},
    {"unclosed block", "{% if true %}x", "", "TemplateSyntaxError"},
    {"unclosed comment", "{# x", "", "TemplateSyntaxError"},
    {"unbalanced brackets", "{{ (1 }}", "", "TemplateSyntaxError"},
    {"break outside a loop", "{% break %}", "", "SyntaxError"},
    {"bad assignment target", "{% set 1 = 2 %}", "", "TemplateSyntaxError"},
    {"duplicate macro argument", "{% macro m(a, a) %}{% endmacro %}", "", "SyntaxError"},
    {"non-default argument after default", "{% macro m(a=1, b) %}{% endmacro %}", "", "TemplateSyntaxError"},
    {"repeated keyword argument", "{{ f(a=1, a=2) }}", "", "SyntaxError"},
    {"assigning to loop inside a for", "{% for x in y %}{% set loop = 1 %}{% endfor %}", "", "TemplateAssertionError"},
    {"unhashable constant key in a call", "{{ f({ {}: 1 }) }}", "", "TypeError"},
    {"slice inside a tuple subscript", "{{ x[1, 2:] }}", "", "SyntaxError"},
    {"trailing comma in a for target", "{% for a, in y %}{% endfor %}", "", "TemplateSyntaxError"},
  };
  for (const auto& c : cases) {
    INFO(c.name << "\n  template: " << c.source);
    auto t = chat_template::compile(c.source);
    REQUIRE_FALSE(t.ok());
    CHECK(t.err().code == errc::malformed);
    CHECK(t.err().message.rfind("chat template line ", 0) == 0);
  }
}

TEST_CASE("a ChatML template renders a conversation", "[template]") {
  const std::string source =
      "{%- for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] | trim }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  const char* context =
      R"({"messages": [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi 😀"}],
          "add_generation_prompt": true})";
  CHECK(render_ok(source, context) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi 😀<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("generators from map and select are consumed once", "[template]") {
  CHECK(render_ok("{% set g = [1, 2] | map('string') %}{{ g | list }}{{ g | list }} {{ g is iterable }}") ==
        "['1', '2'][] True");
}

TEST_CASE("raise_exception fails with the template's own message", "[template]") {
  auto r = render("{% if messages | length == 0 %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}",
                  R"({"messages": []})");
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::invalid_argument);
  CHECK(r.err().message == "Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST_CASE("render errors name the template line", "[template]") {
  auto r = render("{% set x = 1 %}\n{% for m in messages %}\n{{ m.role }}: {{ m.content.nope.deeper }}\n{% endfor %}",
                  R"({"messages": [{"role": "u", "content": "hi"}]})");
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::malformed);
  CHECK(r.err().message == "chat template line 3: UndefinedError: 'str object' has no attribute 'nope'");
  auto c = chat_template::compile("ok\n{% if x %}\n{{ y | nosuch }}\n{% endif %}\n{{ z | nosuch2 }}");
  REQUIRE_FALSE(c.ok());
  CHECK(c.err().message == "chat template line 5: No filter named 'nosuch2'.");
}

TEST_CASE("features jinja2 has and spite does not fail as unsupported", "[template]") {
  for (const char* source : {"{{ 'x' | urlize }}", "{{ lipsum() }}", "{{ 'x'.encode() }}", "{% include 'a' %}"}) {
    INFO(source);
    auto r = render(source);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == errc::unsupported);
  }
}

TEST_CASE("render limits are errors, not crashes", "[template]") {
  render_options small = fixed_clock();
  small.max_output_bytes = 1000;
  small.max_loop_iterations = 100;
  small.max_call_depth = 16;
  const auto fails_with_limit = [&](const std::string& source, const render_options& o) {
    INFO(source);
    auto r = render(source, "", o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == errc::out_of_range);
  };
  CHECK(render("{% for i in range(2000) %}x{% endfor %}").ok());
  fails_with_limit("{% for i in range(2000) %}x{% endfor %}", small);
  fails_with_limit("{% for i in range(200) %}{% endfor %}", small);
  fails_with_limit("{% for i in range(50) %}{% for j in range(50) %}{% endfor %}{% endfor %}", small);
  fails_with_limit("{{ 'x' * 2000 }}", small);
  fails_with_limit("{% set ns = namespace(s='x') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", small);
  fails_with_limit("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}", small);
  fails_with_limit("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}", fixed_clock());
  fails_with_limit("{{ 'x' * 100000000 }}", fixed_clock());
  fails_with_limit("{{ [1, 2] * 10000000 }}", fixed_clock());
  fails_with_limit("{{ 9223372036854775807 + 1 }}", fixed_clock());
  fails_with_limit("{{ range(200000) | list }}", fixed_clock());
  CHECK(render("{% for i in range(99) %}{% endfor %}ok", "", small).ok());
}

TEST_CASE("deeply nested input does not exhaust the stack", "[template]") {
  const std::string deep = std::string(5000, '(') + "1" + std::string(5000, ')');
  auto r = chat_template::compile("{{ " + deep + " }}");
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::malformed);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  CHECK_FALSE(chat_template::compile(ifs).ok());
  std::string nots = "{{ " + std::string(10000, ' ') + " }}";
  for (int i = 0; i < 3000; ++i) nots += "{{ not ";
  CHECK_FALSE(chat_template::compile(nots).ok());
}

TEST_CASE("deep recursion at render time is bounded", "[template]") {
  // Without a call-depth limit, a macro whose body nests 60 levels deep recursing forever must
  // stop at the nesting limit (the stack guard), not crash.
  std::string body = "{{ m(n + 1) }}";
  for (int i = 0; i < 60; ++i) body = "{% if true %}" + body + "{% endif %}";
  const std::string source = "{% macro m(n) %}" + body + "{% endmacro %}{{ m(0) }}";
  auto t = chat_template::compile(source);
  if (!t) FAIL(t.err().message);
  render_options o = fixed_clock();
  o.max_call_depth = 1'000'000;
  auto r = t->render(value(value_dict{}), o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::out_of_range);
  CHECK(r.err().message.find("nesting") != std::string::npos);
  // JSON input nested without bound is cut, not recursed into.
  std::string nested_json(100000, '[');
  nested_json += std::string(100000, ']');
  const value v = spite::tokenizer::from_json(nlohmann::ordered_json::parse(nested_json));
  CHECK(v.is_list());
}

TEST_CASE("strftime_now reads the clock of the render options", "[template]") {
  CHECK(render_ok("{{ strftime_now('%Y-%m-%d %H:%M') }}") == "2026-01-15 12:00");
  auto now = render("{{ strftime_now('%Y') }}", "", render_options{});
  REQUIRE(now.ok());
  std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  CHECK(*now == std::to_string(local.tm_year + 1900));
}

TEST_CASE("one compiled template renders from many threads at once", "[template]") {
  const auto t = chat_template::compile(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "{{ loop.index }}:{{ m.role | upper }}={{ m.content | tojson }} {% endfor %}{{ ns.n }}"
      "{% macro twice(x) %}{{ x }}{{ x }}{% endmacro %}{{ twice(messages | map(attribute='role') | join(',')) }}");
  REQUIRE(t.ok());
  std::vector<value> contexts;
  std::vector<std::string> expected;
  for (int i = 0; i < 8; ++i) {
    value_list messages;
    for (int k = 0; k <= i; ++k) {
      value_dict m;
      m.set("role", k % 2 ? "assistant" : "user");
      m.set("content", "turn " + std::to_string(k) + " of thread " + std::to_string(i));
      messages.emplace_back(std::move(m));
    }
    value_dict ctx;
    ctx.set("messages", value(std::move(messages)));
    contexts.emplace_back(std::move(ctx));
    auto r = t->render(contexts.back());
    REQUIRE(r.ok());
    expected.push_back(*r);
  }
  std::vector<int> mismatches(8, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 200; ++round) {
        auto r = t->render(contexts[static_cast<std::size_t>(i)]);
        if (!r || *r != expected[static_cast<std::size_t>(i)]) ++mismatches[static_cast<std::size_t>(i)];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) CHECK(m == 0);
}

TEST_CASE("template values follow Python semantics", "[template]") {
  const value v = spite::tokenizer::from_json(nlohmann::ordered_json::parse(
      R"({"z": 1, "a": [true, null, 2.5, "s"], "big": 18446744073709551615, "neg": -3})"));
  REQUIRE(v.is_dict());
  const auto& d = v.as_dict();
  REQUIRE(d.size() == 4);
  CHECK(d.entries()[0].first == value("z"));
  CHECK(d.entries()[1].first == value("a"));
  CHECK(d.find("a")->as_list()[1].is_none());
  CHECK(d.find("big")->is_float());
  CHECK(d.find("neg")->as_int() == -3);
  CHECK(d.find("missing") == nullptr);
  CHECK(value(1) == value(1.0));
  CHECK(value(true) == value(1));
  CHECK_FALSE(value("1") == value(1));
  CHECK(value() == value());
  CHECK_FALSE(value() == value::none());
  value_dict x, y;
  x.set("a", 1);
  x.set("b", 2);
  y.set("b", 2);
  y.set("a", 1);
  CHECK(value(x) == value(y));
  x.set("a", 3);
  CHECK(x.entries()[0].second == value(3));  // replaced in place, order kept
  value_dict many;
  for (int i = 0; i < 200; ++i) many.set(std::string("k").append(std::to_string(i)), i);
  many.set("k7", -7);
  CHECK(many.size() == 200);
  CHECK(many.find("k7")->as_int() == -7);
  CHECK(many.find("k199")->as_int() == 199);
  CHECK(many.entries()[7].second == value(-7));
}

TEST_CASE("the render context must be a dict", "[template]") {
  auto t = chat_template::compile("x");
  REQUIRE(t.ok());
  auto r = t->render(value(1));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::invalid_argument);
  CHECK(t->render(value()).ok());
}
