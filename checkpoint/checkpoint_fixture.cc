#include "checkpoint/checkpoint_fixture.h"

#include <openssl/evp.h>

#include <fstream>
#include <iterator>

#include <glog/logging.h>

#include "absl/strings/str_format.h"

namespace llama::testing {

std::string CheckpointFixturePath(const std::string& relative) {
  return "tests/fixtures/checkpoint_fixture/" + relative;
}

const nlohmann::json& CheckpointManifest() {
  static const nlohmann::json* manifest = [] {
    std::ifstream file(CheckpointFixturePath("manifest.json"));
    CHECK(file) << "cannot open the checkpoint fixture's manifest.json\nHINT: "
                   "//tests/fixtures:checkpoint_fixture writes it with /usr/bin/python3 and python3-torch";
    return new nlohmann::json(nlohmann::json::parse(file));
  }();
  return *manifest;
}

std::string Sha256Hex(absl::Span<const uint8_t> bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr));
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += absl::StrFormat("%02x", digest[i]);
  return hex;
}

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  CHECK(file) << "cannot open " << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

}  // namespace llama::testing
