// The tokenization algorithms of each vocabulary family, applied to one raw-text fragment.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pretokenize.hpp"
#include "spite/tokenizer/vocab.hpp"

namespace spite::tokenizer {

// SentencePiece BPE: merge the highest-scoring adjacent pair until none forms a token; pieces
// that are not tokens fall back to byte tokens. `text` is already whitespace-escaped.
void spm_tokenize(const vocab& v, std::string_view text, std::vector<token>& out);

// Byte-level BPE: pre-tokenize with the family's expressions, then merge by rank per word.
result<void> bpe_tokenize(const vocab& v, const regex_splitter& splitter, std::string_view text, std::vector<token>& out);

// WordPiece: lower-case, strip accents, split on whitespace and punctuation, then greedy
// longest-match per word (word starts carry the "\u2581" prefix).
void wpm_tokenize(const vocab& v, std::string_view text, std::vector<token>& out);

// Unigram (SentencePiece): normalize with the precompiled map, then Viterbi over the pieces.
class ugm_model;
std::shared_ptr<const ugm_model> build_ugm_model(const vocab& v);
void ugm_tokenize(const vocab& v, const ugm_model& m, std::string_view text, std::vector<token>& out);

// The bytes a token stands for (the reference's token_to_piece with special = true).
std::string compute_piece(const vocab& v, token id);

}  // namespace spite::tokenizer
