// Tool-call formats: detection from real chat templates, grammars that force calls (checked by
// matching sample calls), and parsing calls back out of model output, for every family.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "shared_data.hpp"
#include "spite/grammar/grammar.hpp"
#include "spite/server/tools.hpp"

using namespace spite;
using namespace spite::server;
using nlohmann::json;

namespace {

std::string template_source(const std::string& name) {
  std::ifstream in(spite::test::shared_path("golden/chat/templates/" + name));
  REQUIRE(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<tool_spec> weather_tools() {
  auto t = parse_tools(json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "get_time"}}])"));
  REQUIRE(t.ok());
  return *t;
}

// A call as each family writes it.
std::string sample_call(tool_format f) {
  switch (f) {
    case tool_format::hermes: return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    case tool_format::llama3: return "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}";
    case tool_format::mistral: return "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]";
    case tool_format::deepseek:
      return "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```"
             "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    case tool_format::gpt_oss:
      return "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>";
    case tool_format::generic: return "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]}";
  }
  return {};
}

const tool_format all_formats[] = {tool_format::generic, tool_format::hermes, tool_format::llama3,
                                   tool_format::mistral, tool_format::deepseek, tool_format::gpt_oss};

}  // namespace

TEST_CASE("tool formats are detected from the families' chat templates") {
  CHECK(detect_tool_format(template_source("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja")) == tool_format::hermes);
  CHECK(detect_tool_format(template_source("Qwen-Qwen2.5-7B-Instruct.jinja")) == tool_format::hermes);
  CHECK(detect_tool_format(template_source("meta-llama-Llama-3.1-8B-Instruct.jinja")) == tool_format::llama3);
  CHECK(detect_tool_format(template_source("mistralai-Mistral-Nemo-Instruct-2407.jinja")) == tool_format::mistral);
  CHECK(detect_tool_format(template_source("deepseek-ai-DeepSeek-V3.1.jinja")) == tool_format::deepseek);
  CHECK(detect_tool_format(template_source("openai-gpt-oss-120b.jinja")) == tool_format::gpt_oss);
  CHECK(detect_tool_format(template_source("google-gemma-2-2b-it.jinja")) == tool_format::generic);
}

TEST_CASE("a forced-call grammar accepts calls in the family's format and nothing else") {
  const auto tools = weather_tools();
  for (const tool_format f : all_formats) {
    INFO(tool_format_name(f));
    auto gbnf = tool_call_gbnf(f, tools, false);
    REQUIRE(gbnf.ok());
    auto g = grammar::grammar::parse(*gbnf);
    INFO(*gbnf);
    REQUIRE(g.ok());
    // The grammar allows little whitespace inside JSON; the samples use single spaces like it does.
    std::string call = sample_call(f);
    CHECK(grammar::matches(*g, call));
    CHECK_FALSE(grammar::matches(*g, "Sure, here is the weather."));
    // An argument that breaks the schema (days must be an integer) is not a sentence.
    std::string bad = call;
    const auto at = bad.find("\"Paris\"");
    bad.insert(at + 7, ", \"days\": \"two\"");
    CHECK_FALSE(grammar::matches(*g, bad));
    // What the grammar forces parses back into the call.
    std::string content;
    auto calls = parse_tool_calls(f, call, content);
    REQUIRE(calls.has_value());
    REQUIRE(calls->size() == 1);
    CHECK(calls->front().name == "get_weather");
    CHECK(json::parse(calls->front().arguments) == json{{"city", "Paris"}});
  }
}

TEST_CASE("parallel calls are allowed where the format has them") {
  const auto tools = weather_tools();
  auto g = grammar::grammar::parse(*tool_call_gbnf(tool_format::generic, tools, true));
  REQUIRE(g.ok());
  const std::string two = R"({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_time", "arguments": {}}]})";
  CHECK(grammar::matches(*g, two));
  std::string content;
  auto calls = parse_tool_calls(tool_format::generic, two, content);
  REQUIRE(calls.has_value());
  CHECK(calls->size() == 2);
  CHECK(calls->at(1).name == "get_time");
  auto single = grammar::grammar::parse(*tool_call_gbnf(tool_format::generic, tools, false));
  CHECK_FALSE(grammar::matches(*single, two));
}

TEST_CASE("text that is not a call stays content, and content before a call is kept") {
  std::string content;
  CHECK_FALSE(parse_tool_calls(tool_format::generic, "Hello there", content).has_value());
  CHECK_FALSE(parse_tool_calls(tool_format::hermes, "no call here", content).has_value());
  CHECK_FALSE(parse_tool_calls(tool_format::llama3, "{\"name\": \"x\", \"parameters\": {}} and more", content).has_value());
  auto calls = parse_tool_calls(tool_format::hermes, "Let me look.\n" + sample_call(tool_format::hermes), content);
  REQUIRE(calls.has_value());
  CHECK(content == "Let me look.");
}

TEST_CASE("streamed text is held back only while it can still become a call") {
  CHECK(may_become_tool_call(tool_format::hermes, "<tool"));
  CHECK(may_become_tool_call(tool_format::hermes, "  <tool_call>\n{\"na"));
  CHECK_FALSE(may_become_tool_call(tool_format::hermes, "Hello"));
  CHECK(may_become_tool_call(tool_format::generic, "{\"tool"));
  CHECK_FALSE(may_become_tool_call(tool_format::generic, "The answer"));
  CHECK(may_become_tool_call(tool_format::mistral, "[TOOL"));
  CHECK_FALSE(may_become_tool_call(tool_format::mistral, "[Note]"));
}

