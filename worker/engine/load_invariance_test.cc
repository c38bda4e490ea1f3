// Outputs that do not depend on load, on the real model: 24 requests with
// random arrival steps, prompt lengths (some sharing a prefix), limits and
// sampling settings, run together on the CPU backend at 1 and 2 ranks, get
// request by request the tokens, log-probabilities and prompt
// log-probabilities of each request run alone, bit for bit: with prefix
// caching on and off, prompts cut into pieces by a small step budget, and a
// KV pool small enough that requests are preempted and recomputed, and
// with speculative decoding (guesses verified as extra rows of a step:
// n-gram lookup's, and a draft model's, the fixture in int8 drafting for
// itself). The kernels make this hold (ops/cpu/linear.h, TcpCommunicator's
// AllReduceSumRows); no tolerance.

#include <random>

#include <gtest/gtest.h>

#include "ops/cpu/linear.h"
#include "worker/collectives/thread_ranks.h"
#include "worker/engine/engine.h"
#include "worker/engine/lockstep.h"
#include "worker/model/golden_fixture.h"
#include "worker/model/transformer.h"

namespace llama {
namespace {

struct Spec {
  std::vector<int> prompt;
  int64_t max_new_tokens = 0;
  float temperature = 0;
  float frequency_penalty = 0;
  uint64_t seed = 0;
  bool prompt_logprobs = false;
  int arrival_step = 0;
};

struct Result {
  std::vector<int> tokens;
  std::vector<float> logprobs, prompt_logprobs;
  std::vector<std::pair<int, float>> prompt_top;
  FinishReason finish = FinishReason::kError;
};

std::vector<Spec> RandomSpecs(int64_t vocab, uint32_t seed) {
  std::mt19937 random(seed);
  const auto token = [&] { return 3 + static_cast<int>(random() % (vocab - 3)); };
  std::vector<int> system(20);
  for (int& t : system) t = token();
  std::vector<Spec> specs(24);
  for (size_t i = 0; i < specs.size(); ++i) {
    Spec& s = specs[i];
    if (i % 2 == 0) s.prompt = system;  // A shared "system prompt".
    for (int n = 1 + random() % 40; n > 0; --n) s.prompt.push_back(token());
    // Some prompts repeat themselves: n-gram lookup finds guesses there.
    if (i % 3 == 0) {
      const std::vector<int> tail(s.prompt.end() - std::min<size_t>(s.prompt.size(), 6), s.prompt.end());
      s.prompt.insert(s.prompt.end(), tail.begin(), tail.end());
    }
    s.max_new_tokens = 4 + random() % 40;
    s.temperature = random() % 2 == 0 ? 0.0f : 0.8f;
    s.frequency_penalty = i % 4 == 1 ? 0.5f : 0.0f;
    s.seed = random();
    s.prompt_logprobs = i % 5 == 0;
    s.arrival_step = static_cast<int>(random() % 30);
  }
  return specs;
}

EngineRequest RequestOf(const Spec& spec, Result* out) {
  EngineRequest r;
  r.prompt = spec.prompt;
  r.max_new_tokens = spec.max_new_tokens;
  r.sampling.token.temperature = spec.temperature;
  r.sampling.token.top_p = 0.9f;
  r.sampling.frequency_penalty = spec.frequency_penalty;
  r.sampling.seed = spec.seed;
  r.prompt_logprobs = spec.prompt_logprobs;
  r.top_logprobs = spec.prompt_logprobs ? 2 : 0;
  r.sink = [out](const RequestEvent& e) {
    if (e.kind == RequestEvent::kToken) {
      out->tokens.push_back(e.token);
      out->logprobs.push_back(e.logprob);
    } else if (e.kind == RequestEvent::kPromptLogprobs) {
      out->prompt_logprobs.assign(e.prompt_logprobs.begin(), e.prompt_logprobs.end());
      for (const TopToken& t : e.prompt_top) out->prompt_top.emplace_back(t.token, t.logprob);
    } else {
      out->finish = e.finish;
    }
  };
  return r;
}

// Every request alone on a fresh engine.
std::vector<Result> Alone(LanguageModel& model, const std::vector<Spec>& specs) {
  std::vector<Result> results(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    Engine engine(&model, {});
    EXPECT_TRUE(engine.Submit(RequestOf(specs[i], &results[i])).ok());
    EXPECT_TRUE(engine.RunUntilIdle().ok());
  }
  return results;
}

// All of them on one engine, each submitted at its arrival step.
std::vector<Result> Together(LanguageModel& model, const std::vector<Spec>& specs, const EngineOptions& options,
                             EngineStats* stats) {
  Engine engine(&model, options);
  std::vector<Result> results(specs.size());
  size_t submitted = 0;
  for (int step = 0; submitted < specs.size() || !engine.idle(); ++step) {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].arrival_step == step) {
        EXPECT_TRUE(engine.Submit(RequestOf(specs[i], &results[i])).ok());
        ++submitted;
      }
    }
    const absl::Status status = engine.Step();
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok() || step > 100000) break;
  }
  *stats = engine.stats();
  return results;
}

void ExpectSameAsAlone(const std::vector<Result>& together, const std::vector<Result>& alone, const std::string& what) {
  for (size_t i = 0; i < alone.size(); ++i) {
    SCOPED_TRACE(what + ", request " + std::to_string(i));
    EXPECT_NE(alone[i].finish, FinishReason::kError);
    EXPECT_EQ(together[i].finish, alone[i].finish);
    EXPECT_EQ(together[i].tokens, alone[i].tokens);
    EXPECT_EQ(together[i].logprobs, alone[i].logprobs);  // Bit for bit.
    EXPECT_EQ(together[i].prompt_logprobs, alone[i].prompt_logprobs);
    EXPECT_EQ(together[i].prompt_top, alone[i].prompt_top);
  }
}

