#pragma once
// A WordPiece vocabulary read from vocab.txt: one token a line, the id is the
// line number (from 0), as the reference's WordPiece::read_file reads it.

#include <cstddef>
#include <string>
#include <vector>

#include "infer/text/token_table.h"

namespace ferry::infer::text {

struct Vocab {
  TokenTable whole;         // every line as written: a word's first piece, id_of()
  TokenTable continuation;  // lines starting with "##", keyed without it: a word's later pieces
  std::size_t size = 0;     // lines read
  std::vector<std::string> tokens;  // by id: each line as written, for decoding
};

// Reads path. Trailing whitespace on a line is not part of the token (the
// reference trims it). Throws ferry::Error if the file cannot be read or is empty.
Vocab load_vocab(const std::string& path);

}  // namespace ferry::infer::text
