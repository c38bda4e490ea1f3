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
#include <set>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "checkpoint/conversion_sources.h"
#include "checkpoint/io/durable_file.h"
#include "checkpoint/llama_layout.h"
#include "ops/status_macros.h"

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
  static const std::pair<const char*, const char*> kTop[] = {
      {"model.embed_tokens.weight", "tok_embeddings.weight"},
      {"model.norm.weight", "norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  static const std::pair<const char*, const char*> kLayer[] = {
      {"self_attn.q_proj.weight", "attention.wq.weight"},
      {"self_attn.k_proj.weight", "attention.wk.weight"},
      {"self_attn.v_proj.weight", "attention.wv.weight"},
      {"self_attn.o_proj.weight", "attention.wo.weight"},
      {"mlp.gate_proj.weight", "feed_forward.w1.weight"},
      {"mlp.down_proj.weight", "feed_forward.w2.weight"},
      {"mlp.up_proj.weight", "feed_forward.w3.weight"},
      {"input_layernorm.weight", "attention_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.rotary_emb.inv_freq", ""},
  };
  for (const auto& [hf, ours] : kTop) {
    if (name == hf) return std::string(ours);
  }
  constexpr absl::string_view kLayers = "model.layers.";
  if (!absl::ConsumePrefix(&name, kLayers)) return std::nullopt;
  const size_t dot = name.find('.');
  int layer;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dot), &layer) || layer < 0) {
    return std::nullopt;
  }
  for (const auto& [hf, ours] : kLayer) {
    if (name.substr(dot + 1) == hf) return *ours ? absl::StrFormat("layers.%d.%s", layer, ours) : "";
  }
  return std::nullopt;
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
  std::string hf_name;
  std::string file;
  DType dtype;
  std::vector<int64_t> shape;
  absl::Span<const uint8_t> bytes;
};

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
  const std::string config_path = dir + "/" + kConfig;
  ASSIGN_OR_RETURN(const HfModelConfig hf, ReadHfConfigJson(config_path));
  set.config = hf.model;
  ASSIGN_OR_RETURN(shard::SourceFile config_record, DescribeSourceFile(dir, kConfig));
  set.records.push_back(config_record);

  std::error_code error;
  const auto exists = [&](const char* name) { return fs::exists(fs::path(dir) / name, error); };
  std::vector<std::string> files;
  const char* index = nullptr;  // The sharded layouts' index file.
  bool safetensors = true;
  if (exists(kSafetensorsIndex)) {
    index = kSafetensorsIndex;
  } else if (exists(kSafetensors)) {
    files = {kSafetensors};
  } else if (exists(kBinIndex)) {
    index = kBinIndex;
    safetensors = false;
  } else {  // IsHuggingFaceFolder found one of the four.
    files = {kBin};
    safetensors = false;
  }
  if (index != nullptr) {
    ASSIGN_OR_RETURN(files, IndexedFiles(dir, index));
    ASSIGN_OR_RETURN(shard::SourceFile record, DescribeSourceFile(dir, index));
    set.records.push_back(record);
  }

  // Every tensor of every file, under our names.
  absl::flat_hash_map<std::string, FoundTensor> found;
  const auto add = [&](const std::string& file, const std::string& hf_name, DType dtype,
                       const std::vector<int64_t>& shape, absl::Span<const uint8_t> bytes) -> absl::Status {
    const std::optional<std::string> name = MetaName(hf_name);
    if (!name.has_value()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s/%s: unexpected tensor \"%s\" (not part of a Llama model)", dir, file, hf_name));
    }
    if (name->empty()) return absl::OkStatus();
    auto [it, inserted] = found.try_emplace(*name, FoundTensor{hf_name, file, dtype, shape, bytes});
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tensor \"%s\" is in both %s and %s", dir, hf_name, it->second.file, file));
    }
    return absl::OkStatus();
  };
  for (const std::string& file : files) {
    ASSIGN_OR_RETURN(shard::SourceFile record, DescribeSourceFile(dir, file));
    set.records.push_back(record);
    const std::string path = dir + "/" + file;
    if (safetensors) {
      ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> opened, SafetensorsFile::Open(path));
      for (const SafetensorsTensor& t : opened->tensors()) RETURN_IF_ERROR(add(file, t.name, t.dtype, t.shape, t.bytes));
      set.safetensors_files.push_back(std::move(opened));
    } else {
      ASSIGN_OR_RETURN(std::unique_ptr<PthFile> opened, PthFile::Open(path));
      for (const PthTensor& t : opened->tensors()) RETURN_IF_ERROR(add(file, t.name, t.dtype, t.shape, t.bytes));
      set.pth_files.push_back(std::move(opened));
    }
  }

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
    const FoundTensor& t = it->second;
    RETURN_IF_ERROR(CheckPart(dir + "/" + t.file, t.hf_name, t.shape, t.dtype, spec.shape, config_path));
    SourcePart part{t.bytes, t.dtype, t.shape, 0, spec.split_dim() >= 0 ? spec.shape[spec.split_dim()] : 0, {}};
    if (absl::EndsWith(spec.name, "attention.wq.weight")) {
      part.row_order = InterleavedFromRotateHalf(set.config.n_heads, head_dim);
    } else if (absl::EndsWith(spec.name, "attention.wk.weight")) {
      part.row_order = InterleavedFromRotateHalf(set.config.n_kv_heads, head_dim);
    }
    set.parts[spec.name].push_back(std::move(part));
    used.insert(it->first);
  }
  for (const auto& [name, t] : found) {
    if (used.contains(name)) continue;
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s/%s: unexpected tensor \"%s\" (config.json describes %d layers)", dir, t.file, t.hf_name,
        set.config.n_layers));
  }
  return set;
}

}  // namespace llama
