// gpt-oss's "harmony" answers: a run of messages, each
//   <|start|>assistant<|channel|>NAME[ to=RECIPIENT][ <|constrain|>json]<|message|>BODY<|end|>
// (the first one's <|start|>assistant is written by the chat template; the last one may end in
// <|return|> or <|call|>, end-of-generation tokens that never reach the text). The `final`
// channel is the answer, `analysis` the model's reasoning, a `commentary` message without a
// recipient a preamble for the user, and a message to `functions.NAME` a tool call (parsed by
// parse_tool_calls from the raw text). harmony_stream splits the text as it streams.
#pragma once

#include <string>
#include <string_view>

namespace spite::server {

class harmony_stream {
 public:
  struct delta {
    std::string content, reasoning;  // what became final with this piece
  };
  delta feed(std::string_view text);
  // The rest: an unfinished message body goes out; text that never had the harmony layout at
  // all is the answer as it is.
  delta finish();
  const std::string& raw() const noexcept { return raw_; }

 private:
  enum class part { header, content, reasoning, hidden };
  delta parse(bool at_end);
  std::string raw_;
  std::size_t done_ = 0;  // raw_[0, done_) is consumed
  part part_ = part::header;
  bool structured_ = false;  // a message header was seen
};

}  // namespace spite::server
