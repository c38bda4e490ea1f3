// //worker: one rank of a Llama 2 job.
//
// Reads its place in the job from torchrun's variables (RANK, WORLD_SIZE,
// MASTER_ADDR, ...; none means a single rank), maps its shard, joins its
// peers, and runs text or chat completion; rank 0 prints the results as the
// reference's example scripts do and writes --output as JSON Lines.
//
//   worker --shard_dir=DIR --tokenizer_path=tokenizer.model --prompt="I believe the meaning of life is"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/shard_format.h"
#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/status_macros.h"
#include "tokenizer/prompt_files.h"
#include "tokenizer/tokenizer.h"
#include "worker/dist/environment.h"
#include "worker/generator.h"
#include "worker/model/model_weights.h"
#include "worker/dist/rendezvous.h"
#include "worker/results.h"
#include "worker/dist/tcp_communicator.h"
#include "worker/model/transformer.h"
#include "third_party/cuda/cuda_build_info.h"
#if LLAMA_WITH_CUDA
#include <cuda_runtime.h>

#include "ops/cuda/cuda_status.h"
#include "worker/model/cuda_transformer.h"
#include "worker/dist/nccl_communicator.h"
#endif

DEFINE_string(shard_dir, "", "Folder of rank-R-of-N.shard files from //tools:convert. Required.");
DEFINE_string(tokenizer_path, "", "Llama 2's tokenizer.model. Required.");
DEFINE_string(prompt, "", "One prompt for text completion.");
DEFINE_string(prompts_file, "", "Prompts for text completion: a JSON array of strings, or JSON Lines.");
DEFINE_string(dialogs_file, "", "Dialogs for chat completion: a JSON array of [{role, content}, ...].");
DEFINE_double(temperature, 0.6, "Sampling temperature; 0 is greedy.");
DEFINE_double(top_p, 0.9, "Top-p (nucleus) sampling threshold, in (0, 1].");
DEFINE_int32(max_seq_len, 512, "Longest sequence (prompt + generation) the KV cache holds.");
DEFINE_int32(max_batch_size, 4, "Sequences generated together; larger jobs run in batches of this size.");
DEFINE_string(kv_cache_dtype, "f32",
              "KV cache storage: f32, or bf16/f16 for half the memory (values rounded once when cached; the "
              "reference keeps its cache in the model's 16-bit dtype).");
DEFINE_bool(cuda_graphs, true, "CUDA backend: replay decode steps from captured CUDA graphs (off to compare or debug).");
DEFINE_int32(max_gen_len, -1, "Most tokens to generate per prompt; -1: max_seq_len - 1, as the reference.");
DEFINE_uint64(seed, 1, "Sampling seed (rank 0's is the one that counts).");
DEFINE_bool(logprobs, false, "Report each generated token's log-probability.");
DEFINE_bool(echo, false, "Include the prompt tokens in the output.");
DEFINE_string(output, "", "Write one JSON object per prompt or dialog to this file (JSON Lines).");
DEFINE_string(summary_file, "", "Rank 0 writes the run's numbers here as JSON (ranks, load and generation time, tokens).");
DEFINE_string(device, "", "Compute backend: cpu or cuda. Default: cuda when this binary has the CUDA backend and sees a GPU, else cpu.");
DEFINE_int32(threads, 0, "CPU threads for this rank; 0: one per hardware thread / LOCAL_WORLD_SIZE.");
DEFINE_int32(rendezvous_timeout, 300, "Seconds to wait for every rank to join.");
DEFINE_int32(load_timeout, 1800, "Seconds to wait for every rank to load its shard.");
DEFINE_int32(collective_timeout, 300, "Seconds a collective may wait for a silent (hung) peer.");

