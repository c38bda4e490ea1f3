#include "checkpoint/converter.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <glog/logging.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/durable_file.h"
#include "base/file_lock.h"
#include "base/progress.h"
#include "base/status_macros.h"
#include "checkpoint/checklist.h"
#include "checkpoint/conversion_output.h"
#include "checkpoint/conversion_sources.h"
#include "checkpoint/gguf_llama.h"
#include "checkpoint/gguf_writer.h"
#include "checkpoint/llama_layout.h"
#include "checkpoint/model_config.h"
#include "checkpoint/output_dtypes.h"
#include "checkpoint/shard_format.h"
#include "checkpoint/slice_copier.h"
#include "checkpoint/tensor_file.h"
#include "ops/cast.h"
#include "tokenizer/tokenizer.h"

namespace llama {
namespace {

// What general.file_type names: the file's 4-bit layers' type where it has
// them (a Q4_K_M file's output is Q6_K, ours int8), else 6-bit, else 8-bit,
// else the output projection's.
DType MainWeightsDType(const std::vector<GgufTensor>& tensors) {
  for (const DType block : {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0}) {
    for (const GgufTensor& t : tensors) {
      if (t.dtype == block) return block;
    }
  }
  return tensors.back().dtype;
}

namespace fs = std::filesystem;

// True when `out_dir` holds a complete conversion of these sources with
// these options (see the header).
bool UpToDate(const ConvertOptions& options, const std::vector<shard::SourceFile>& sources,
              const OutputDType& dtype_of) {
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
    for (const shard::TensorEntry& e : index.tensors()) {
      if (e.dtype() != static_cast<int>(dtype_of(e.name()))) return false;
    }
  }
  return true;
}

// One GGUF file of the whole model (see gguf_llama.h): 1-D tensors (the
// norms) in f32, as llama.cpp's own converters write them, the others in
// the requested or the source type.
absl::StatusOr<ConvertResult> WriteGguf(const ConvertOptions& options, SourceSet& sources,
                                        const OutputDType& out_dtype) {
  if (options.world_size != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s=%d: --format=gguf writes the whole model into one file; expected 1", options.world_size_flag,
        options.world_size));
  }
  if (options.tokenizer_path.empty()) {
    return absl::InvalidArgumentError("--tokenizer_path: required for --format=gguf (the file carries the vocabulary)");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::Load(options.tokenizer_path));
  const ModelConfig& config = sources.config;
  const std::vector<TensorSpec> specs = LlamaTensors(config);
  std::vector<GgufTensor> tensors;
  uint64_t total = 0;
  for (const TensorSpec& spec : specs) {
    ASSIGN_OR_RETURN(std::string name, GgufTensorName(spec.name));
    const DType dtype = spec.shape.size() == 1 ? DType::kF32 : out_dtype(spec.name);
    tensors.push_back({std::move(name), dtype, spec.shape});
    total += TensorBytes(dtype, *NumElements(spec.shape, spec.name));
  }
  const DType weights = MainWeightsDType(tensors);
  // Llama 3.1's scaled RoPE reaches llama.cpp as a tensor of frequency factors.
  const std::vector<float> rope_factors = GgufRopeFactors(config);
  if (!rope_factors.empty()) {
    tensors.push_back({kGgufRopeFactorsName, DType::kF32, {static_cast<int64_t>(rope_factors.size())}});
  }
  const std::string model_name = fs::weakly_canonical(fs::absolute(options.ckpt_dir)).filename().string();
  ASSIGN_OR_RETURN(GgufMetadata metadata, LlamaGgufMetadata(config, *tokenizer, model_name, weights));
  const std::string folder = DirectoryOf(options.out_dir);
  RETURN_IF_ERROR(CheckFreeSpace(folder, folder, total + metadata.bytes().size() + specs.size() * 2 * kGgufAlignment,
                                 "GGUF file"));
  ASSIGN_OR_RETURN(std::unique_ptr<GgufWriter> writer, GgufWriter::Create(options.out_dir, metadata, tensors));
  ProgressBar progress(absl::StrFormat("convert %s -> %s", options.ckpt_dir, options.out_dir), total,
                       options.show_progress ? stderr : nullptr);
  SliceCopier copier([&writer](absl::Span<const uint8_t> bytes) { return writer->Append(bytes); }, &progress);
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    const absl::Status copied =
        copier.Copy(spec, sources.parts[spec.name], RankSlice(spec, config, 0, 1), tensors[i].dtype);
    RETURN_IF_ERROR(Annotate(copied, absl::StrFormat("%s, tensor \"%s\"", options.out_dir, spec.name)));
  }
  if (!rope_factors.empty()) {
    RETURN_IF_ERROR(writer->Append(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(rope_factors.data()),
                                                       rope_factors.size() * sizeof(float))));
  }
  RETURN_IF_ERROR(writer->Finish());
  progress.Finish();
  ConvertResult result;
  result.bytes_written = total;
  result.source_shards = sources.file_count();
  return result;
}

