// //tools:inspect: what a weight or config file holds, without loading a
// model: a .pth file's (or pytorch_model.bin's) or a safetensors file's
// tensors, a shard's tensors and config, a GGUF file's metadata and
// tensors, or the model a params.json or config.json describes.
//
//   inspect llama-2-7b/consolidated.00.pth
//   inspect --verify llama-2-7b/shards/tp1/rank-0-of-1.shard
//   inspect Llama-2-7b-hf/model-00001-of-00002.safetensors
//   inspect llama-2-7b.Q8_0.gguf
//   inspect llama-2-7b/params.json

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <xxhash.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/model_config.h"
#include "checkpoint/pth_reader.h"
#include "checkpoint/safetensors_reader.h"
#include "checkpoint/shard_format.h"
#include "tools/tool_main.h"

DEFINE_bool(verify, false, "For a shard: recompute every tensor's checksum.");

namespace {

// Array elements a GGUF metadata line shows (a vocabulary has 32000).
constexpr size_t kArrayElementsShown = 8;

template <typename Shape>
std::string ShapeText(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// One line per tensor: name, dtype, shape and the XXH3 of its bytes.
void PrintTensors(const llama::TensorFile& file) {
  std::printf("%-40s %-5s %-16s %s\n", "name", "dtype", "shape", "xxh3_64");
  for (const llama::FileTensor& t : file.tensors()) {
    std::printf("%-40s %-5s %-16s %016llx\n", t.name.c_str(), std::string(llama::DTypeName(t.dtype)).c_str(),
                ShapeText(t.shape).c_str(),
                static_cast<unsigned long long>(XXH3_64bits(t.bytes.data(), t.bytes.size())));
  }
}

void PrintConfig(const llama::ModelConfig& c) {
  std::printf("config: dim=%lld n_layers=%lld n_heads=%lld n_kv_heads=%lld vocab_size=%lld multiple_of=%lld",
              (long long)c.dim, (long long)c.n_layers, (long long)c.n_heads, (long long)c.n_kv_heads,
              (long long)c.vocab_size, (long long)c.multiple_of);
  if (c.ffn_dim_multiplier.has_value()) std::printf(" ffn_dim_multiplier=%g", *c.ffn_dim_multiplier);
  if (c.hidden_dim.has_value()) std::printf(" hidden_dim=%lld", (long long)*c.hidden_dim);
  if (c.rope_scaling.has_value()) {
    std::printf(" rope_scaling={factor=%g low_freq_factor=%g high_freq_factor=%g original_context=%g}",
                c.rope_scaling->factor, c.rope_scaling->low_freq_factor, c.rope_scaling->high_freq_factor,
                c.rope_scaling->original_context);
  }
  std::printf(" norm_eps=%g rope_theta=%g ffn_hidden=%lld", c.norm_eps, c.rope_theta, (long long)c.ffn_hidden_dim());
  if (c.max_seq_len > 0) std::printf(" max_seq_len=%lld", (long long)c.max_seq_len);
  std::printf("\n");
}

absl::Status InspectPth(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<llama::PthFile> pth, llama::PthFile::Open(path));
  std::printf("%s: PyTorch checkpoint, %zu tensors\n", path.c_str(), pth->tensors().size());
  PrintTensors(*pth);
  return absl::OkStatus();
}

absl::Status InspectSafetensors(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<llama::SafetensorsFile> file, llama::SafetensorsFile::Open(path));
  std::printf("%s: safetensors, %zu tensors\n", path.c_str(), file->tensors().size());
  for (const auto& [key, value] : file->metadata()) std::printf("metadata: %s = %s\n", key.c_str(), value.c_str());
  PrintTensors(*file);
  return absl::OkStatus();
}

// A value on one line: long arrays (vocabularies, merges) by their first
// elements and their length.
std::string MetadataText(const nlohmann::json& value) {
  if (!value.is_array() || value.size() <= kArrayElementsShown) return value.dump();
  std::vector<std::string> shown;
  for (size_t i = 0; i < kArrayElementsShown; ++i) shown.push_back(value[i].dump());
  return absl::StrFormat("[%s, ...] (%d elements)", absl::StrJoin(shown, ", "), value.size());
}

