// Hugging Face folders as conversion sources (declared in
// conversion_sources.h).
//
// transformers' convert_llama_weights_to_hf.py renames Meta's tensors and
// reorders each head's query and key rows from interleaved rotary pairs
// (2i, 2i+1) to "rotate half" order (i, i + head_dim/2). We undo the
// reordering while copying (SourcePart::row_order), so a Hugging Face copy
// converts to the same tensors as Meta's original and every kernel keeps
// one rotary layout.

#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "base/durable_file.h"
#include "base/status_macros.h"
#include "checkpoint/conversion_sources.h"
#include "checkpoint/llama_layout.h"
#include "checkpoint/pth_reader.h"
#include "checkpoint/safetensors_reader.h"

namespace llama {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kConfig[] = "config.json";
constexpr char kSafetensors[] = "model.safetensors";
constexpr char kSafetensorsIndex[] = "model.safetensors.index.json";
constexpr char kBin[] = "pytorch_model.bin";
constexpr char kBinIndex[] = "pytorch_model.bin.index.json";

// Our name for a Hugging Face tensor name; "" for tensors the model does
// not use (the rotary inverse frequencies older exports carry, as Meta's
// rope.freqs); nullopt for names that are not part of a Llama model.
std::optional<std::string> MetaName(absl::string_view name) {
  const std::optional<LayerTensorName> in_layer = ParseLayerName(name, TensorNaming::kHuggingFace);
  if (in_layer.has_value() && in_layer->name == kHuggingFaceInverseFrequenciesName) return "";
  return RenameTensor(name, TensorNaming::kHuggingFace, TensorNaming::kMeta);
}

// Meta row of each stored row order: row h*hd + 2i + p (head h, pair i,
// part p) is stored at h*hd + p*hd/2 + i.
std::vector<int64_t> InterleavedFromRotateHalf(int64_t heads, int64_t head_dim) {
  std::vector<int64_t> order(heads * head_dim);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      for (int64_t p = 0; p < 2; ++p) order[h * head_dim + 2 * i + p] = h * head_dim + p * head_dim / 2 + i;
    }
  }
  return order;
}

// The weight files an index names (its weight_map's values), checked to be
// plain names in the folder.
absl::StatusOr<std::vector<std::string>> IndexedFiles(const std::string& dir, const std::string& index_name) {
  const std::string path = dir + "/" + index_name;
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  const json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") ||
      !index["weight_map"].is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: expected a JSON object with a \"weight_map\" object", path));
  }
  std::set<std::string> files;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().empty() || absl::StrContains(file.get<std::string>(), '/') ||
        file.get<std::string>() == "..") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: weight_map[\"%s\"] is %s; expected a file name in the same folder", path, tensor, file.dump()));
    }
    files.insert(file.get<std::string>());
  }
  if (files.empty()) return absl::InvalidArgumentError(absl::StrFormat("%s: weight_map is empty", path));
  return std::vector<std::string>(files.begin(), files.end());
}

// A tensor found in one of the folder's weight files.
struct FoundTensor {
  const FileTensor* tensor;  // Under its Hugging Face name.
  std::string file;
};

// The folder's weight files: one file, or those its index names.
struct WeightFiles {
  std::vector<std::string> names;
  bool safetensors;  // Else pytorch_model*.bin (.pth format).
};

// Finds the folder's layout (IsHuggingFaceFolder found one of the four) and
// records the index it reads.
absl::StatusOr<WeightFiles> FindWeightFiles(const std::string& dir, std::vector<shard::SourceFile>& records) {
  std::error_code error;
  const auto exists = [&](const char* name) { return fs::exists(fs::path(dir) / name, error); };
  WeightFiles files;
  const char* index = nullptr;  // The sharded layouts' index file.
  files.safetensors = true;
  if (exists(kSafetensorsIndex)) {
    index = kSafetensorsIndex;
  } else if (exists(kSafetensors)) {
    files.names = {kSafetensors};
  } else if (exists(kBinIndex)) {
    index = kBinIndex;
    files.safetensors = false;
  } else {
    files.names = {kBin};
    files.safetensors = false;
  }
  if (index != nullptr) {
    ASSIGN_OR_RETURN(files.names, IndexedFiles(dir, index));
    ASSIGN_OR_RETURN(shard::SourceFile record, DescribeSourceFile(dir, index));
    records.push_back(std::move(record));
  }
  return files;
}

