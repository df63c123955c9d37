#pragma once
// A whole file as a string (empty when it cannot be read): the tests' logs and
// captured output.

#include <fstream>
#include <sstream>
#include <string>

namespace ferry::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ferry::test