absl::Status InspectGguf(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<llama::GgufFile> gguf, llama::GgufFile::Open(path));
  std::printf("%s: GGUF version %u, %zu metadata entries, %zu tensors (data from byte %llu)\n", path.c_str(),
              gguf->version(), gguf->metadata().size(), gguf->tensors().size(),
              static_cast<unsigned long long>(gguf->data_offset()));
  for (const auto& [key, value] : gguf->metadata()) {
    std::printf("%s = %s\n", key.c_str(), MetadataText(value).c_str());
  }
  std::printf("%-40s %-7s %-16s %s\n", "name", "type", "shape", "offset");
  for (const llama::GgufTensorInfo& t : gguf->tensors()) {
    std::printf("%-40s %-7s %-16s %llu\n", t.name.c_str(), llama::GgmlTypeName(t.ggml_type).c_str(),
                ShapeText(t.shape).c_str(), static_cast<unsigned long long>(t.offset));
  }
  return absl::OkStatus();
}

// Meta's params.json, or Hugging Face's config.json (by its name, as the
// converter tells the folders apart), read as the converter reads them.
absl::Status InspectConfigJson(const std::string& path) {
  if (std::filesystem::path(path).filename() == "config.json") {
    ASSIGN_OR_RETURN(const llama::HfModelConfig hf, llama::ReadHfConfigJson(path));
    std::printf("%s: Hugging Face model config%s\n", path.c_str(),
                hf.tie_word_embeddings ? " (tied embeddings: the output projection is the embedding)" : "");
    PrintConfig(hf.model);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const llama::ModelConfig config, llama::ReadParamsJson(path));
  std::printf("%s: Meta's model parameters%s\n", path.c_str(),
              config.vocab_size == -1 ? " (vocab_size -1: the tokenizer's, as the embedding has)" : "");
  PrintConfig(config);
  return absl::OkStatus();
}

absl::Status InspectShard(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<llama::ShardReader> reader, llama::ShardReader::Open(path));
  const llama::shard::ShardIndex& index = reader->index();
  std::printf("%s: shard for rank %d of %d (%s), %d tensors\n", path.c_str(), index.rank(), index.world_size(),
              index.converter_version().c_str(), index.tensors_size());
  PrintConfig(llama::ModelConfigFromProto(index.config()));
  for (const llama::shard::SourceFile& s : index.sources()) {
    std::printf("source: %s (%llu bytes%s%s)\n", s.name().c_str(), (unsigned long long)s.size(),
                s.md5().empty() ? "" : ", md5 ", s.md5().c_str());
  }
  std::printf("%-40s %-5s %-16s %-22s %s\n", "name", "dtype", "shape", "split (dim: range/full)", "xxh3_64");
  for (const llama::shard::TensorEntry& e : index.tensors()) {
    const std::string split = e.split().dim() < 0
                                  ? std::string("replicated")
                                  : absl::StrFormat("%d: [%d, %d) of %d", e.split().dim(), e.split().begin(),
                                                    e.split().end(), e.split().full_extent());
    std::printf("%-40s %-5s %-16s %-22s %016llx\n", e.name().c_str(),
                std::string(llama::DTypeName(static_cast<llama::DType>(e.dtype()))).c_str(),
                ShapeText(e.shape()).c_str(), split.c_str(), static_cast<unsigned long long>(e.xxh3_64()));
  }
  if (FLAGS_verify) {
    RETURN_IF_ERROR(reader->VerifyChecksums());
    std::printf("checksums: all %d tensors OK\n", index.tensors_size());
  }
  return absl::OkStatus();
}

// By the name's ending, as the files are named where they come from.
absl::Status Inspect(const std::string& path) {
  if (absl::EndsWith(path, ".shard")) return InspectShard(path);
  if (absl::EndsWith(path, ".safetensors")) return InspectSafetensors(path);
  if (absl::EndsWith(path, ".gguf")) return InspectGguf(path);
  if (absl::EndsWith(path, ".json")) return InspectConfigJson(path);
  if (absl::EndsWith(path, ".pth") || absl::EndsWith(path, ".bin")) return InspectPth(path);
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: expected a .pth, .bin, .safetensors, .gguf or .shard file, or params.json / config.json", path));
}

}  // namespace

int main(int argc, char** argv) {
  return llama::ToolMain(argc, argv, "inspect",
                         "inspect [--verify] PATH: lists the tensors (and config) of a .pth, .bin, .safetensors, "
                         ".gguf or .shard file, or the model of a params.json or config.json.",
                         [](const std::vector<std::string>& args) {
                           if (args.size() != 1) {
                             return absl::InvalidArgumentError(
                                 "expected one PATH (a .pth, .bin, .safetensors, .gguf or .shard file, or "
                                 "params.json / config.json)");
                           }
                           return Inspect(args[0]);
                         });
}