namespace llama {
namespace {

struct Job {
  bool chat = false;
  std::vector<std::string> prompts;
  std::vector<Dialog> dialogs;
};

absl::StatusOr<Job> ReadJob() {
  const int sources = !FLAGS_prompt.empty() + !FLAGS_prompts_file.empty() + !FLAGS_dialogs_file.empty();
  if (sources != 1) {
    return absl::InvalidArgumentError("give exactly one of --prompt, --prompts_file, --dialogs_file");
  }
  Job job;
  if (!FLAGS_prompt.empty()) {
    job.prompts = {FLAGS_prompt};
  } else if (!FLAGS_prompts_file.empty()) {
    absl::StatusOr<std::vector<std::string>> prompts = ReadPromptsFile(FLAGS_prompts_file);
    if (!prompts.ok()) return prompts.status();
    job.prompts = *std::move(prompts);
  } else {
    absl::StatusOr<std::vector<Dialog>> dialogs = ReadDialogsFile(FLAGS_dialogs_file);
    if (!dialogs.ok()) return dialogs.status();
    job.chat = true;
    job.dialogs = *std::move(dialogs);
  }
  return job;
}

// The job as JSON, so rank 0 alone needs the input files.
std::string SerializeJob(const Job& job) {
  nlohmann::json j;
  j["chat"] = job.chat;
  j["prompts"] = job.prompts;
  nlohmann::json dialogs = nlohmann::json::array();
  for (const Dialog& dialog : job.dialogs) {
    nlohmann::json messages = nlohmann::json::array();
    for (const Message& m : dialog) messages.push_back({{"role", RoleName(m.role)}, {"content", m.content}});
    dialogs.push_back(messages);
  }
  j["dialogs"] = dialogs;
  return j.dump();
}

absl::StatusOr<Job> DeserializeJob(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return absl::DataLossError("job description from rank 0 does not parse");
  Job job;
  job.chat = j["chat"];
  job.prompts = j["prompts"].get<std::vector<std::string>>();
  if (job.chat) {
    absl::StatusOr<std::vector<Dialog>> dialogs = ParseDialogs(j["dialogs"].dump(), "rank 0's job");
    if (!dialogs.ok()) return dialogs.status();
    job.dialogs = *std::move(dialogs);
  }
  return job;
}

// What every rank must agree on: config and the conversion it came from.
std::string Fingerprint(const ShardReader& shard) {
  shard::ShardIndex identity;
  *identity.mutable_config() = shard.index().config();
  identity.set_world_size(shard.index().world_size());
  *identity.mutable_sources() = shard.index().sources();
  const std::string bytes = identity.SerializeAsString();
  return absl::StrFormat("%016x", XXH3_64bits(bytes.data(), bytes.size()));
}

absl::StatusOr<std::shared_ptr<const ShardReader>> OpenShard(const WorkerEnvironment& env) {
  const std::string path = absl::StrCat(FLAGS_shard_dir, "/", ShardFileName(env.rank, env.world_size));
  if (access(path.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrFormat(
        "no shard for rank %d of %d: %s does not exist. Convert the checkpoint for this world size: bazel run "
        "//tools:convert -- --ckpt_dir=<checkpoint> --out_dir=%s --world_size=%d",
        env.rank, env.world_size, path, FLAGS_shard_dir, env.world_size));
  }
  absl::StatusOr<std::unique_ptr<ShardReader>> shard = ShardReader::Open(path);
  if (!shard.ok()) return shard.status();
  return std::shared_ptr<const ShardReader>(*std::move(shard));
}

// --device, or the best this binary and machine offer.
absl::StatusOr<Device> ChooseDevice() {
  if (!FLAGS_device.empty()) return ParseDevice(FLAGS_device);
#if LLAMA_WITH_CUDA
  absl::StatusOr<int> gpus = cuda::VisibleDeviceCount();
  if (gpus.ok() && *gpus > 0) return Device::kCuda;
#endif
  return Device::kCpu;
}

// The model for the chosen device. On CUDA, collectives go through NCCL
// (kept in *device_communicator); the GPU is LOCAL_RANK's, or the only one
// visible when the launcher gave each rank its own CUDA_VISIBLE_DEVICES.
absl::StatusOr<std::unique_ptr<LanguageModel>> MakeModel(Device device, const WorkerEnvironment& env,
                                                         Rendezvous* rendezvous, Communicator* host_communicator,
                                                         ModelWeights weights, const TransformerOptions& options,
                                                         std::unique_ptr<Communicator>* device_communicator) {
  if (device == Device::kCpu) {
    absl::StatusOr<std::unique_ptr<Transformer>> model =
        Transformer::Create(std::move(weights), host_communicator, options);
    if (!model.ok()) return model.status();
    return std::unique_ptr<LanguageModel>(*std::move(model));
  }
#if LLAMA_WITH_CUDA
  absl::StatusOr<int> gpus = cuda::VisibleDeviceCount();
  if (!gpus.ok()) return gpus.status();
  if (*gpus == 0) return absl::FailedPreconditionError("--device=cuda: no GPU visible to this process");
  const int gpu = *gpus == 1 ? 0 : env.local_rank;
  RETURN_IF_ERROR(cuda::CudaCall(cudaSetDevice(gpu), "cudaSetDevice"));
  NcclCommunicator* nccl = nullptr;
  if (rendezvous != nullptr) {
    absl::StatusOr<std::unique_ptr<NcclCommunicator>> created =
        NcclCommunicator::Create(rendezvous, gpu, std::chrono::seconds(FLAGS_collective_timeout));
    if (!created.ok()) return created.status();
    nccl = created->get();
    *device_communicator = *std::move(created);
  }
  absl::StatusOr<std::unique_ptr<CudaTransformer>> model = CudaTransformer::Create(weights, nccl, options);
  if (!model.ok()) return model.status();
  return std::unique_ptr<LanguageModel>(*std::move(model));
#else
  return absl::FailedPreconditionError("--device=cuda: this binary was built without CUDA");
#endif
}

absl::Status Run() {
  if (FLAGS_shard_dir.empty() || FLAGS_tokenizer_path.empty()) {
    return absl::InvalidArgumentError("--shard_dir and --tokenizer_path are required (see --help)");
  }
  // Checked before minutes of joining and loading.
  const absl::StatusOr<DType> kv_cache_dtype = ParseFloat16Or32Flag("kv_cache_dtype", FLAGS_kv_cache_dtype);
  if (!kv_cache_dtype.ok()) return kv_cache_dtype.status();
  absl::StatusOr<WorkerEnvironment> env = ReadWorkerEnvironment();
  if (!env.ok()) return env.status();
  const bool leader = env->rank == 0;
  if (!leader) FLAGS_minloglevel = google::GLOG_WARNING;  // Other ranks speak only of problems.
  absl::StatusOr<Device> device = ChooseDevice();
  if (!device.ok()) return device.status();
  LOG(INFO) << "rank " << env->rank << ": device " << DeviceName(*device)
            << (FLAGS_device.empty() ? " (chosen: " : " (asked: ")
            << (BuiltWithCuda() ? "this binary has the CUDA backend" : "this binary has no CUDA backend") << ")";

  // Join first: loading can take minutes and has its own deadline.
  std::unique_ptr<Rendezvous> rendezvous;
  if (env->world_size > 1) {
    RendezvousOptions options;
    options.master_addr = env->master_addr;
    options.master_port = env->master_port;
    options.rank = env->rank;
    options.world_size = env->world_size;
    options.token = env->token;
    options.join_timeout = std::chrono::seconds(FLAGS_rendezvous_timeout);
    options.load_timeout = std::chrono::seconds(FLAGS_load_timeout);
    absl::StatusOr<std::unique_ptr<Rendezvous>> joined = Rendezvous::Join(options);
    if (!joined.ok()) return joined.status();
    rendezvous = *std::move(joined);
  }

  absl::StatusOr<Job> job = Job();
  if (leader) {
    job = ReadJob();
    if (!job.ok()) return job.status();
    if (rendezvous) {
      RETURN_IF_ERROR(rendezvous->store().Set("job", SerializeJob(*job)));
    }
  } else {
    absl::StatusOr<std::string> text = rendezvous->store().Get("job", std::chrono::seconds(FLAGS_rendezvous_timeout));
    if (!text.ok()) return text.status();
    job = DeserializeJob(*text);
    if (!job.ok()) return job.status();
  }

  const auto load_start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load(FLAGS_tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::shared_ptr<const ShardReader>> shard = OpenShard(*env);
  if (!shard.ok()) return shard.status();
  const std::string fingerprint = Fingerprint(**shard);
  absl::StatusOr<ModelWeights> weights = LoadModelWeights(*shard);
  if (!weights.ok()) return weights.status();
  if (weights->config.vocab_size != (*tokenizer)->vocab_size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the tokenizer %s has %d tokens but the model's vocabulary is %d; use the checkpoint's own tokenizer",
        FLAGS_tokenizer_path, (*tokenizer)->vocab_size(), weights->config.vocab_size));
  }

