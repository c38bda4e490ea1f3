#include "checkpoint/converter.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checklist.h"
#include "checkpoint/file_util.h"
#include "checkpoint/llama_layout.h"
#include "checkpoint/model_config.h"
#include "checkpoint/progress.h"
#include "checkpoint/pth_reader.h"
#include "checkpoint/shard_format.h"
#include "ops/cast.h"
#include "ops/status_macros.h"

namespace llama {
namespace {

namespace fs = std::filesystem;

// Copy granularity: bounds the converter's own memory whatever the model.
constexpr size_t kChunkBytes = 16 << 20;

// One source's piece of a tensor: indices [begin, end) of the split
// dimension of the full tensor (the whole tensor when replicated).
struct SourcePart {
  absl::Span<const uint8_t> bytes;
  DType dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
};

// The checkpoint being converted: Meta's .pth shards or our own shards
// (resharding), reduced to the parts of every tensor.
struct SourceSet {
  ModelConfig config;
  std::vector<shard::SourceFile> records;  // For the up-to-date check.
  std::vector<std::unique_ptr<PthFile>> pth_files;
  std::vector<std::unique_ptr<ShardReader>> shards;
  absl::flat_hash_map<std::string, std::vector<SourcePart>> parts;
};

absl::StatusOr<shard::SourceFile> Describe(const std::string& dir, const std::string& name) {
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

// Names in `dir` of the form <prefix><number><suffix>, by number.
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

// Our rank-R-of-N.shard files, by R.
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

absl::Status CheckPart(const std::string& file, const TensorSpec& spec, const std::vector<int64_t>& shape,
                       DType dtype, const std::vector<int64_t>& expected, const std::string& why) {
  if (shape != expected) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: tensor \"%s\" has shape [%s]; expected [%s] (%s)",
                                                      file, spec.name, absl::StrJoin(shape, ", "),
                                                      absl::StrJoin(expected, ", "), why));
  }
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: tensor \"%s\" is %s; expected a float type", file, spec.name, DTypeName(dtype)));
  }
  return absl::OkStatus();
}

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

absl::StatusOr<SourceSet> OpenMetaCheckpoint(const std::string& dir, const std::map<int, std::string>& found) {
  SourceSet set;
  const std::string params_path = dir + "/params.json";
  absl::StatusOr<ModelConfig> config = ReadParamsJson(params_path);
  if (!config.ok()) return config.status();
  set.config = *config;
  absl::StatusOr<std::vector<std::string>> names = MetaShardNames(dir, found);
  if (!names.ok()) return names.status();
  std::vector<std::string> paths;
  for (const std::string& name : *names) {
    absl::StatusOr<shard::SourceFile> record = Describe(dir, name);
    if (!record.ok()) return record.status();
    set.records.push_back(*record);
    paths.push_back(dir + "/" + name);
    absl::StatusOr<std::unique_ptr<PthFile>> pth = PthFile::Open(paths.back());
    if (!pth.ok()) return pth.status();
    set.pth_files.push_back(*std::move(pth));
  }
  absl::StatusOr<shard::SourceFile> params_record = Describe(dir, "params.json");
  if (!params_record.ok()) return params_record.status();
  set.records.push_back(*params_record);
  // Meta's checklist.chk gives each file's MD5 for free; keep it for whoever
  // imports the shards later (verifying it is --verify_checklist's job).
  if (std::ifstream checklist(dir + "/checklist.chk"); checklist) {
    std::stringstream text;
    text << checklist.rdbuf();
    absl::StatusOr<std::vector<ChecklistEntry>> entries = ParseChecklist(text.str(), dir + "/checklist.chk");
    if (entries.ok()) {
      for (shard::SourceFile& record : set.records) {
        for (const ChecklistEntry& entry : *entries) {
          if (entry.file == record.name()) record.set_md5(entry.md5);
        }
      }
    }
  }
  const int m = set.pth_files.size();

  // Meta ships vocab_size -1; the embedding says how many rows there are.
  const PthTensor* embedding = set.pth_files[0]->Find("tok_embeddings.weight");
  if (embedding == nullptr || embedding->shape.size() != 2) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: missing tensor \"tok_embeddings.weight\"", paths[0]));
  }
  if (set.config.vocab_size == -1) set.config.vocab_size = embedding->shape[0];
  // A shard's wq rows tell how many ways the checkpoint was split.
  const PthTensor* wq = set.pth_files[0]->Find("layers.0.attention.wq.weight");
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

  const std::vector<TensorSpec> specs = LlamaTensors(set.config);
  absl::flat_hash_set<std::string> expected;
  for (const TensorSpec& spec : specs) expected.insert(spec.name);
  for (int s = 0; s < m; ++s) {
    for (const PthTensor& t : set.pth_files[s]->tensors()) {
      if (!expected.contains(t.name) && t.name != kRopeFreqsName) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: unexpected tensor \"%s\" (not part of the model %s describes)", paths[s], t.name, params_path));
      }
    }
  }
  for (const TensorSpec& spec : specs) {
    std::vector<SourcePart> parts;
    std::vector<int64_t> shape = spec.shape;
    const int dim = spec.split_dim();
    if (dim >= 0) shape[dim] /= m;
    for (int s = 0; s < m; ++s) {
      const PthTensor* t = set.pth_files[s]->Find(spec.name);
      if (t == nullptr) {
        return absl::InvalidArgumentError(absl::StrFormat("%s: missing tensor \"%s\"", paths[s], spec.name));
      }
      RETURN_IF_ERROR(CheckPart(paths[s], spec, t->shape, t->dtype, shape, absl::StrFormat("%s split %d ways", params_path, m)));
      const int64_t extent = dim >= 0 ? shape[dim] : 0;
      parts.push_back({t->bytes, t->dtype, t->shape, s * extent, (s + 1) * extent});
    }
    RETURN_IF_ERROR(CheckAgreement(spec, parts, paths));
    set.parts[spec.name] = std::move(parts);
  }
  return set;
}

