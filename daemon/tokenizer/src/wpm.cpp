#include <string>

#include "algorithms.hpp"
#include "unicode.hpp"

namespace spite::tokenizer {
namespace {

bool is_cjk(std::uint32_t cp) {
  // The ranges BERT's basic tokenizer isolates (as its reference implementation spells them).
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Lower-cased, accent-stripped words; punctuation, ASCII symbols and CJK characters stand alone.
std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words(1);
  for (std::uint32_t cp : unicode::decode(text)) {
    cp = unicode::nfd_base(cp);
    const std::uint32_t f = unicode::flags(cp);
    if (unicode::is_whitespace(cp)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == unicode::replacement_char || (f & unicode::control)) continue;
    const std::string s = unicode::to_utf8(unicode::to_lower(cp));
    if ((f & unicode::punctuation) || (cp < 0x7F && (f & unicode::symbol)) || is_cjk(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = s;
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void wpm_tokenize(const vocab& v, std::string_view text, std::vector<token>& out) {
  for (const std::string& w : split_words(text)) {
    const std::string word = "\xe2\x96\x81" + w;  // the word-start marker of the converted vocabulary
    const std::size_t n = word.size();
    const std::size_t mark = out.size();
    for (std::size_t i = 0; i < n;) {
      bool matched = false;
      for (std::size_t j = std::min(n, i + v.max_token_bytes() + 1); j > i; --j) {
        const token t = v.find(std::string_view(word).substr(i, j - i));
        if (t != no_token) {
          out.push_back(t);
          matched = true;
          i = j;
          break;
        }
      }
      if (!matched) {  // the whole word becomes [UNK]
        out.resize(mark);
        break;
      }
    }
    if (out.size() == mark) out.push_back(v.special().unk);
  }
}

}  // namespace spite::tokenizer
