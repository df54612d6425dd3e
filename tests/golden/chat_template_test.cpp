// Every case of golden/chat (65 real chat templates x 10 conversations, rendered by Python's
// jinja2 the way transformers sets it up; golden/chat/README.md): an "ok" case must render the
// expected bytes exactly, an "error" case must fail (raise_exception with the template's own
// message). The test prints how many cases pass and lists every failure with its reason.
#include <catch2/catch.hpp>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "shared_data.hpp"
#include "spite/tokenizer/template.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using spite::tokenizer::chat_template;
using spite::tokenizer::render_options;
using spite::tokenizer::value;
using spite::tokenizer::value_dict;

std::string read_text(const fs::path& path) {
  const auto bytes = spite::test::read_file(path);
  return {bytes.begin(), bytes.end()};
}

ordered_json load_ordered(const fs::path& path) { return ordered_json::parse(read_text(path)); }

// The reference clock: strftime_now sees 2026-01-15 12:00:00.
render_options golden_options() {
  render_options o;
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  t.tm_hour = 12;
  o.now = t;
  return o;
}

// What the Python exception type name looks like in spite's message.
std::string expected_kind_marker(const std::string& error_type) {
  return error_type == "TemplateError" ? std::string() : error_type + ":";
}

}  // namespace

TEST_CASE("chat templates render the golden cases exactly as Python jinja2", "[template][golden]") {
  const fs::path dir = spite::test::shared_path("golden/chat");
  const ordered_json index = load_ordered(dir / "index.json");
  const ordered_json conversations = load_ordered(dir / "conversations.json");
  std::map<std::string, const ordered_json*> by_id;
  for (const auto& c : conversations.at("conversations")) by_id[c.at("id").get<std::string>()] = &c;
  const value tools = spite::tokenizer::from_json(conversations.at("tools"));
  const render_options options = golden_options();

  int ok_total = 0, ok_pass = 0, error_total = 0, error_pass = 0, kind_mismatches = 0;
  std::vector<std::string> failures;
  for (const auto& [stem, tpl] : index.at("templates").items()) {
    const std::string source = read_text(dir / tpl.at("template").get<std::string>());
    const auto compiled = chat_template::compile(source);
    for (const auto& c : tpl.at("cases")) {
      const std::string name = stem + " / " + c.at("case").get<std::string>();
      const bool expect_ok = c.at("status") == "ok";
      (expect_ok ? ok_total : error_total)++;
      if (!compiled) {
        failures.push_back(name + ": compile failed: " + compiled.err().message);
        continue;
      }
      value_dict ctx;
      ctx.set("messages", spite::tokenizer::from_json(by_id.at(c.at("conversation").get<std::string>())->at("messages")));
      ctx.set("tools", c.at("tools").get<bool>() ? tools : value::none());
      ctx.set("documents", value::none());
      ctx.set("add_generation_prompt", c.at("add_generation_prompt").get<bool>());
      ctx.set("bos_token", tpl.at("bos_token").get<std::string>());
      ctx.set("eos_token", tpl.at("eos_token").get<std::string>());
      if (c.contains("enable_thinking")) ctx.set("enable_thinking", c.at("enable_thinking").get<bool>());
      const auto out = compiled->render(value(std::move(ctx)), options);
      if (expect_ok) {
        if (!out) {
          failures.push_back(name + ": expected output, got error: " + out.err().message);
          continue;
        }
        const std::string expected = read_text(dir / c.at("expected").get<std::string>());
        if (*out != expected) {
          std::size_t at = 0;
          while (at < out->size() && at < expected.size() && (*out)[at] == expected[at]) ++at;
          failures.push_back(name + ": output differs from byte " + std::to_string(at) + " (expected " +
                             std::to_string(expected.size()) + " bytes, got " + std::to_string(out->size()) + ")");
          continue;
        }
        ++ok_pass;
        continue;
      }
      if (out) {
        failures.push_back(name + ": expected " + c.at("error_type").get<std::string>() + " (" +
                           c.at("error").get<std::string>() + "), got output");
        continue;
      }
      const std::string error_type = c.at("error_type").get<std::string>();
      if (c.at("error_kind") == "raise_exception" && out.err().message != c.at("error").get<std::string>()) {
        failures.push_back(name + ": raise_exception message differs: expected '" + c.at("error").get<std::string>() +
                           "', got '" + out.err().message + "'");
        continue;
      }
      const std::string marker = expected_kind_marker(error_type);
      if (!marker.empty() && out.err().message.find(marker) == std::string::npos) ++kind_mismatches;
      ++error_pass;
    }
  }
  std::printf("golden chat templates: %d/%d rendered cases and %d/%d error cases pass (%d errors of another kind)\n",
              ok_pass, ok_total, error_pass, error_total, kind_mismatches);
  for (const auto& f : failures) std::printf("  FAIL %s\n", f.c_str());
  std::fflush(stdout);
  INFO(ok_pass << "/" << ok_total << " ok cases, " << error_pass << "/" << error_total << " error cases pass");
  CHECK(ok_total + error_total == 1760);
  CHECK(failures.empty());
}
