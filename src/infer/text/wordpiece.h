#pragma once
// WordPiece's greedy longest-match-first split of one word, as the reference
// does it: the longest prefix in the vocabulary, then the longest "##"
// continuation of the rest, and so on.

#include <cstdint>
#include <string_view>
#include <vector>

#include "infer/text/vocab.h"

namespace ferry::infer::text {

// Appends word's pieces' ids to pieces, and with ends each piece's end in
// word (bytes). Returns false, leaving both as they were, when some rest of
// the word has no continuation in the vocabulary (the caller then gives the
// word one [UNK]). word is valid UTF-8 and not empty.
bool split_word(std::string_view word, const Vocab& vocab, std::vector<std::int32_t>& pieces,
                std::vector<std::size_t>* ends = nullptr);

}  // namespace ferry::infer::text
