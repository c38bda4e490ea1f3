#include "checkpoint/conversion_sources.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/durable_file.h"
#include "base/status_macros.h"
#include "checkpoint/checklist.h"
#include "checkpoint/llama_layout.h"
#include "checkpoint/pth_reader.h"
#include "checkpoint/shard_format.h"

namespace llama {

namespace fs = std::filesystem;

absl::StatusOr<shard::SourceFile> DescribeSourceFile(const std::string& dir, const std::string& name) {
  struct stat info;
  const std::string path = dir + "/" + name;
  if (::stat(path.c_str(), &info) != 0) {
    return absl::NotFoundError(absl::StrFormat("\"%s\": no such file", path));
  }
  shard::SourceFile record;
  record.set_name(name);
  record.set_size(info.st_size);
  record.set_mtime_ns(static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec);
  return record;
}

std::map<int, std::string> NumberedFiles(const std::string& dir, absl::string_view prefix,
                                         absl::string_view suffix) {
  std::map<int, std::string> files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    int number;
    if (absl::StartsWith(name, prefix) && absl::EndsWith(name, suffix) &&
        name.size() > prefix.size() + suffix.size() &&
        absl::SimpleAtoi(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()), &number) &&
        number >= 0) {
      files.emplace(number, name);
    }
  }
  return files;
}

std::map<int, std::string> ShardFiles(const std::string& dir) {
  std::map<int, std::string> files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    std::vector<std::string> parts = absl::StrSplit(name, absl::ByAnyChar("-."));
    int rank, world_size;
    if (parts.size() == 5 && parts[0] == "rank" && parts[2] == "of" && parts[4] == "shard" &&
        absl::SimpleAtoi(parts[1], &rank) && absl::SimpleAtoi(parts[3], &world_size) &&
        name == ShardFileName(rank, world_size)) {
      files.emplace(rank, name);
    }
  }
  return files;
}

namespace {

// Meta's consolidated.00.pth ... consolidated.NN.pth; a gap is an error.
absl::StatusOr<std::vector<std::string>> MetaShardNames(const std::string& dir,
                                                        const std::map<int, std::string>& found) {
  std::vector<std::string> names;
  for (int i = 0; i <= found.rbegin()->first; ++i) {
    const std::string name = absl::StrFormat("consolidated.%02d.pth", i);
    if (found.count(i) == 0) {
      return absl::NotFoundError(absl::StrFormat("%s/%s is missing (found up to %s)", dir, name,
                                                 found.rbegin()->second));
    }
    names.push_back(name);
  }
  return names;
}

}  // namespace

absl::Status CheckPart(const std::string& file, absl::string_view name, const std::vector<int64_t>& shape,
                       DType dtype, const std::vector<int64_t>& expected, const std::string& why) {
  if (shape != expected) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: tensor \"%s\" has shape [%s]; expected [%s] (%s)",
                                                      file, name, absl::StrJoin(shape, ", "),
                                                      absl::StrJoin(expected, ", "), why));
  }
  if (IsBlockDType(dtype)) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: tensor \"%s\" is %s; block-quantized (int8, q4_k) shards are not resharded or converted again: "
        "convert the original checkpoint with --dtype=int8 (or the GGUF file) instead",
        file, name, dtype == DType::kQ8_0 ? "int8 (q8_0)" : DTypeName(dtype)));
  }
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: tensor \"%s\" is %s; expected a float type", file, name, DTypeName(dtype)));
  }
  return absl::OkStatus();
}

namespace {

// Sources must agree on each tensor's dtype and on replicated values.
absl::Status CheckAgreement(const TensorSpec& spec, const std::vector<SourcePart>& parts,
                            const std::vector<std::string>& files) {
  for (size_t s = 1; s < parts.size(); ++s) {
    if (parts[s].dtype != parts[0].dtype) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "shards disagree on tensor \"%s\": %s in %s, %s in %s", spec.name, DTypeName(parts[0].dtype),
          files[0], DTypeName(parts[s].dtype), files[s]));
    }
    if (spec.split == SplitKind::kReplicated &&
        !std::equal(parts[s].bytes.begin(), parts[s].bytes.end(), parts[0].bytes.begin(), parts[0].bytes.end())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "shards disagree on replicated tensor \"%s\" (%s vs %s)", spec.name, files[0], files[s]));
    }
  }
  return absl::OkStatus();
}