absl::StatusOr<SourceSet> OpenShardFolder(const std::string& dir, const std::map<int, std::string>& found) {
  SourceSet set;
  std::vector<std::string> paths;
  int world_size = 0;
  for (const auto& [rank, name] : found) {
    paths.push_back(dir + "/" + name);
    absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(paths.back());
    if (!reader.ok()) return reader.status();
    const shard::ShardIndex& index = (*reader)->index();
    if (world_size == 0) world_size = index.world_size();
    if (index.rank() != rank || index.world_size() != world_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: holds rank %d of %d; expected rank %d of %d", paths.back(), index.rank(), index.world_size(), rank,
          world_size));
    }
    absl::StatusOr<shard::SourceFile> record = Describe(dir, name);
    if (!record.ok()) return record.status();
    set.records.push_back(*record);
    set.shards.push_back(*std::move(reader));
  }
  if (static_cast<int>(set.shards.size()) != world_size) {
    for (int r = 0; r < world_size; ++r) {
      if (found.count(r) == 0) {
        return absl::NotFoundError(absl::StrFormat("%s/%s is missing", dir, ShardFileName(r, world_size)));
      }
    }
    return absl::InvalidArgumentError(absl::StrFormat("%s: shards of different world sizes", dir));
  }
  set.config = ModelConfigFromProto(set.shards[0]->index().config());
  for (size_t s = 1; s < set.shards.size(); ++s) {
    if (set.shards[s]->index().config().SerializeAsString() != set.shards[0]->index().config().SerializeAsString()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s and %s disagree on the model config", paths[0], paths[s]));
    }
  }
  const std::vector<TensorSpec> specs = LlamaTensors(set.config);
  for (size_t s = 0; s < set.shards.size(); ++s) {
    if (set.shards[s]->index().tensors_size() != static_cast<int>(specs.size())) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: %d tensors; the model has %d", paths[s],
                                                        set.shards[s]->index().tensors_size(), specs.size()));
    }
  }
  for (const TensorSpec& spec : specs) {
    std::vector<SourcePart> parts;
    for (int r = 0; r < world_size; ++r) {
      absl::StatusOr<ShardTensor> t = set.shards[r]->Tensor(spec.name);
      if (!t.ok()) return t.status();
      const std::vector<int64_t> shape(t->entry->shape().begin(), t->entry->shape().end());
      RETURN_IF_ERROR(CheckPart(paths[r], spec, shape, t->dtype, RankShape(spec, set.config, r, world_size), absl::StrFormat("rank %d of %d", r, world_size)));
      const DimRange range = RankSlice(spec, set.config, r, world_size);
      if (t->entry->split().begin() != range.begin || t->entry->split().end() != range.end) {
        return absl::InvalidArgumentError(absl::StrFormat("%s: tensor \"%s\" holds [%d, %d); expected [%d, %d)",
                                                          paths[r], spec.name, t->entry->split().begin(),
                                                          t->entry->split().end(), range.begin, range.end));
      }
      parts.push_back({t->bytes, t->dtype, shape, range.begin, range.end});
    }
    RETURN_IF_ERROR(CheckAgreement(spec, parts, paths));
    set.parts[spec.name] = std::move(parts);
  }
  return set;
}

