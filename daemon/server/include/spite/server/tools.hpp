// Tool calls in the format of the model's chat template family: how a model writes a call
// (Llama 3 JSON, Hermes/Qwen <tool_call>, Mistral [TOOL_CALLS], DeepSeek, gpt-oss, or spite's
// generic JSON for templates that know no tools), a grammar that forces calls of the offered tools
// (tool_choice "required" or a named function), and a parser that finds calls in the output.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spite/core/result.hpp"

namespace spite::server {

enum class tool_format { generic, hermes, llama3, mistral, deepseek, gpt_oss };

std::string_view tool_format_name(tool_format f);
// From the chat template's source: the markers it writes around calls.
tool_format detect_tool_format(std::string_view template_source);

struct tool_spec {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON schema; null: any object
};

struct tool_call {
  std::string name;
  std::string arguments;  // JSON text
};

// Reads OpenAI's `tools` (type function, name, parameters); errors name the bad entry.
result<std::vector<tool_spec>> parse_tools(const nlohmann::json& tools);

// GBNF whose sentences are calls of `tools` in `format` (one, or one or more when `parallel`),
// each call's arguments following its schema. A schema feature that cannot be enforced is an
// error naming the tool.
result<std::string> tool_call_gbnf(tool_format format, const std::vector<tool_spec>& tools, bool parallel);

// The calls in `text` if it is (after optional leading content) a tool call in `format`; the
// text before the calls goes to `content`.
std::optional<std::vector<tool_call>> parse_tool_calls(tool_format format, std::string_view text, std::string& content);

// While streaming: could `text` (everything generated so far) still turn into a tool call? Text
// that could is held back instead of being sent as content.
bool may_become_tool_call(tool_format format, std::string_view text);

// The tag that opens the calls of a tagged format (Hermes, Mistral, DeepSeek, Llama 3's python
// tag, the generic format's {"tool_calls"), or empty: while content streams, text from this tag on is held back as a possible call.
std::string_view tool_call_marker(tool_format format);

// One streamed choice with tools: splits the text as it comes into content that can go out now
// and text held back as a possible call: from the start while it may still become one, and,
// after some content, from the format's tag on (so "Let me check. <tool_call>..." streams its
// first sentence and still ends as a call, as it would without streaming).
class tool_call_stream {
 public:
  explicit tool_call_stream(tool_format format) : format_(format) {}
  // Content that is final now (possibly empty).
  std::string feed(std::string_view text);
  // At the end: the content still held, and the possible call (empty when there is none), to
  // be parsed with parse_tool_calls; text that is no call after all goes out as content.
  struct rest {
    std::string content, call;
  };
  rest finish();

 private:
  std::string from_content(std::string_view text);
  tool_format format_;
  std::string call_;      // held as a possible call
  std::string tag_tail_;  // an end of the content that may begin the tag
  bool content_ = false;  // the start was not a call
};

// The answer's text for the user when it holds no call: gpt-oss's harmony messages reduced to
// what its final channel says; other formats' text trimmed.
std::string plain_content(tool_format format, std::string_view text);

// For templates that know no tools: a system message that describes them and the generic format.
std::string generic_tool_prompt(const std::vector<tool_spec>& tools);

// Every rule of a GBNF text renamed with `prefix` (literals, classes and comments untouched), so
// that several grammars can be combined.
std::string prefix_gbnf_rules(std::string_view gbnf, std::string_view prefix);

}  // namespace spite::server
