#include "infer/text/vocab.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include "ferry/core/status.h"

namespace ferry::infer::text {

namespace {
constexpr std::string_view kContinuation = "##";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read vocabulary " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error("cannot read vocabulary " + path + ": read failed");
  return std::move(text).str();
}

// Rust's str::trim_end: drops trailing Unicode whitespace; vocab files only
// ever carry ASCII whitespace (\r from Windows line ends, stray spaces).
std::string_view trim_end(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\v' || s.back() == '\f')) {
    s.remove_suffix(1);
  }
  return s;
}
}  // namespace

Vocab load_vocab(const std::string& path) {
  const std::string text = read_file(path);
  if (text.empty()) throw Error("vocabulary " + path + " is empty: expected one token a line (vocab.txt)");
  std::size_t lines = 0;
  for (char c : text) lines += c == '\n';
  Vocab v{TokenTable(lines + 1), TokenTable(lines + 1), 0, {}};
  v.tokens.reserve(lines + 1);
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    const std::string_view token = trim_end(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    const auto id = static_cast<std::int32_t>(v.size++);
    v.whole.insert(token, id);
    v.tokens.emplace_back(token);
    if (token.size() > kContinuation.size() && token.substr(0, kContinuation.size()) == kContinuation) {
      v.continuation.insert(token.substr(kContinuation.size()), id);
    }
  }
  return v;
}

}  // namespace ferry::infer::text