// --ckpt_dir names a GGUF file itself.
bool IsGgufPath(const std::string& path) {
  std::error_code error;
  return absl::EndsWith(path, ".gguf") && fs::is_regular_file(path, error);
}

// Refuses options that cannot work before anything is read.
absl::Status CheckOptions(const ConvertOptions& options) {
  if (options.out_dir.empty()) return absl::InvalidArgumentError("--out_dir: expected a folder");
  if (options.dtype.has_value() && !IsFloat16Or32(*options.dtype) && !IsBlockDType(*options.dtype)) {
    return absl::InvalidArgumentError("--dtype: expected bf16, fp16, fp32, int8 or q4_k");
  }
  std::error_code error;
  if (!fs::is_directory(options.ckpt_dir, error) && !IsGgufPath(options.ckpt_dir)) {
    return absl::NotFoundError(
        absl::StrFormat("--ckpt_dir \"%s\": not a directory (or a .gguf file)", options.ckpt_dir));
  }
  if (fs::weakly_canonical(options.ckpt_dir, error) == fs::weakly_canonical(options.out_dir, error)) {
    return absl::InvalidArgumentError("--out_dir must differ from --ckpt_dir");
  }
  // Before any work: a file there is the user's, never replaced.
  if (const fs::file_status out = fs::status(options.out_dir, error);
      options.format == OutputFormat::kShards && fs::exists(out) && !fs::is_directory(out)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--out_dir \"%s\": a file is there; expected a folder for the shards (or no such path)", options.out_dir));
  }
  return absl::OkStatus();
}

absl::Status VerifyChecklistOf(const ConvertOptions& options) {
  const std::string checklist = options.ckpt_dir + "/checklist.chk";
  ASSIGN_OR_RETURN(const std::vector<FileCheck> checks,
                   VerifyChecklist(checklist, options.show_progress ? stderr : nullptr));
  return ChecklistStatus(checklist, checks);
}

// The checkpoint in --ckpt_dir, whichever of the four kinds it is.
absl::StatusOr<SourceSet> OpenSources(const ConvertOptions& options) {
  if (IsGgufPath(options.ckpt_dir)) return OpenGgufCheckpoint(options.ckpt_dir);
  const std::map<int, std::string> meta = NumberedFiles(options.ckpt_dir, "consolidated.", ".pth");
  const std::map<int, std::string> ours = ShardFiles(options.ckpt_dir);
  const bool hugging_face = meta.empty() && ours.empty() && IsHuggingFaceFolder(options.ckpt_dir);
  if (meta.empty() && ours.empty() && !hugging_face) {
    // A folder of one GGUF file is that file.
    if (const absl::StatusOr<std::string> gguf = FindGgufFile(options.ckpt_dir); gguf.ok()) {
      return OpenGgufCheckpoint(*gguf);
    } else if (absl::IsInvalidArgument(gguf.status())) {
      return Annotate(gguf.status(), "--ckpt_dir");
    }
    return absl::NotFoundError(absl::StrFormat(
        "--ckpt_dir \"%s\": no consolidated.NN.pth (Meta's checkpoint), config.json with model.safetensors or "
        "pytorch_model.bin (Hugging Face's), a .gguf file (llama.cpp's) or rank-R-of-N.shard files",
        options.ckpt_dir));
  }
  absl::StatusOr<SourceSet> sources = hugging_face   ? OpenHuggingFaceCheckpoint(options.ckpt_dir)
                                      : meta.empty() ? OpenShardFolder(options.ckpt_dir, ours)
                                                     : OpenMetaCheckpoint(options.ckpt_dir, meta);
  // A damaged download is best explained by its checklist.
  if (!sources.ok() && options.verify_checklist) {
    RETURN_IF_ERROR(VerifyChecklistOf(options));
  }
  return sources;
}

