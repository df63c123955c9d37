#include "infer/text/wordpiece.h"

#include "infer/text/utf8.h"

namespace ferry::infer::text {

bool split_word(std::string_view word, const Vocab& vocab, std::vector<std::int32_t>& pieces,
                std::vector<std::size_t>* ends) {
  const std::size_t before = pieces.size();
  const std::size_t ends_before = ends != nullptr ? ends->size() : 0;
  std::size_t start = 0;
  while (start < word.size()) {
    const TokenTable& table = start == 0 ? vocab.whole : vocab.continuation;
    std::size_t end = word.size();
    std::int32_t id = -1;
    while (end > start) {
      id = table.find(word.substr(start, end - start));
      if (id >= 0) break;
      // One code point shorter: back over its continuation bytes.
      do {
        --end;
      } while (end > start && !is_utf8_lead(word[end]));
    }
    if (id < 0) {
      pieces.resize(before);
      if (ends != nullptr) ends->resize(ends_before);
      return false;
    }
    pieces.push_back(id);
    if (ends != nullptr) ends->push_back(end);
    start = end;
  }
  return true;
}

}  // namespace ferry::infer::text