// Meta's checklist.chk gives each file's MD5 for free; keep it for whoever
// imports the shards later (verifying it is --verify_checklist's job).
void AddChecklistMd5(const std::string& dir, std::vector<shard::SourceFile>& records) {
  std::ifstream checklist(dir + "/checklist.chk");
  if (!checklist) return;
  std::stringstream text;
  text << checklist.rdbuf();
  absl::StatusOr<std::vector<ChecklistEntry>> entries = ParseChecklist(text.str(), dir + "/checklist.chk");
  if (!entries.ok()) return;
  for (shard::SourceFile& record : records) {
    for (const ChecklistEntry& entry : *entries) {
      if (entry.file == record.name()) record.set_md5(entry.md5);
    }
  }
}

// Resolves the vocabulary size Meta leaves out (-1) from the embedding,
// and checks that the shards present are all the checkpoint was split into
// and that they split the model.
absl::Status CheckMetaSplit(const std::string& dir, SourceSet& set) {
  const TensorFile& first = *set.files[0];
  const int m = set.files.size();
  const FileTensor* embedding = first.Find("tok_embeddings.weight");
  if (embedding == nullptr || embedding->shape.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: missing tensor \"tok_embeddings.weight\"", first.path()));
  }
  if (set.config.vocab_size == -1) set.config.vocab_size = embedding->shape[0];
  // A shard's wq rows tell how many ways the checkpoint was split.
  const FileTensor* wq = first.Find("layers.0.attention.wq.weight");
  const int64_t q_rows = set.config.n_heads * set.config.head_dim();
  if (wq != nullptr && wq->shape.size() == 2 && wq->shape[0] > 0 && q_rows / wq->shape[0] > m) {
    return absl::NotFoundError(absl::StrFormat(
        "%s: the checkpoint was split %d ways (its tensor shapes say so) but only %d shard(s) are present; "
        "consolidated.%02d.pth is missing",
        dir, q_rows / wq->shape[0], m, m));
  }
  if (absl::Status s = CheckWorldSize(set.config, m); !s.ok() || set.config.n_kv_heads % m != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d source shards do not split this model (%s)", dir, m,
        s.ok() ? "n_kv_heads not divisible" : std::string(s.message())));
  }
  return absl::OkStatus();
}

// Each tensor's parts, one per shard, after checking that the shards hold
// nothing else (but rope.freqs).
absl::Status GatherMetaParts(const std::string& params_path, SourceSet& set) {
  const int m = set.files.size();
  const std::vector<TensorSpec> specs = LlamaTensors(set.config);
  absl::flat_hash_set<std::string> expected;
  for (const TensorSpec& spec : specs) expected.insert(spec.name);
  for (const std::unique_ptr<TensorFile>& file : set.files) {
    for (const FileTensor& t : file->tensors()) {
      if (!expected.contains(t.name) && t.name != kRopeFreqsName) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: unexpected tensor \"%s\" (not part of the model %s describes)", file->path(), t.name, params_path));
      }
    }
  }
  std::vector<std::string> paths;
  for (const std::unique_ptr<TensorFile>& file : set.files) paths.push_back(file->path());
  for (const TensorSpec& spec : specs) {
    std::vector<SourcePart> parts;
    std::vector<int64_t> shape = spec.shape;
    const int dim = spec.split_dim();
    if (dim >= 0) shape[dim] /= m;
    for (int s = 0; s < m; ++s) {
      const FileTensor* t = set.files[s]->Find(spec.name);
      if (t == nullptr) {
        return absl::InvalidArgumentError(absl::StrFormat("%s: missing tensor \"%s\"", paths[s], spec.name));
      }
      RETURN_IF_ERROR(CheckPart(paths[s], spec.name, t->shape, t->dtype, shape,
                                absl::StrFormat("%s split %d ways", params_path, m)));
      const int64_t extent = dim >= 0 ? shape[dim] : 0;
      parts.push_back({t->bytes, t->dtype, t->shape, s * extent, (s + 1) * extent, {}});
    }
    RETURN_IF_ERROR(CheckAgreement(spec, parts, paths));
    set.parts[spec.name] = std::move(parts);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SourceSet> OpenMetaCheckpoint(const std::string& dir, const std::map<int, std::string>& found) {
  SourceSet set;
  const std::string params_path = dir + "/params.json";
  ASSIGN_OR_RETURN(set.config, ReadParamsJson(params_path));
  ASSIGN_OR_RETURN(const std::vector<std::string> names, MetaShardNames(dir, found));
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(shard::SourceFile record, DescribeSourceFile(dir, name));
    set.records.push_back(std::move(record));
    ASSIGN_OR_RETURN(std::unique_ptr<PthFile> pth, PthFile::Open(dir + "/" + name));
    set.files.push_back(std::move(pth));
  }
  ASSIGN_OR_RETURN(shard::SourceFile params_record, DescribeSourceFile(dir, "params.json"));
  set.records.push_back(std::move(params_record));
  AddChecklistMd5(dir, set.records);
  RETURN_IF_ERROR(CheckMetaSplit(dir, set));
  RETURN_IF_ERROR(GatherMetaParts(params_path, set));
  return set;
}