// Drops pages of `bytes` (a read-only file mapping) from this process, so
// resident memory does not grow with the checkpoint; the page cache keeps them.
void ReleasePages(absl::Span<const uint8_t> bytes) {
  const uintptr_t page = 4096;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(bytes.data()) + page - 1) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size()) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// The part holding index `at` of the split dimension.
const SourcePart* PartAt(const std::vector<SourcePart>& parts, int64_t at) {
  for (const SourcePart& part : parts) {
    if (part.begin <= at && at < part.end) return &part;
  }
  return nullptr;
}

// Streams one rank's slice of a tensor, gathered from the source parts,
// into a ShardWriter, converting the element type on the way.
class SliceCopier {
 public:
  SliceCopier(ShardWriter* writer, ProgressBar* progress) : writer_(writer), progress_(progress) {}

  absl::Status Copy(const TensorSpec& spec, const std::vector<SourcePart>& parts, DimRange range, DType to) {
    from_ = parts[0].dtype;
    to_ = to;
    const int dim = spec.split_dim();
    const size_t element = DTypeSize(from_);
    if (dim < 0) {
      RETURN_IF_ERROR(Emit(parts[0].bytes));
    }
    // Rows (dim 0) come in contiguous runs per part; columns (dim 1) in a
    // run per part for every row.
    const int64_t rows = dim == 1 ? spec.shape[0] : 1;
    for (int64_t row = 0; dim >= 0 && row < rows; ++row) {
      for (int64_t at = range.begin; at < range.end;) {
        const SourcePart* part = PartAt(parts, at);
        if (part == nullptr) {
          return absl::InternalError(absl::StrFormat("no source holds index %d of dim %d", at, dim));
        }
        const int64_t stop = std::min(range.end, part->end);
        const size_t unit = dim == 0 ? spec.shape[1] * element : element;  // Bytes per index.
        const size_t row_offset = dim == 0 ? 0 : row * (part->end - part->begin) * element;
        RETURN_IF_ERROR(Emit(part->bytes.subspan(row_offset + (at - part->begin) * unit, (stop - at) * unit)));
        at = stop;
      }
    }
    RETURN_IF_ERROR(Flush());
    for (const SourcePart& part : parts) ReleasePages(part.bytes);
    return absl::OkStatus();
  }

 private:
  // Queues source bytes for output (converted to the output dtype).
  absl::Status Emit(absl::Span<const uint8_t> bytes) {
    const size_t in_size = DTypeSize(from_), out_size = DTypeSize(to_);
    while (!bytes.empty()) {
      if (from_ == to_ && buffer_.empty() && bytes.size() >= kChunkBytes) {
        // Large same-type runs go straight from the mapping to the file.
        const size_t n = bytes.size() / kChunkBytes * kChunkBytes;
        RETURN_IF_ERROR(Write(bytes.subspan(0, n)));
        bytes.remove_prefix(n);
        continue;
      }
      const size_t room = (kChunkBytes - buffer_.size()) / out_size;
      const size_t count = std::min(room, bytes.size() / in_size);
      const size_t old = buffer_.size();
      buffer_.resize(old + count * out_size);
      RETURN_IF_ERROR(CastElements(bytes.data(), from_, buffer_.data() + old, to_, count));
      bytes.remove_prefix(count * in_size);
      if (buffer_.size() + out_size > kChunkBytes) {
        RETURN_IF_ERROR(Flush());
      }
    }
    return absl::OkStatus();
  }
  absl::Status Flush() {
    absl::Status status = Write(buffer_);
    buffer_.clear();
    return status;
  }
  absl::Status Write(absl::Span<const uint8_t> bytes) {
    if (bytes.empty()) return absl::OkStatus();
    progress_->Add(bytes.size());
    return writer_->Append(bytes);
  }

