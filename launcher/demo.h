// The launcher's built-in demo job: a small Llama 2 checkpoint in Meta's
// exact layout, made on the spot with no download, so that the whole
// pipeline (checklist, conversion, workers, collectives, generation) can be
// seen working on a fresh machine. The weights are random (fixed seed):
// the text it generates is meaningless.
//
// Layout under the demo folder, as download.sh leaves a real one:
//   tokenizer.model                     a small BPE SentencePiece model
//   llama-2-demo/consolidated.00.pth    bf16 weights (dim 256, 4 layers, GQA)
//   llama-2-demo/params.json            Meta's fields (vocab_size -1)
//   llama-2-demo/checklist.chk          MD5s, as md5sum writes them
//   prompts.json                        the reference example's prompts

#ifndef LLAMA_LAUNCHER_DEMO_H_
#define LLAMA_LAUNCHER_DEMO_H_

#include <string>

#include "absl/status/statusor.h"

namespace llama {

struct DemoCheckpoint {
  std::string ckpt_dir;
  std::string tokenizer_path;
  std::string prompts_file;
};

// Makes the demo checkpoint under `dir` unless a complete one is there
// (built in "<dir>.partial" and renamed, so an interrupted run leaves
// nothing half-made); runs started together make it once.
absl::StatusOr<DemoCheckpoint> PrepareDemoCheckpoint(const std::string& dir);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_DEMO_H_