// Bytes of all the shards, after checking that block-type (int8, q4_k) rows
// split into whole blocks on every rank.
absl::StatusOr<uint64_t> ShardFolderBytes(const ConvertOptions& options, const ModelConfig& config,
                                          const std::vector<TensorSpec>& specs, const OutputDType& out_dtype) {
  uint64_t total = 0;
  for (int rank = 0; rank < options.world_size; ++rank) {
    for (const TensorSpec& spec : specs) {
      const std::vector<int64_t> shape = RankShape(spec, config, rank, options.world_size);
      RETURN_IF_ERROR(CheckWholeBlocks(options.dtype, out_dtype(spec.name), spec.name, shape,
                                       options.world_size));
      total += TensorBytes(out_dtype(spec.name), *NumElements(shape, spec.name));
    }
  }
  return total;
}

// An empty staging folder with room for `total` bytes of shards.
absl::Status CreateStaging(const std::string& staging, const ConvertOptions& options, uint64_t total,
                           size_t tensor_count) {
  RETURN_IF_ERROR(RemoveShardFolder(staging));
  std::error_code error;
  fs::create_directories(staging, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrFormat("cannot create \"%s\": %s", staging, error.message()));
  }
  if (absl::Status s = CheckFreeSpace(staging, DirectoryOf(options.out_dir),
                                      total + options.world_size * (tensor_count + 2) * kShardAlignment, "shards");
      !s.ok()) {
    RemoveShardFolder(staging).IgnoreError();
    return s;
  }
  return absl::OkStatus();
}

shard::TensorSplit SplitRecord(const TensorSpec& spec, DimRange range) {
  shard::TensorSplit split;
  split.set_dim(spec.split_dim());
  split.set_begin(range.begin);
  split.set_end(range.end);
  split.set_full_extent(spec.split_dim() >= 0 ? spec.shape[spec.split_dim()] : range.end);
  return split;
}

shard::ShardIndex ShardIndexOf(const SourceSet& sources, int rank, int world_size) {
  shard::ShardIndex index;
  *index.mutable_config() = ModelConfigToProto(sources.config);
  index.set_rank(rank);
  index.set_world_size(world_size);
  index.set_rope_layout(shard::ROPE_LAYOUT_INTERLEAVED);
  index.set_converter_version(kConverterVersion);
  for (const shard::SourceFile& record : sources.records) *index.add_sources() = record;
  return index;
}

// Rank `rank`'s shard, written into the folder `staging`.
absl::Status WriteShard(const ConvertOptions& options, SourceSet& sources, const std::vector<TensorSpec>& specs,
                        const OutputDType& out_dtype, int rank, const std::string& staging, ProgressBar& progress) {
  const ModelConfig& config = sources.config;
  const std::string name = ShardFileName(rank, options.world_size);
  ASSIGN_OR_RETURN(std::unique_ptr<ShardWriter> writer, ShardWriter::Create(staging + "/" + name));
  SliceCopier copier([&writer](absl::Span<const uint8_t> bytes) { return writer->Append(bytes); }, &progress);
  for (const TensorSpec& spec : specs) {
    const DimRange range = RankSlice(spec, config, rank, options.world_size);
    absl::Status s = writer->BeginTensor(spec.name, out_dtype(spec.name),
                                         RankShape(spec, config, rank, options.world_size), SplitRecord(spec, range));
    if (s.ok()) s = copier.Copy(spec, sources.parts[spec.name], range, out_dtype(spec.name));
    RETURN_IF_ERROR(Annotate(s, absl::StrFormat("%s, tensor \"%s\"", name, spec.name)));
  }
  return writer->Finish(ShardIndexOf(sources, rank, options.world_size));
}