  ShardWriter* writer_;
  ProgressBar* progress_;
  DType from_ = DType::kF32, to_ = DType::kF32;
  std::vector<uint8_t> buffer_;
};

// True when `out_dir` holds a complete conversion of these sources with
// these options (see the header).
bool UpToDate(const ConvertOptions& options, const std::vector<shard::SourceFile>& sources) {
  for (int rank = 0; rank < options.world_size; ++rank) {
    absl::StatusOr<std::unique_ptr<ShardReader>> reader =
        ShardReader::Open(options.out_dir + "/" + ShardFileName(rank, options.world_size));
    if (!reader.ok()) return false;
    const shard::ShardIndex& index = (*reader)->index();
    if (index.converter_version() != kConverterVersion || index.world_size() != options.world_size ||
        index.rank() != rank || index.sources_size() != static_cast<int>(sources.size())) {
      return false;
    }
    for (size_t i = 0; i < sources.size(); ++i) {
      const shard::SourceFile& a = index.sources(i);
      if (a.name() != sources[i].name() || a.size() != sources[i].size() ||
          a.mtime_ns() != sources[i].mtime_ns()) {
        return false;
      }
    }
    if (options.dtype.has_value()) {
      for (const shard::TensorEntry& e : index.tensors()) {
        if (e.dtype() != static_cast<int>(*options.dtype)) return false;
      }
    }
  }
  return true;
}

