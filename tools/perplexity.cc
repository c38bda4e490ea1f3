// //tools:perplexity: the perplexity of a text file under a model, measured
// as llama.cpp's llama-perplexity measures it (tools/perplexity_eval.h), to
// compare kernels and weight types (the f32 prefill against --int8_prefill
// or --bf16_activations) and to set our figures beside llama.cpp's.
//
//   perplexity --shard=/path/rank-0-of-1.shard --tokenizer_path=tokenizer.model --text=wiki.test.raw
//   perplexity ... --ctx=512 --chunks=40 --int8_prefill
//
// Without --shard it runs the synthetic model of //tools:bench (random
// weights: a perplexity near the vocabulary's size, for a smoke test).

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gflags/gflags.h>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "ops/cpu/linear.h"
#include "tokenizer/tokenizer.h"
#include "tools/bench_model.h"
#include "tools/local_ranks.h"
#include "tools/perplexity_eval.h"
#include "tools/tool_main.h"
#include "worker/job_flags.h"
#include "worker/model/model_weights.h"
#include "worker/rank_model.h"

DEFINE_string(text, "", "The text file to measure (UTF-8; llama.cpp's examples use wikitext-2's wiki.test.raw).");
DEFINE_int32(ctx, 512, "Tokens per chunk, as llama-perplexity's --ctx-size: the second half of each is scored.");
DEFINE_int32(chunks, -1, "Chunks to measure; -1: every whole chunk of the text.");

namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrFormat("--text=%s: cannot read it", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::Status RunRank(const llama::RendezvousOptions& join) {
  const llama::JobFlags flags = llama::JobFlagsFromCommandLine();
  ASSIGN_OR_RETURN(const std::unique_ptr<llama::Tokenizer> tokenizer, llama::Tokenizer::Load(flags.tokenizer_path));
  ASSIGN_OR_RETURN(const std::string text, ReadText(FLAGS_text));
  // The whole text at once, BOS first, as llama-perplexity tokenizes it.
  ASSIGN_OR_RETURN(const std::vector<int> tokens, tokenizer->Encode(text, /*bos=*/true, /*eos=*/false));
  ASSIGN_OR_RETURN(const llama::Device device, llama::ChooseRankDevice(flags.device));
  ASSIGN_OR_RETURN(llama::ModelWeights weights, llama::BenchModelWeights(0, 1));
  if (tokenizer->vocab_size() > weights.tok_embeddings.dim(0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--tokenizer_path=%s has %d tokens where the model has %d: give the model's tokenizer", flags.tokenizer_path,
        tokenizer->vocab_size(), weights.tok_embeddings.dim(0)));
  }
  ASSIGN_OR_RETURN(llama::TransformerOptions options, llama::TransformerOptionsFromFlags(flags, 1));
  options.max_batch_size = 1;
  options.max_seq_len = FLAGS_ctx;
  options.max_step_tokens = FLAGS_ctx;
  ASSIGN_OR_RETURN(const llama::RankPlan plan, llama::PlanRank(weights, 0, 1, options));
  ASSIGN_OR_RETURN(llama::RankPeers peers, llama::JoinPeers(join, 0));
  ASSIGN_OR_RETURN(llama::RankModel made, llama::CreateRankModel(device, peers, std::move(weights), plan,
                                                                 std::chrono::seconds(600)));
  std::printf("perplexity: %zu tokens, %d per chunk (the second half scored), %s prefill kernel%s%s\n",
              tokens.size(), FLAGS_ctx, std::string(llama::cpu::PrefillKernel()).c_str(),
              plan.int8_prefill ? ", int8 activations (--int8_prefill)" : "",
              plan.bf16_activations ? ", bf16 activations (--bf16_activations)" : "");
  llama::PerplexityOptions measure;
  measure.context = FLAGS_ctx;
  measure.max_chunks = FLAGS_chunks;
  measure.bos_id = tokenizer->bos_id();
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const llama::Perplexity p,
                   llama::MeasurePerplexity(*made.model, tokens, measure, [](int64_t chunk, double value) {
                     std::printf("[%lld]%.4f,", static_cast<long long>(chunk), value);
                     std::fflush(stdout);
                   }));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f (%lld chunks, %lld tokens scored, %.1f s)\n", p.value, p.error,
              static_cast<long long>(p.chunks), static_cast<long long>(p.scored_tokens), seconds);
  if (peers.rendezvous) RETURN_IF_ERROR(peers.rendezvous->Finish());
  return absl::OkStatus();
}

std::vector<std::string> PerplexityJobFlags() {
  std::vector<std::string> names = llama::JobFlagNames(llama::JobFlagGroup::kRankModel);
  names.push_back("tokenizer_path");
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  return llama::ToolMain(argc, argv, "perplexity", "Measures the perplexity of a text file under a model.",
                         [](const std::vector<std::string>&) -> absl::Status {
    if (FLAGS_text.empty()) return absl::InvalidArgumentError("--text: required (the text file to measure)");
    if (FLAGS_ctx < 2) return absl::InvalidArgumentError(absl::StrFormat("--ctx=%d: expected at least 2", FLAGS_ctx));
    if (FLAGS_chunks < -1 || FLAGS_chunks == 0) {
      return absl::InvalidArgumentError(absl::StrFormat("--chunks=%d: expected -1 (all) or at least 1", FLAGS_chunks));
    }
    RETURN_IF_ERROR(llama::CheckJobFlags(llama::JobFlagsFromCommandLine(), /*need_input=*/false));
    if (llama::JobFlagsFromCommandLine().tokenizer_path.empty()) {
      return absl::InvalidArgumentError("--tokenizer_path: required (the model's tokenizer)");
    }
    return llama::RanksEnded(llama::RunLocalRanks(1, "perplexity", [](const llama::RendezvousOptions& join) {
      return llama::ReportFailure("perplexity", RunRank(join));
    }));
  }, PerplexityJobFlags(), {llama::BenchModelFlags()});
}