// Every rank's shard, written into "<out_dir>.partial", which then replaces
// out_dir; the bytes written.
absl::StatusOr<uint64_t> WriteShardFolder(const ConvertOptions& options, SourceSet& sources,
                                          const OutputDType& out_dtype) {
  const ModelConfig& config = sources.config;
  if (absl::Status s = CheckWorldSize(config, options.world_size); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(options.world_size_flag, ": ", s.message()));
  }
  const std::vector<TensorSpec> specs = LlamaTensors(config);
  ASSIGN_OR_RETURN(const uint64_t total, ShardFolderBytes(options, config, specs, out_dtype));
  const std::string staging = options.out_dir + ".partial";
  RETURN_IF_ERROR(CreateStaging(staging, options, total, specs.size()));
  ProgressBar progress(absl::StrFormat("convert %s -> %d shard(s)", options.ckpt_dir, options.world_size), total,
                       options.show_progress ? stderr : nullptr);
  absl::Status status;
  for (int rank = 0; rank < options.world_size && status.ok(); ++rank) {
    status = WriteShard(options, sources, specs, out_dtype, rank, staging, progress);
  }
  if (status.ok()) status = RemoveShardFolder(options.out_dir);
  if (status.ok()) status = RenameDurably(staging, options.out_dir);
  if (!status.ok()) {
    RemoveShardFolder(staging).IgnoreError();
    return status;
  }
  progress.Finish();
  return total;
}

}  // namespace

bool ConversionUnderWay(const std::string& out_dir) { return FileLock::IsHeld(ConversionLockPath(out_dir)); }

bool HoldsShardsFor(const std::string& dir, int world_size) {
  const std::map<int, std::string> files = ShardFiles(dir);
  if (world_size < 1 || files.size() != static_cast<size_t>(world_size)) return false;
  for (const auto& [rank, name] : files) {
    if (name != ShardFileName(rank, world_size)) return false;
  }
  return true;
}

absl::StatusOr<ConvertResult> ConvertCheckpoint(const ConvertOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  std::optional<FileLock> lock;
  if (!options.check_only) {
    absl::StatusOr<FileLock> taken = LockConversionOutput(options.out_dir, options.show_progress);
    if (absl::IsUnimplemented(taken.status())) {
      // No locks here: convert unlocked, as before locks were taken.
      LOG(WARNING) << taken.status().message() << "; converting without a lock (run one conversion at a time)";
    } else if (!taken.ok()) {
      // Read-only storage that holds a finished conversion needs no lock.
      ConvertOptions check = options;
      check.check_only = true;
      absl::StatusOr<ConvertResult> done = ConvertCheckpoint(check);
      if (done.ok() && done->up_to_date) return done;
      return taken.status();
    } else {
      lock.emplace(*std::move(taken));
    }
  }
  ASSIGN_OR_RETURN(SourceSet sources, OpenSources(options));
  ConvertResult result;
  result.source_shards = sources.file_count();
  ASSIGN_OR_RETURN(const OutputDType out_dtype, ChooseOutputDTypes(options.dtype, options.world_size, sources));
  if (options.format == OutputFormat::kGguf) return WriteGguf(options, sources, out_dtype);
  if (UpToDate(options, sources.records, out_dtype)) {
    result.up_to_date = true;
    return result;
  }
  if (options.check_only) return result;
  // Checked once, before converting: an up-to-date conversion was checked then.
  if (options.verify_checklist) {
    RETURN_IF_ERROR(VerifyChecklistOf(options));
  }
  ASSIGN_OR_RETURN(result.bytes_written, WriteShardFolder(options, sources, out_dtype));
  return result;
}

absl::StatusOr<ModelConfig> ReadCheckpointConfig(const ConvertOptions& options) {
  // Shards that run as they are (HoldsShardsFor) need not open as a
  // conversion's source, which block types (q4_k, ...) cannot: their index
  // holds the config.
  if (HoldsShardsFor(options.ckpt_dir, options.world_size)) {
    const std::string first = options.ckpt_dir + "/" + ShardFiles(options.ckpt_dir).begin()->second;
    ASSIGN_OR_RETURN(const std::unique_ptr<ShardReader> shard, ShardReader::Open(first));
    return ModelConfigFromProto(shard->index().config());
  }
  ASSIGN_OR_RETURN(const SourceSet sources, OpenSources(options));
  return sources.config;
}

}  // namespace llama