// Removes a folder only if it holds nothing but shard files.
absl::Status RemoveShardFolder(const std::string& dir) {
  std::error_code error;
  if (!fs::exists(dir, error)) return absl::OkStatus();
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "rank-") ||
        !(absl::EndsWith(name, ".shard") || absl::EndsWith(name, ".shard.tmp"))) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "refusing to replace \"%s\": it holds \"%s\", which convert did not write", dir, name));
    }
    files.push_back(entry.path());
  }
  for (const fs::path& file : files) fs::remove(file, error);
  if (!fs::remove(dir, error) || error) {
    return absl::InternalError(absl::StrFormat("cannot remove \"%s\": %s", dir, error.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConvertResult> ConvertCheckpoint(const ConvertOptions& options) {
  if (options.out_dir.empty()) return absl::InvalidArgumentError("--out_dir: expected a folder");
  if (options.dtype.has_value() && *options.dtype != DType::kF32 && *options.dtype != DType::kF16 &&
      *options.dtype != DType::kBF16) {
    return absl::InvalidArgumentError("--dtype: expected bf16, fp16 or fp32");
  }
  std::error_code error;
  if (!fs::is_directory(options.ckpt_dir, error)) {
    return absl::NotFoundError(absl::StrFormat("--ckpt_dir \"%s\": not a directory", options.ckpt_dir));
  }
  if (fs::weakly_canonical(options.ckpt_dir, error) == fs::weakly_canonical(options.out_dir, error)) {
    return absl::InvalidArgumentError("--out_dir must differ from --ckpt_dir");
  }
  const std::map<int, std::string> meta = NumberedFiles(options.ckpt_dir, "consolidated.", ".pth");
  const std::map<int, std::string> ours = ShardFiles(options.ckpt_dir);
  if (meta.empty() && ours.empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "--ckpt_dir \"%s\": no consolidated.NN.pth (Meta's checkpoint) or rank-R-of-N.shard files", options.ckpt_dir));
  }
  const auto verify_checklist = [&]() -> absl::Status {
    const std::string checklist = options.ckpt_dir + "/checklist.chk";
    absl::StatusOr<std::vector<FileCheck>> checks = VerifyChecklist(checklist);
    if (!checks.ok()) return checks.status();
    return ChecklistStatus(checklist, *checks);
  };
  absl::StatusOr<SourceSet> sources =
      meta.empty() ? OpenShardFolder(options.ckpt_dir, ours) : OpenMetaCheckpoint(options.ckpt_dir, meta);
  if (!sources.ok()) {
    // A damaged download is best explained by its checklist.
    if (options.verify_checklist) {
      RETURN_IF_ERROR(verify_checklist());
    }
    return sources.status();
  }
  ConvertResult result;
  result.source_shards = sources->pth_files.size() + sources->shards.size();
  if (UpToDate(options, sources->records)) {
    result.up_to_date = true;
    return result;
  }
  // Checked once, before converting: an up-to-date conversion was checked then.
  if (options.verify_checklist) {
    RETURN_IF_ERROR(verify_checklist());
  }
  const ModelConfig& config = sources->config;
  if (absl::Status s = CheckWorldSize(config, options.world_size); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(options.world_size_flag, ": ", s.message()));
  }
  const std::vector<TensorSpec> specs = LlamaTensors(config);
  const auto out_dtype = [&](const TensorSpec& spec) {
    return options.dtype.value_or(sources->parts[spec.name][0].dtype);
  };
  uint64_t total = 0;
  for (int rank = 0; rank < options.world_size; ++rank) {
    for (const TensorSpec& spec : specs) {
      total += *NumElements(RankShape(spec, config, rank, options.world_size), spec.name) * DTypeSize(out_dtype(spec));
    }
  }

  const std::string staging = options.out_dir + ".partial";
  RETURN_IF_ERROR(RemoveShardFolder(staging));
  fs::create_directories(staging, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrFormat("cannot create \"%s\": %s", staging, error.message()));
  }
  ProgressBar progress(absl::StrFormat("convert %s -> %d shard(s)", options.ckpt_dir, options.world_size), total,
                       options.show_progress ? stderr : nullptr);
  absl::Status status = [&]() -> absl::Status {
    for (int rank = 0; rank < options.world_size; ++rank) {
      absl::StatusOr<std::unique_ptr<ShardWriter>> writer =
          ShardWriter::Create(staging + "/" + ShardFileName(rank, options.world_size));
      if (!writer.ok()) return writer.status();
      SliceCopier copier(writer->get(), &progress);
      for (const TensorSpec& spec : specs) {
        const DimRange range = RankSlice(spec, config, rank, options.world_size);
        shard::TensorSplit split;
        split.set_dim(spec.split_dim());
        split.set_begin(range.begin);
        split.set_end(range.end);
        split.set_full_extent(spec.split_dim() >= 0 ? spec.shape[spec.split_dim()] : range.end);
        absl::Status s = (*writer)->BeginTensor(spec.name, out_dtype(spec),
                                                RankShape(spec, config, rank, options.world_size), split);
        if (s.ok()) s = copier.Copy(spec, sources->parts[spec.name], range, out_dtype(spec));
        if (!s.ok()) return absl::Status(s.code(), absl::StrFormat("tensor \"%s\": %s", spec.name, s.message()));
      }
      shard::ShardIndex index;
      *index.mutable_config() = ModelConfigToProto(config);
      index.set_rank(rank);
      index.set_world_size(options.world_size);
      index.set_rope_layout(shard::ROPE_LAYOUT_INTERLEAVED);
      index.set_converter_version(kConverterVersion);
      for (const shard::SourceFile& record : sources->records) *index.add_sources() = record;
      RETURN_IF_ERROR((*writer)->Finish(std::move(index)));
    }
    RETURN_IF_ERROR(RemoveShardFolder(options.out_dir));
    return RenameDurably(staging, options.out_dir);
  }();
  if (!status.ok()) {
    RemoveShardFolder(staging).IgnoreError();
    return status;
  }
  progress.Finish();
  result.bytes_written = total;
  return result;
}

}  // namespace llama
