#include "launcher/demo.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/durable_file.h"
#include "base/file_lock.h"
#include "base/status_macros.h"
#include "checkpoint/checklist.h"
#include "checkpoint/llama_layout.h"
#include "checkpoint/pth_writer.h"
#include "launcher/demo_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "worker/model/synthetic_weights.h"

namespace llama {
namespace {

namespace fs = std::filesystem;

// Bump when the demo's contents change, so old caches are rebuilt.
constexpr char kDemoVersion[] = "llama2-cpp demo 1";

// The prompts of the reference's example_text_completion.py.
const char* const kPrompts[] = {
    "I believe the meaning of life is",
    "Simply put, the theory of relativity states that ",
    "A brief message congratulating the team on the launch:\n\n        Hi everyone,\n\n        I just ",
    "Translate English to French:\n\n        sea otter => loutre de mer\n        peppermint => menthe poivrée\n"
    "        plush girafe => girafe peluche\n        cheese =>",
};

std::vector<std::string> Corpus() {
  std::vector<std::string> corpus;
  const char* const kText[] = {
      "The quick brown fox jumps over the lazy dog while the llama watches from the hill.",
      "Llama 2 is a collection of pretrained and fine-tuned generative text models ranging in scale.",
      "Inference runs the transformer one token at a time, keeping keys and values in a cache.",
      "Tensor parallelism splits every layer across devices and sums the partial results.",
      "The theory of relativity states that the laws of physics are the same for all observers.",
      "Hi everyone, I just wanted to congratulate the team on the launch of the new system.",
      "Translate English to French: sea otter, peppermint, plush giraffe, cheese, bread and wine.",
      "Numbers such as 3.14159, 2048, 4096 and 32000 appear in configuration files.",
  };
  for (int round = 0; round < 20; ++round) {
    for (const char* line : kText) corpus.push_back(absl::StrCat(line, " ", round));
  }
  return corpus;
}

absl::Status Build(const std::string& dir) {
  std::error_code error;
  fs::create_directories(dir + "/llama-2-demo", error);
  if (error) return absl::PermissionDeniedError(absl::StrFormat("cannot create \"%s\": %s", dir, error.message()));

  const std::string tokenizer_path = dir + "/tokenizer.model";
  std::string trainer_error;
  if (!internal_demo::TrainTokenizer(Corpus(), 512, tokenizer_path, &trainer_error)) {
    return absl::InternalError(absl::StrCat("training the demo tokenizer failed: ", trainer_error));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::Load(tokenizer_path));

  ModelConfig config;
  config.dim = 256;
  config.n_layers = 4;
  config.n_heads = 8;
  config.n_kv_heads = 4;
  config.multiple_of = 128;
  config.norm_eps = 1e-5;
  config.vocab_size = tokenizer->vocab_size();
  const std::string model_dir = dir + "/llama-2-demo";
  nlohmann::ordered_json params = {{"dim", config.dim},           {"multiple_of", config.multiple_of},
                                   {"n_heads", config.n_heads},   {"n_kv_heads", config.n_kv_heads},
                                   {"n_layers", config.n_layers}, {"norm_eps", config.norm_eps},
                                   {"vocab_size", -1}};
  std::ofstream(model_dir + "/params.json") << params.dump();

  ASSIGN_OR_RETURN(std::unique_ptr<PthWriter> writer,
                   PthWriter::Create(model_dir + "/consolidated.00.pth", "consolidated.00"));
  const std::vector<TensorSpec> specs = LlamaTensors(config);
  ASSIGN_OR_RETURN(const std::vector<Tensor> tensors, SyntheticTensors(config, DType::kBF16, /*seed=*/2023));
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto* bytes = static_cast<const uint8_t*>(tensors[i].raw());
    RETURN_IF_ERROR(writer->Add(specs[i].name, DType::kBF16, specs[i].shape, {bytes, tensors[i].bytes()}));
  }
  // Meta's shards carry the rotary frequencies too (f32, head_dim / 2).
  std::vector<float> freqs(config.head_dim() / 2);
  for (size_t i = 0; i < freqs.size(); ++i) {
    freqs[i] = static_cast<float>(1.0 / std::pow(config.rope_theta, 2.0 * i / config.head_dim()));
  }
  RETURN_IF_ERROR(writer->Add(kRopeFreqsName, DType::kF32, {static_cast<int64_t>(freqs.size())}, {reinterpret_cast<const uint8_t*>(freqs.data()), freqs.size() * sizeof(float)}));
  RETURN_IF_ERROR(writer->Finish());

  std::ofstream checklist(model_dir + "/checklist.chk");
  for (const char* name : {"consolidated.00.pth", "params.json"}) {
    ASSIGN_OR_RETURN(const std::string md5, Md5File(model_dir + "/" + name));
    checklist << md5 << "  " << name << "\n";
  }
  checklist.close();
  std::ofstream(dir + "/prompts.json") << nlohmann::json(std::vector<std::string>(std::begin(kPrompts), std::end(kPrompts))).dump(2);
  std::ofstream(dir + "/VERSION") << kDemoVersion;
  return absl::OkStatus();
}

bool IsCurrent(const std::string& dir) {
  std::ifstream version(dir + "/VERSION");
  std::string existing;
  std::getline(version, existing);
  return existing == kDemoVersion;
}

}  // namespace

absl::StatusOr<DemoCheckpoint> PrepareDemoCheckpoint(const std::string& dir) {
  const DemoCheckpoint demo{dir + "/llama-2-demo", dir + "/tokenizer.model", dir + "/prompts.json"};
  if (IsCurrent(dir)) return demo;
  // Two first runs at once (two shells, or two nodes on a shared $HOME):
  // one makes it, the other waits and takes it.
  std::error_code error;
  fs::create_directories(fs::path(dir).parent_path(), error);
  ASSIGN_OR_RETURN(const FileLock lock, FileLock::Acquire(dir + ".lock", [&](const std::string& holder) {
    std::fprintf(stderr, "launcher: the demo checkpoint %s is being made by %s; waiting for it\n", dir.c_str(),
                 holder.c_str());
  }));
  if (IsCurrent(dir)) return demo;

  const std::string partial = dir + ".partial";
  fs::remove_all(partial, error);
  if (absl::Status s = Build(partial); !s.ok()) {
    fs::remove_all(partial, error);
    return s;
  }
  fs::remove_all(dir, error);  // An outdated demo: ours alone, safe to replace.
  fs::create_directories(fs::path(dir).parent_path(), error);
  RETURN_IF_ERROR(RenameDurably(partial, dir));
  return demo;
}

}  // namespace llama