absl::StatusOr<SourceSet> OpenShardFolder(const std::string& dir, const std::map<int, std::string>& found) {
  SourceSet set;
  std::vector<std::string> paths;
  std::vector<const ShardReader*> shards;  // The files, as shards.
  int world_size = 0;
  for (const auto& [rank, name] : found) {
    paths.push_back(dir + "/" + name);
    ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> reader, ShardReader::Open(paths.back()));
    const shard::ShardIndex& index = reader->index();
    if (world_size == 0) world_size = index.world_size();
    if (index.rank() != rank || index.world_size() != world_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: holds rank %d of %d; expected rank %d of %d", paths.back(), index.rank(), index.world_size(), rank,
          world_size));
    }
    ASSIGN_OR_RETURN(shard::SourceFile record, DescribeSourceFile(dir, name));
    set.records.push_back(std::move(record));
    shards.push_back(reader.get());
    set.files.push_back(std::move(reader));
  }
  if (static_cast<int>(shards.size()) != world_size) {
    for (int r = 0; r < world_size; ++r) {
      if (found.count(r) == 0) {
        return absl::NotFoundError(absl::StrFormat("%s/%s is missing", dir, ShardFileName(r, world_size)));
      }
    }
    return absl::InvalidArgumentError(absl::StrFormat("%s: shards of different world sizes", dir));
  }
  set.config = ModelConfigFromProto(shards[0]->index().config());
  for (size_t s = 1; s < shards.size(); ++s) {
    if (shards[s]->index().config().SerializeAsString() != shards[0]->index().config().SerializeAsString()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s and %s disagree on the model config", paths[0], paths[s]));
    }
  }
  const std::vector<TensorSpec> specs = LlamaTensors(set.config);
  for (size_t s = 0; s < shards.size(); ++s) {
    if (shards[s]->index().tensors_size() != static_cast<int>(specs.size())) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: %d tensors; the model has %d", paths[s],
                                                        shards[s]->index().tensors_size(), specs.size()));
    }
  }
  for (const TensorSpec& spec : specs) {
    std::vector<SourcePart> parts;
    for (int r = 0; r < world_size; ++r) {
      ASSIGN_OR_RETURN(const ShardTensor t, shards[r]->Tensor(spec.name));
      const std::vector<int64_t> shape(t.entry->shape().begin(), t.entry->shape().end());
      RETURN_IF_ERROR(CheckPart(paths[r], spec.name, shape, t.dtype, RankShape(spec, set.config, r, world_size),
                                absl::StrFormat("rank %d of %d", r, world_size)));
      const DimRange range = RankSlice(spec, set.config, r, world_size);
      if (t.entry->split().begin() != range.begin || t.entry->split().end() != range.end) {
        return absl::InvalidArgumentError(absl::StrFormat("%s: tensor \"%s\" holds [%d, %d); expected [%d, %d)",
                                                          paths[r], spec.name, t.entry->split().begin(),
                                                          t.entry->split().end(), range.begin, range.end));
      }
      parts.push_back({t.bytes, t.dtype, shape, range.begin, range.end, {}});
    }
    RETURN_IF_ERROR(CheckAgreement(spec, parts, paths));
    set.parts[spec.name] = std::move(parts);
  }
  return set;
}

}  // namespace llama
