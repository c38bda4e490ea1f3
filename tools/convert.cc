// //tools:convert: Meta's checkpoint folder -> our shards for N ranks.
//
//   convert --ckpt_dir=llama-2-70b --out_dir=llama-2-70b/shards/tp4 --world_size=4
//   convert --ckpt_dir=llama-2-7b --format=gguf --tokenizer_path=tokenizer.model --out=llama-2-7b.gguf
//
// --ckpt_dir may also be a Hugging Face folder (config.json, safetensors or
// pytorch_model.bin), a GGUF file (its vocabulary goes into --out_dir as
// tokenizer.model), or hold our own shards (rank-R-of-M.shard), to reshard
// them. See checkpoint/converter.h for what is checked and guaranteed.

#include <cstdio>

#include <gflags/gflags.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/progress.h"
#include "base/status_macros.h"
#include "checkpoint/converter.h"
#include "checkpoint/gguf_checkpoint.h"
#include "tokenizer/tokenizer_location.h"
#include "tools/tool_main.h"

DEFINE_string(ckpt_dir, "",
              "Folder with consolidated.NN.pth and params.json, a Hugging Face folder (config.json and "
              "*.safetensors or pytorch_model*.bin), a GGUF file (or a folder holding one), or our shards. Required.");
DEFINE_string(out_dir, "", "Folder to create with rank-R-of-N.shard files (--format=shards).");
DEFINE_string(format, "shards", "shards (ours, for N ranks) or gguf (one file for llama.cpp and Ollama).");
DEFINE_string(out, "", "The GGUF file to write (--format=gguf).");
DEFINE_string(tokenizer_path, "",
              "tokenizer.model (or Llama 3's tokenizer.json) whose vocabulary goes into the GGUF file "
              "(--format=gguf). Default: in --ckpt_dir, next to it or in its original/, else its tokenizer.json.");
DEFINE_int32(world_size, 1, "Number of tensor-parallel ranks (shards) to produce.");
DEFINE_string(weights_dtype, "",
              "Output element type: bf16, fp16, fp32 or int8 (q8_0 linear layers; embeddings and norms as stored), or "
              "q4_k (linear layers quantized to llama.cpp's Q4_K_M mix: Q4_K, and Q6_K for the output projection and some "
              "layers' attention.wv and feed_forward.w2; a GGUF's Q4_K and Q6_K layers as they are). Default: as in the checkpoint. The launcher's flag of the same name.");
DEFINE_string(dtype, "", "The former name of --weights_dtype, still taken.");
DEFINE_bool(verify_checklist, false, "Check checklist.chk (MD5 of every file) before converting.");
DEFINE_bool(progress, true, "Show a progress bar on stderr.");

namespace {

absl::Status Convert() {
  llama::ConvertOptions options;
  if (FLAGS_format == "shards") {
    if (!FLAGS_out.empty()) return absl::InvalidArgumentError("--out: only with --format=gguf; shards go to --out_dir");
    options.out_dir = FLAGS_out_dir;
  } else if (FLAGS_format == "gguf") {
    if (!FLAGS_out_dir.empty()) return absl::InvalidArgumentError("--out_dir: with --format=gguf, name the file with --out");
    options.format = llama::OutputFormat::kGguf;
    options.out_dir = FLAGS_out;
    options.tokenizer_path = FLAGS_tokenizer_path;
    // As the launcher looks; with none found the converter says the flag is needed.
    if (absl::StatusOr<std::string> found = llama::FindTokenizerFile(FLAGS_ckpt_dir);
        options.tokenizer_path.empty() && found.ok()) {
      options.tokenizer_path = *found;
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--format=", FLAGS_format, ": expected shards or gguf"));
  }
  if (FLAGS_ckpt_dir.empty() || options.out_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--ckpt_dir and --", FLAGS_format == "gguf" ? "out" : "out_dir",
                                                   " are required (see --help)"));
  }
  options.ckpt_dir = FLAGS_ckpt_dir;
  options.world_size = FLAGS_world_size;
  options.verify_checklist = FLAGS_verify_checklist;
  options.show_progress = FLAGS_progress;
  if (!FLAGS_dtype.empty() && !FLAGS_weights_dtype.empty() && FLAGS_dtype != FLAGS_weights_dtype) {
    return absl::InvalidArgumentError(absl::StrFormat("--weights_dtype=%s and --dtype=%s: give one (--dtype is its "
                                                      "former name)",
                                                      FLAGS_weights_dtype, FLAGS_dtype));
  }
  if (!FLAGS_weights_dtype.empty()) {
    ASSIGN_OR_RETURN(options.dtype, llama::ParseWeightsDtypeFlag("weights_dtype", FLAGS_weights_dtype));
  } else if (!FLAGS_dtype.empty()) {
    ASSIGN_OR_RETURN(options.dtype, llama::ParseWeightsDtypeFlag("dtype", FLAGS_dtype));
  }
  ASSIGN_OR_RETURN(const llama::ConvertResult result, llama::ConvertCheckpoint(options));
  // A GGUF carries its vocabulary, which the shards do not: written beside
  // them, where the launcher and worker look for it (FindTokenizerFile), so
  // the folder runs on its own.
  const std::optional<std::string> gguf = llama::GgufCheckpointFile(FLAGS_ckpt_dir);
  if (gguf.has_value() && options.format == llama::OutputFormat::kShards) {
    RETURN_IF_ERROR(llama::WriteGgufTokenizer(*gguf, FLAGS_out_dir + "/tokenizer.model"));
  }
  if (result.up_to_date) {
    std::printf("%s is up to date (%d-way shards of %s); nothing to do\n", FLAGS_out_dir.c_str(),
                FLAGS_world_size, FLAGS_ckpt_dir.c_str());
  } else if (options.format == llama::OutputFormat::kGguf) {
    std::printf("wrote %s, %s of tensors\n", FLAGS_out.c_str(), llama::HumanBytes(result.bytes_written).c_str());
  } else {
    std::printf("wrote %d shard(s), %s, to %s%s\n", FLAGS_world_size, llama::HumanBytes(result.bytes_written).c_str(),
                FLAGS_out_dir.c_str(), gguf.has_value() ? ", with the GGUF's tokenizer.model" : "");
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return llama::ToolMain(argc, argv, "convert",
                         "Converts a Llama 2 checkpoint (Meta's or Hugging Face's) into memory-mappable shards for N ranks, or GGUF.",
                         [](const std::vector<std::string>&) { return Convert(); });
}
