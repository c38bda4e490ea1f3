// Test-only access to the checkpoints //tests/fixtures:checkpoint_fixture writes with
// PyTorch, and to its manifest of tensor bytes as PyTorch sees them.

#ifndef LLAMA_CHECKPOINT_CHECKPOINT_FIXTURE_H_
#define LLAMA_CHECKPOINT_CHECKPOINT_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/types/span.h"

namespace llama::testing {

// Runfiles path of a fixture file, e.g. "tiny_fp32_mp1/consolidated.00.pth".
std::string CheckpointFixturePath(const std::string& relative);

// manifest.json: {relative .pth path: {tensor: {"dtype", "shape", "sha256"}}}.
const nlohmann::json& CheckpointManifest();

// Lower-case hex SHA-256 of `bytes`.
std::string Sha256Hex(absl::Span<const uint8_t> bytes);

// The whole file, for tests that corrupt it in memory.
std::vector<uint8_t> ReadFileBytes(const std::string& path);

}  // namespace llama::testing

#endif  // LLAMA_CHECKPOINT_CHECKPOINT_FIXTURE_H_