  // The TCP ring carries host-side agreement (sampled tokens) on every
  // backend, and the model's collectives on the CPU one.
  std::unique_ptr<Communicator> communicator;
  if (rendezvous) {
    RETURN_IF_ERROR(rendezvous->AgreeOnModel(fingerprint));
    absl::StatusOr<std::unique_ptr<TcpCommunicator>> tcp =
        TcpCommunicator::Create(rendezvous.get(), std::chrono::seconds(FLAGS_collective_timeout));
    if (!tcp.ok()) return tcp.status();
    communicator = *std::move(tcp);
  } else {
    communicator = std::make_unique<LocalCommunicator>();
  }
  TransformerOptions options;
  options.kv_cache_dtype = *kv_cache_dtype;
  options.cuda_graphs = FLAGS_cuda_graphs;
  options.max_batch_size = FLAGS_max_batch_size;
  options.max_seq_len = FLAGS_max_seq_len;
  options.threads = FLAGS_threads > 0 ? FLAGS_threads
                                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                                        std::max(1, env->local_world_size));
  std::unique_ptr<Communicator> device_communicator;
  absl::StatusOr<std::unique_ptr<LanguageModel>> model =
      MakeModel(*device, *env, rendezvous.get(), communicator.get(), *std::move(weights), options, &device_communicator);
  if (!model.ok()) return model.status();
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  LOG(INFO) << absl::StrFormat("rank %d of %d: loaded %s and %s in %.2f s; %s KV cache for %d x %d positions",
                               env->rank, env->world_size, (*shard)->path(), FLAGS_tokenizer_path, load_seconds,
                               DTypeName(options.kv_cache_dtype), options.max_batch_size, options.max_seq_len);

