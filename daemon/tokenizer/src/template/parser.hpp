// Builds the syntax tree from tokens with jinja2's grammar and operator precedence. Unknown filters
// and tests fail here, except inside if statements and conditional expressions, where jinja2 waits
// until they run.
#pragma once

#include <memory>
#include <vector>

#include "spite/core/result.hpp"
#include "template/ast.hpp"
#include "template/lexer.hpp"

namespace spite::tokenizer::template_detail {

result<std::shared_ptr<program>> parse(std::vector<token> tokens);

// Implemented with the filter and test tables.
bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

}  // namespace spite::tokenizer::template_detail