absl::StatusOr<std::unique_ptr<TensorFile>> OpenWeightFile(const std::string& path, bool safetensors) {
  if (safetensors) return SafetensorsFile::Open(path);
  return PthFile::Open(path);
}

// Opens and records every weight file; its tensors under our names.
absl::StatusOr<absl::flat_hash_map<std::string, FoundTensor>> OpenWeightFiles(const std::string& dir,
                                                                               const WeightFiles& files,
                                                                               SourceSet& set) {
  absl::flat_hash_map<std::string, FoundTensor> found;
  for (const std::string& file : files.names) {
    ASSIGN_OR_RETURN(shard::SourceFile record, DescribeSourceFile(dir, file));
    set.records.push_back(std::move(record));
    ASSIGN_OR_RETURN(std::unique_ptr<TensorFile> opened, OpenWeightFile(dir + "/" + file, files.safetensors));
    for (const FileTensor& t : opened->tensors()) {
      const std::optional<std::string> name = MetaName(t.name);
      if (!name.has_value()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s/%s: unexpected tensor \"%s\" (not part of a Llama model)", dir, file, t.name));
      }
      if (name->empty()) continue;
      auto [it, inserted] = found.try_emplace(*name, FoundTensor{&t, file});
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: tensor \"%s\" is in both %s and %s", dir, t.name, it->second.file, file));
      }
    }
    set.files.push_back(std::move(opened));
  }
  return found;
}

// Each tensor's one part, its rows put back in Meta's rotary order; every
// tensor found must be used.
absl::Status GatherHfParts(const std::string& dir, const HfModelConfig& hf,
                           const absl::flat_hash_map<std::string, FoundTensor>& found, SourceSet& set) {
  const std::string config_path = dir + "/" + kConfig;
  const int64_t head_dim = set.config.head_dim();
  absl::flat_hash_set<std::string> used;
  for (const TensorSpec& spec : LlamaTensors(set.config)) {
    auto it = found.find(spec.name);
    if (it == found.end() && spec.name == "output.weight" && hf.tie_word_embeddings) {
      it = found.find("tok_embeddings.weight");  // Tied: the embedding is the output projection.
    }
    if (it == found.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: missing the tensor for our \"%s\" (%s)", dir, spec.name,
          spec.name == "output.weight" ? "lm_head.weight; config.json says tie_word_embeddings is false"
                                       : "see the weight files' tensor names"));
    }
    const FileTensor& t = *it->second.tensor;
    RETURN_IF_ERROR(CheckPart(dir + "/" + it->second.file, t.name, t.shape, t.dtype, spec.shape, config_path));
    SourcePart part{t.bytes, t.dtype, t.shape, 0, spec.split_dim() >= 0 ? spec.shape[spec.split_dim()] : 0, {}};
    if (spec.kind->rotary_rows) part.row_order = InterleavedFromRotateHalf(spec.shape[0] / head_dim, head_dim);
    set.parts[spec.name].push_back(std::move(part));
    used.insert(it->first);
  }
  for (const auto& [name, t] : found) {
    if (used.contains(name)) continue;
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s/%s: unexpected tensor \"%s\" (config.json describes %d layers)", dir, t.file, t.tensor->name,
        set.config.n_layers));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsHuggingFaceFolder(const std::string& dir) {
  std::error_code error;
  if (!fs::exists(fs::path(dir) / kConfig, error)) return false;
  for (const char* name : {kSafetensors, kSafetensorsIndex, kBin, kBinIndex}) {
    if (fs::exists(fs::path(dir) / name, error)) return true;
  }
  return false;
}

absl::StatusOr<SourceSet> OpenHuggingFaceCheckpoint(const std::string& dir) {
  SourceSet set;
  ASSIGN_OR_RETURN(const HfModelConfig hf, ReadHfConfigJson(dir + "/" + kConfig));
  set.config = hf.model;
  ASSIGN_OR_RETURN(shard::SourceFile config_record, DescribeSourceFile(dir, kConfig));
  set.records.push_back(std::move(config_record));
  ASSIGN_OR_RETURN(const WeightFiles files, FindWeightFiles(dir, set.records));
  ASSIGN_OR_RETURN(const auto found, OpenWeightFiles(dir, files, set));
  RETURN_IF_ERROR(GatherHfParts(dir, hf, found, set));
  return set;
}

}  // namespace llama
