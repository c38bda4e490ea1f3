// Converts Meta's checkpoint folder (consolidated.NN.pth, params.json,
// checklist.chk), a Hugging Face folder (config.json, safetensors or
// pytorch_model.bin) or our own shards into our shards for any world size
// the model allows, or into one GGUF file.
//
// Sources are merged and re-split as fairscale splits them (llama_layout.h),
// so a 70B checkpoint published as 8 shards converts to 1, 2, 4, 8 or 16;
// KV heads are replicated when ranks outnumber them. The expected tensors
// come from params.json: a missing or unexpected tensor is an error (the
// reference's load_state_dict(strict=False) ignores both).
//
// Streaming: tensors are copied slice by slice from the mapped sources into
// the output, so the extra memory is a small copy buffer, whatever the
// checkpoint's size. Output appears only when complete: shards are written
// into "<out_dir>.partial" and the folder is renamed into place at the end.
// A conversion whose shards record the same sources (names, sizes, mtimes),
// world size and dtype is up to date, and converting again does nothing.
// Conversions into one out_dir take turns (an exclusive lock on
// "<out_dir>.lock", base/file_lock.h): on shared storage a second one waits
// for the first, then finds its result up to date.

#ifndef LLAMA_CHECKPOINT_CONVERTER_H_
#define LLAMA_CHECKPOINT_CONVERTER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/model_config.h"
#include "ops/dtype.h"

namespace llama {

inline constexpr char kConverterVersion[] = "llama2-cpp convert 1";

enum class OutputFormat {
  kShards,  // Our rank-R-of-N.shard files in the folder out_dir.
  kGguf,    // One GGUF file out_dir (world_size 1) for llama.cpp and Ollama.
};

struct ConvertOptions {
  std::string ckpt_dir;
  std::string out_dir;  // A folder of shards, or the GGUF file's path.
  OutputFormat format = OutputFormat::kShards;
  // The SentencePiece model whose vocabulary a GGUF file carries.
  std::string tokenizer_path;
  int world_size = 1;
  // How the caller's user sets world_size, for errors about it (the
  // launcher: "--nproc_per_node=2 x --nnodes=1").
  std::string world_size_flag = "--world_size";
  // Output element type; unset keeps each tensor's source type.
  std::optional<DType> dtype;
  // Check checklist.chk (MD5 of every file) before converting (not when the
  // output is already up to date).
  bool verify_checklist = false;
  // Progress display on stderr.
  bool show_progress = false;
  // Only find out whether out_dir holds an up-to-date conversion (the
  // result's up_to_date), writing nothing: how the other nodes of a job
  // wait for node 0's conversion on shared storage.
  bool check_only = false;
};

struct ConvertResult {
  bool up_to_date = false;  // Nothing was written.
  uint64_t bytes_written = 0;
  int source_shards = 0;
};

absl::StatusOr<ConvertResult> ConvertCheckpoint(const ConvertOptions& options);

// A conversion into `out_dir` is under way (it holds the folder's lock,
// from before it checks checklist.chk until its shards are in place).
bool ConversionUnderWay(const std::string& out_dir);

// `dir` holds our shards for exactly `world_size` ranks (every
// rank-R-of-N.shard with N = world_size, no other N): a job of that size
// runs them as they are rather than converting them into a copy.
bool HoldsShardsFor(const std::string& dir, int world_size);

// The model config a conversion of options.ckpt_dir records, with Meta's
// vocab_size -1 filled in from the embedding's rows. Read from params.json,
// config.json or the shards' index and the tensor headers, no weights: what
// a launcher checks the tokenizer against before converting for minutes.
// A damaged folder is explained as conversion explains it (verify_checklist).
absl::StatusOr<ModelConfig> ReadCheckpointConfig(const ConvertOptions& options);

}  // namespace llama

#endif  // LLAMA_CHECKPOINT_CONVERTER_H_