  Generator generator(model->get(), tokenizer->get(), (*tokenizer)->eos_id(),
                      env->world_size > 1 ? communicator.get() : nullptr);
  SamplingOptions sampling;
  sampling.temperature = static_cast<float>(FLAGS_temperature);
  sampling.top_p = static_cast<float>(FLAGS_top_p);
  if (FLAGS_max_gen_len >= 0) sampling.max_gen_len = FLAGS_max_gen_len;
  sampling.logprobs = FLAGS_logprobs;
  sampling.echo = FLAGS_echo;
  sampling.seed = FLAGS_seed;
  LOG(INFO) << "generating for " << (job->chat ? job->dialogs.size() : job->prompts.size())
            << (job->chat ? " dialog(s)" : " prompt(s)");
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<Completion>> completions =
      job->chat ? generator.ChatCompletion(job->dialogs, sampling) : generator.TextCompletion(job->prompts, sampling);
  if (!completions.ok()) return completions.status();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (leader) {
    std::vector<std::string> lines;
    size_t tokens = 0;
    for (size_t i = 0; i < completions->size(); ++i) {
      const Completion& c = (*completions)[i];
      tokens += c.token_ids.size();
      std::fputs((job->chat ? FormatChatCompletion(job->dialogs[i], c) : FormatTextCompletion(job->prompts[i], c)).c_str(),
                 stdout);
      lines.push_back(CompletionJson(c, job->chat, FLAGS_logprobs));
    }
    std::fflush(stdout);
    if (!FLAGS_output.empty()) {
      RETURN_IF_ERROR(WriteLinesAtomically(FLAGS_output, lines));
    }
    LOG(INFO) << absl::StrFormat("%d ranks, load %.2f s, %d tokens generated in %.2f s (%.1f tokens/s)",
                                 env->world_size, load_seconds, tokens, seconds, tokens / std::max(seconds, 1e-9));
    if (!FLAGS_summary_file.empty()) {
      nlohmann::json summary = {{"ranks", env->world_size},       {"load_seconds", load_seconds},
                                {"tokens", tokens},               {"generate_seconds", seconds},
                                {"tokens_per_second", tokens / std::max(seconds, 1e-9)}};
      RETURN_IF_ERROR(WriteLinesAtomically(FLAGS_summary_file, {summary.dump()}));
    }
  }
  if (rendezvous) return rendezvous->Finish();
  return absl::OkStatus();
}

}  // namespace
}  // namespace llama

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "One rank of a Llama 2 job. Alone:\n"
      "  worker --shard_dir=DIR --tokenizer_path=tokenizer.model --prompt=\"...\"\n"
      "Under //launcher (or torchrun-style RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT/RENDEZVOUS_TOKEN),\n"
      "each rank maps DIR/rank-R-of-N.shard and rank 0 prints the results.");
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  absl::Status status = llama::Run();
  if (!status.ok()) {
    const char* rank = std::getenv("RANK");
    std::fprintf(stderr, "worker rank %s: %s\n", rank != nullptr ? rank : "0", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
