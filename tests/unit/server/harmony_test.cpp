// gpt-oss's harmony channels split as they stream: the final channel is content, analysis is
// reasoning, a message to functions.* is held for the tool-call parser, in every chunking.
#include <catch2/catch.hpp>
#include <string>

#include "spite/server/harmony.hpp"
#include "spite/server/tools.hpp"

using namespace spite::server;

namespace {

struct split {
  std::string content, reasoning;
};

split stream(const std::string& text, std::size_t step) {
  harmony_stream h;
  split out;
  for (std::size_t i = 0; i < text.size(); i += step) {
    const auto d = h.feed(std::string_view(text).substr(i, step));
    out.content += d.content;
    out.reasoning += d.reasoning;
  }
  const auto d = h.finish();
  out.content += d.content;
  out.reasoning += d.reasoning;
  CHECK(h.raw() == text);
  return out;
}

const std::string analysis = "<|channel|>analysis<|message|>The user greets; answer <briefly>.<|end|>";
const std::string answer = "<|start|>assistant<|channel|>final<|message|>Hello <there>!";

}  // namespace

TEST_CASE("harmony: the final channel is content and analysis is reasoning, in every chunking") {
  for (const std::size_t step : {1u, 2u, 3u, 5u, 7u, 1000u}) {
    INFO("pieces of " << step);
    const split s = stream(analysis + answer + "<|return|>", step);
    CHECK(s.content == "Hello <there>!");
    CHECK(s.reasoning == "The user greets; answer <briefly>.");
  }
}

TEST_CASE("harmony: content streams before the answer ends, a partial end tag is held") {
  harmony_stream h;
  CHECK(h.feed(analysis).reasoning == "The user greets; answer <briefly>.");
  const auto first = h.feed("<|start|>assistant<|channel|>final<|message|>Hel");
  CHECK(first.content == "Hel");
  const auto second = h.feed("lo<|en");
  CHECK(second.content == "lo");  // "<|en" may begin <|end|>
  const auto third = h.feed("ough");
  CHECK(third.content == "<|enough");
  CHECK(h.finish().content.empty());
}

TEST_CASE("harmony: a tool call message is not content, and the raw text still parses as the call") {
  const std::string call = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                           "{\"city\": \"Paris\"}";
  for (const std::size_t step : {1u, 4u, 1000u}) {
    const split s = stream(analysis + call, step);
    CHECK(s.content.empty());
    CHECK(s.reasoning == "The user greets; answer <briefly>.");
  }
  std::string content;
  const auto calls = parse_tool_calls(tool_format::gpt_oss, analysis + call, content);
  REQUIRE(calls.has_value());
  CHECK((*calls)[0].name == "get_weather");
}

TEST_CASE("harmony: a preamble on the commentary channel is content; text without channels is the answer") {
  const split s = stream("<|channel|>commentary<|message|>Let me look.<|end|>" + answer, 3);
  CHECK(s.content == "Let me look.Hello <there>!");
  const split plain = stream("just text, no channels", 4);
  CHECK(plain.content == "just text, no channels");
  CHECK(plain.reasoning.empty());
  // Cut off inside the reasoning: no answer yet, the reasoning so far.
  const split cut = stream("<|channel|>analysis<|message|>Thinking about", 6);
  CHECK(cut.content.empty());
  CHECK(cut.reasoning == "Thinking about");
}