TEST_CASE("bad tool definitions are refused naming the entry") {
  auto r = parse_tools(json::parse(R"([{"type": "function", "function": {"name": "ok"}}, {"type": "code"}])"));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.err().message, Catch::Contains("tools[1]"));
  auto bad_name = parse_tools(json::parse(R"([{"type": "function", "function": {"name": "rm -rf"}}])"));
  CHECK_FALSE(bad_name.ok());
  auto unsupported = tool_call_gbnf(tool_format::generic,
                                    *parse_tools(json::parse(R"([{"type": "function", "function": {"name": "f",
                                      "parameters": {"type": "object", "patternProperties": {"a": {}}}}}])")),
                                    false);
  REQUIRE_FALSE(unsupported.ok());
  CHECK_THAT(unsupported.err().message, Catch::Contains("function 'f'"));
  CHECK_THAT(unsupported.err().message, Catch::Contains("patternProperties"));
}

TEST_CASE("renaming grammar rules leaves literals and classes alone") {
  const std::string g = "root ::= \"root ::= x\" item [a-z]* # root comment\nitem ::= [^\\]root] | \"\\\"item\"";
  const std::string p = prefix_gbnf_rules(g, "t0-");
  CHECK(p == "t0-root ::= \"root ::= x\" t0-item [a-z]* # root comment\nt0-item ::= [^\\]root] | \"\\\"item\"");
}

namespace {

// Feeds `text` in pieces of `step` bytes; returns the content streamed and what finish() left.
std::pair<std::string, tool_call_stream::rest> stream_through(tool_format f, const std::string& text, std::size_t step) {
  tool_call_stream s(f);
  std::string streamed;
  for (std::size_t i = 0; i < text.size(); i += step) streamed += s.feed(std::string_view(text).substr(i, step));
  return {streamed, s.finish()};
}

}  // namespace

TEST_CASE("a streamed call after some content: the content streams, the call is held and parses") {
  for (const tool_format f : {tool_format::hermes, tool_format::mistral, tool_format::deepseek, tool_format::llama3,
                              tool_format::generic}) {
    // Llama 3 marks a call that does not open the answer with its python tag.
    const std::string call = f == tool_format::llama3 ? "<|python_tag|>" + sample_call(f) : sample_call(f);
    for (const std::size_t step : {1u, 3u, 7u, 1000u}) {
      INFO("format " << static_cast<int>(f) << ", pieces of " << step);
      auto [streamed, rest] = stream_through(f, "Let me check that. " + call, step);
      CHECK(streamed + rest.content == "Let me check that. ");
      std::string content;
      const auto calls = parse_tool_calls(f, rest.call, content);
      REQUIRE(calls.has_value());
      CHECK(content.empty());
      CHECK((*calls)[0].name == "get_weather");
    }
  }
}

TEST_CASE("a streamed answer that only looks like the start of a tag goes out whole as content") {
  auto [streamed, rest] = stream_through(tool_format::hermes, "Use <b>bold</b> or a <tool", 2);
  CHECK(streamed + rest.content == "Use <b>bold</b> or a <tool");
  CHECK(rest.call.empty());
  auto [plain, plain_rest] = stream_through(tool_format::generic, "Hello {not a call}", 4);
  CHECK(plain + plain_rest.content == "Hello {not a call}");
  CHECK(plain_rest.call.empty());
  // A call from the first byte is held from the first byte.
  auto [none, call_rest] = stream_through(tool_format::hermes, sample_call(tool_format::hermes), 5);
  CHECK(none.empty());
  CHECK(call_rest.call == sample_call(tool_format::hermes));
}

TEST_CASE("the generic format finds a calls object after some text, and only a whole one") {
  std::string content;
  auto calls = parse_tool_calls(tool_format::generic, "I will look it up.\n" + sample_call(tool_format::generic), content);
  REQUIRE(calls.has_value());
  CHECK(content == "I will look it up.");
  CHECK((*calls)[0].name == "get_weather");
  CHECK_FALSE(parse_tool_calls(tool_format::generic, "See {\"tool_calls\": [{\"name\": \"get_weather\"", content).has_value());
  CHECK_FALSE(parse_tool_calls(tool_format::generic, sample_call(tool_format::generic) + " and then more", content).has_value());
  CHECK_FALSE(parse_tool_calls(tool_format::generic, "   ", content).has_value());
}

TEST_CASE("gpt-oss: the answer is the final channel, reasoning and call headers are not content") {
  const std::string analysis = "<|channel|>analysis<|message|>The user wants the weather. I should call the tool.<|end|>";
  const std::string final_answer = "<|start|>assistant<|channel|>final<|message|>It is sunny in Paris.<|return|>";
  CHECK(plain_content(tool_format::gpt_oss, analysis + final_answer) == "It is sunny in Paris.");
  CHECK(plain_content(tool_format::gpt_oss, analysis).empty());  // cut off while reasoning: no answer yet
  CHECK(plain_content(tool_format::gpt_oss, "<|channel|>final<|message|>Partial ans") == "Partial ans");
  CHECK(plain_content(tool_format::gpt_oss, "  no markup at all ") == "no markup at all");
  CHECK(plain_content(tool_format::hermes, " <|channel|>final<|message|>x ") == "<|channel|>final<|message|>x");

  std::string content;
  const std::string call = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                           "{\"city\": \"Paris\"}";
  auto calls = parse_tool_calls(tool_format::gpt_oss, analysis + call, content);
  REQUIRE(calls.has_value());
  CHECK(content.empty());
  REQUIRE(calls->size() == 1);
  CHECK((*calls)[0].name == "get_weather");
  CHECK(json::parse((*calls)[0].arguments) == json{{"city", "Paris"}});
  // Streaming holds a harmony answer from its first channel header.
  auto [streamed, rest] = stream_through(tool_format::gpt_oss, analysis + call, 3);
  CHECK(streamed.empty());
  CHECK(rest.call == analysis + call);
}
