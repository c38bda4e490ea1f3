// Small helpers shared by tests that run processes and read their files.

#ifndef LLAMA_TESTS_TEST_UTIL_H_
#define LLAMA_TESTS_TEST_UTIL_H_

#include <fstream>
#include <sstream>
#include <string>

namespace llama::testing {

// The whole file, or "" if it cannot be read.
inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace llama::testing

#endif  // LLAMA_TESTS_TEST_UTIL_H_