TransformerOptions SmallPool() {
  TransformerOptions options;
  options.max_batch_size = 8;
  options.max_seq_len = 128;
  options.max_step_tokens = 32;  // Prompts of up to 60 tokens go in pieces.
  options.kv_block_size = 16;
  options.kv_blocks = 24;  // 384 positions for up to 8 requests of up to 128: preemption.
  return options;
}

// The checks, on rank 0's model (with peers: its LeaderModel): together
// with prefix caching on and off, and with speculative decoding (n-gram
// lookup, and `draft`, a model on rank 0 alone), against alone without
// any of them.
void CheckLoadInvariance(LanguageModel& model, LanguageModel& draft, const std::string& name) {
  const std::vector<Spec> specs = RandomSpecs(model.limits().vocab_size, 42);
  const std::vector<Result> alone = Alone(model, specs);
  for (const int config : {0, 1, 2, 3}) {
    EngineOptions options;
    options.prefix_caching = config != 1;
    options.speculative_tokens = config >= 2 ? 4 : 0;
    options.draft_model = config == 3 ? &draft : nullptr;
    options.speculation_priced = false;  // Every guess found, whatever the steps cost here.
    const char* configs[] = {", prefix caching", ", no prefix caching", ", prefix caching, n-gram speculation",
                             ", prefix caching, draft-model speculation"};
    const std::string what = name + configs[config];
    EngineStats stats;
    const std::vector<Result> together = Together(model, specs, options, &stats);
    ExpectSameAsAlone(together, alone, what);
    EXPECT_GT(stats.preemptions, 0) << "the pool was meant to run dry";
    EXPECT_EQ(stats.prefix_hit_tokens > 0, options.prefix_caching);
    // Guesses were made, and some kept: the comparison above covers both.
    EXPECT_EQ(stats.accepted_tokens > 0, options.speculative_tokens > 0) << what;
    if (options.speculative_tokens > 0) {
      EXPECT_GT(stats.proposed_tokens, stats.accepted_tokens) << what;
    }
    std::printf("%s: 24 requests as alone, %lld steps, %lld preemptions, %lld prefix-hit tokens, %lld of %lld "
                "guesses kept\n",
                what.c_str(), static_cast<long long>(stats.steps), static_cast<long long>(stats.preemptions),
                static_cast<long long>(stats.prefix_hit_tokens), static_cast<long long>(stats.accepted_tokens),
                static_cast<long long>(stats.proposed_tokens));
  }
}

class LoadInvarianceTest : public ::testing::TestWithParam<std::string> {};

// The draft: the fixture in int8 (self-speculation), on one rank.
std::unique_ptr<Transformer> MakeDraft(const std::string& fixture, LocalCommunicator& comm) {
  return testing::MakeModel(fixture, &comm, SmallPool(), DType::kQ8_0);
}

TEST_P(LoadInvarianceTest, OneRank) {
  LocalCommunicator comm;
  std::unique_ptr<Transformer> model = testing::MakeModel(GetParam(), &comm, SmallPool());
  std::unique_ptr<Transformer> draft = MakeDraft(GetParam(), comm);
  CheckLoadInvariance(*model, *draft, GetParam() + ", 1 rank");
}

TEST_P(LoadInvarianceTest, TwoRanksInLockstep) {
  testing::ConvertFixture(GetParam(), 2);
  absl::Status follower = absl::UnknownError("not run");
  testing::RunRanksOnThreads(
      2,
      [&](int rank, Communicator& comm) {
        std::unique_ptr<Transformer> model = testing::MakeModel(GetParam(), &comm, SmallPool());
        if (rank == 1) {
          follower = FollowLeader(*model, comm);
          return;
        }
        LeaderModel leader(model.get(), &comm);
        LocalCommunicator alone;
        std::unique_ptr<Transformer> draft = MakeDraft(GetParam(), alone);
        CheckLoadInvariance(leader, *draft, GetParam() + ", 2 ranks");
        EXPECT_TRUE(leader.Stop().ok());
      },
      std::chrono::seconds(60));
  EXPECT_TRUE(follower.ok()) << follower;
}

// int8 weights with --int8_prefill: prefill takes the integer kernels too,
// so int8 requests are load-invariant as well (with f32 activations at
// prefill they are not: a row's prefill and decode products differ).
TEST_P(LoadInvarianceTest, OneRankInt8WithInt8Prefill) {
  LocalCommunicator comm;
  TransformerOptions options = SmallPool();
  options.int8_prefill = true;
  std::unique_ptr<Transformer> model = testing::MakeModel(GetParam(), &comm, options, DType::kQ8_0);
  std::unique_ptr<Transformer> draft = MakeDraft(GetParam(), comm);
  CheckLoadInvariance(*model, *draft, GetParam() + ", int8, 1 rank");
}

// bf16 weights with --bf16_activations: one kernel for every row whatever
// the batch (AVX-512 BF16 where the CPU has it), so load-invariant too.
TEST_P(LoadInvarianceTest, OneRankBf16Activations) {
  LocalCommunicator comm;
  TransformerOptions options = SmallPool();
  options.bf16_activations = true;
  std::unique_ptr<Transformer> model = testing::MakeModel(GetParam(), &comm, options, DType::kBF16);
  std::unique_ptr<Transformer> draft = MakeDraft(GetParam(), comm);
  CheckLoadInvariance(*model, *draft, GetParam() + ", bf16 activations (" +
                                          std::string(cpu::Bf16ActivationsKernel()) + " kernel), 1 rank");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LoadInvarianceTest, ::testing::Values("tiny_fp32_mp1", "gqa_bf16_mp1"));

}  // namespace
}  // namespace llama
