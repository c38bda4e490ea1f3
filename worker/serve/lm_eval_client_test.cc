// lm-evaluation-harness's `local-completions` model against the server, as
// its source (EleutherAI/lm-evaluation-harness at 4e7e0d4) asks and reads:
// loglikelihood (TemplateLM.loglikelihood and _encode_pair in
// lm_eval/api/model.py) and loglikelihood_rolling (get_rolling_token_windows
// and make_disjoint_window in lm_eval/utils.py), batched and truncated as
// TemplateAPI's _loglikelihood_tokens and batch_loglikelihood_requests do
// (lm_eval/models/api_models.py), sent as LocalCompletionsAPI's
// _create_payload writes it and read back by its parse_logprobs
// (lm_eval/models/openai_completions.py). Its sums must be the model's own
// teacher-forced log-likelihoods, and its is_greedy the model's argmax.

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "worker/sampling/sampler.h"
#include "worker/serve/serving_fixture.h"

namespace llama::testing {
namespace {

// The server's context, and lm-eval's max_length model argument set to it
// (its default, 2048, is more than the fixture models take).
constexpr int kContext = 128;
constexpr int kBatchSize = 4;  // lm-eval's batch_size: prompts per request.

// One of _loglikelihood_tokens' requests: context and continuation tokens.
struct TokenRequest {
  std::vector<int> context;
  std::vector<int> continuation;
};

// What parse_logprobs returns per request, and how the model sees it.
struct Loglikelihood {
  double logprob = 0;
  bool greedy = true;
};

std::vector<int> Encode(const Tokenizer& tokenizer, const std::string& text) {
  // tok_encode: add_special_tokens false (add_bos_token defaults to false).
  absl::StatusOr<std::vector<int>> ids = tokenizer.Encode(text, /*bos=*/false, /*eos=*/false);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int>();
}

// TemplateLM.loglikelihood: an empty context is the prefix token (BOS);
// else _encode_pair moves the context's trailing spaces to the
// continuation, encodes the whole and the context, and splits the whole.
TokenRequest EncodePair(const Tokenizer& tokenizer, std::string context, std::string continuation) {
  if (context.empty()) {
    std::vector<int> whole = Encode(tokenizer, continuation);
    if (whole.front() == tokenizer.bos_id()) return {{whole.front()}, {whole.begin() + 1, whole.end()}};
    return {{tokenizer.bos_id()}, whole};
  }
  const size_t kept = context.find_last_not_of(" \t\n\r\f\v") + 1;  // Python's rstrip().
  continuation = context.substr(kept) + continuation;
  context.resize(kept);
  const std::vector<int> whole = Encode(tokenizer, context + continuation);
  const std::vector<int> context_ids = Encode(tokenizer, context);
  return {context_ids, {whole.begin() + std::min(context_ids.size(), whole.size()), whole.end()}};
}

// get_rolling_token_windows(token_list, prefix_token, max_seq_len,
// context_len = 1), each made disjoint by make_disjoint_window.
std::vector<TokenRequest> RollingWindows(const std::vector<int>& tokens, int prefix_token, int max_seq_len) {
  std::vector<TokenRequest> windows;
  const auto disjoint = [&](std::vector<int> a, std::vector<int> b) {
    a.resize(a.size() - (b.size() - 1));
    windows.push_back({std::move(a), std::move(b)});
  };
  const int n = static_cast<int>(tokens.size());
  const int pred_len = max_seq_len;  // max_seq_len - context_len + 1.
  const int first = std::min(max_seq_len, n);
  std::vector<int> input = {prefix_token};
  input.insert(input.end(), tokens.begin(), tokens.begin() + first - 1);
  disjoint(input, {tokens.begin(), tokens.begin() + first});
  for (int predicted = first; predicted < n;) {
    const int window_pred_len = std::min(n - predicted, pred_len);
    const int window_end = predicted + window_pred_len;
    disjoint({tokens.begin() + (window_end - max_seq_len - 1), tokens.begin() + (window_end - 1)},
             {tokens.begin() + (window_end - window_pred_len), tokens.begin() + window_end});
    predicted += window_pred_len;
  }
  return windows;
}

// lm-eval's input and context length of a request (batch_loglikelihood_requests):
// the last max_length - 1 tokens, one position being kept for the token generated.
std::pair<std::vector<int>, int> InputOf(const TokenRequest& r) {
  const int max_length = kContext - 1;
  std::vector<int> whole = r.context;
  whole.insert(whole.end(), r.continuation.begin(), r.continuation.end());
  const int total = static_cast<int>(whole.size());
  const int ctxlen = static_cast<int>(r.context.size()) - std::max(0, total - max_length);
  if (total > max_length) whole.erase(whole.begin(), whole.end() - max_length);
  return {whole, ctxlen};
}

// _create_payload(generate=False) for one batch of inputs.
json Payload(const std::vector<std::vector<int>>& inputs, int max_tokens) {
  return {{"model", "tiny"}, {"prompt", inputs}, {"temperature", 0}, {"max_tokens", max_tokens},
          {"logprobs", 1},   {"seed", 1234},     {"echo", true}};
}

// parse_logprobs: per choice (by index), the sum of token_logprobs[ctxlen:-1]
// and whether each of them is the max of top_logprobs at its position.
std::vector<Loglikelihood> ParseLogprobs(const json& out, const std::vector<int>& ctxlens) {
  std::vector<json> choices(out["choices"].begin(), out["choices"].end());
  std::sort(choices.begin(), choices.end(), [](const json& a, const json& b) { return a["index"] < b["index"]; });
  std::vector<Loglikelihood> results;
  for (size_t i = 0; i < choices.size() && i < ctxlens.size(); ++i) {
    const json& logprobs = choices[i]["logprobs"];
    const int end = static_cast<int>(logprobs["token_logprobs"].size()) - 1;  // [ctxlen:-1]
    Loglikelihood r;
    for (int j = ctxlens[i]; j < end; ++j) {
      const double logprob = logprobs["token_logprobs"][j].get<double>();
      r.logprob += logprob;
      double best = -std::numeric_limits<double>::infinity();
      for (const auto& [token, value] : logprobs["top_logprobs"][j].items()) best = std::max(best, value.get<double>());
      if (logprob != best) r.greedy = false;
    }
    results.push_back(r);
  }
  return results;
}

// _loglikelihood_tokens: the requests longest first (Collator's sort key,
// -len and the tokens), in batches of kBatchSize, results in their order.
std::vector<Loglikelihood> LoglikelihoodTokens(Serving& s, const std::vector<TokenRequest>& requests) {
  std::vector<std::pair<std::vector<int>, int>> inputs;
  for (const TokenRequest& r : requests) inputs.push_back(InputOf(r));
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  const auto key = [&](size_t i) {
    std::vector<int> tokens = requests[i].context;
    tokens.insert(tokens.end(), requests[i].continuation.begin(), requests[i].continuation.end());
    return std::make_pair(-static_cast<int64_t>(tokens.size()), tokens);
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<Loglikelihood> results(requests.size());
  for (size_t start = 0; start < order.size(); start += kBatchSize) {
    std::vector<std::vector<int>> batch;
    std::vector<int> ctxlens;
    for (size_t k = start; k < std::min(order.size(), start + kBatchSize); ++k) {
      batch.push_back(inputs[order[k]].first);
      ctxlens.push_back(inputs[order[k]].second);
    }
    const std::vector<Loglikelihood> parsed = ParseLogprobs(s.PostJson("/v1/completions", Payload(batch, 1)), ctxlens);
    EXPECT_EQ(parsed.size(), batch.size());
    for (size_t k = 0; k < parsed.size(); ++k) results[order[start + k]] = parsed[k];
  }
  return results;
}

// The model's own answer: one forward pass over lm-eval's input, each
// continuation token's log_softmax summed (as Python sums, in double) and
// compared with the argmax.
class TeacherForcing {
 public:
  explicit TeacherForcing(const std::string& model) {
    TransformerOptions options;
    options.max_batch_size = 1;
    options.max_seq_len = kContext;
    options.max_step_tokens = kContext;
    model_ = MakeModel(model, &comm_, options);
  }

  Loglikelihood Of(const TokenRequest& request) {
    const auto [input, ctxlen] = InputOf(request);
    const std::vector<std::vector<int32_t>> tables = SlotBlockTables(*model_, 1);
    const SequenceChunk chunk{tables[0], 0, input, /*all_logits=*/true};
    absl::StatusOr<absl::Span<const float>> logits = model_->Forward({chunk});
    EXPECT_TRUE(logits.ok()) << logits.status();
    Loglikelihood r;
    if (!logits.ok()) return r;
    const int64_t vocab = model_->limits().vocab_size;
    for (size_t i = ctxlen; i < input.size(); ++i) {
      const float* row = logits->data() + (i - 1) * vocab;  // Logits at i - 1 predict token i.
      r.logprob += LogProb(row, vocab, input[i]);
      r.greedy &= Argmax(row, vocab) == input[i];
    }
    return r;
  }

  // The n tokens greedy decoding writes after `context`.
  std::vector<int> Greedy(std::vector<int> context, int n) {
    const size_t start = context.size();
    for (int k = 0; k < n; ++k) {
      const std::vector<std::vector<int32_t>> tables = SlotBlockTables(*model_, 1);
      const SequenceChunk chunk{tables[0], 0, context, /*all_logits=*/false};
      absl::StatusOr<absl::Span<const float>> logits = model_->Forward({chunk});
      EXPECT_TRUE(logits.ok()) << logits.status();
      if (!logits.ok()) break;
      context.push_back(Argmax(logits->data(), model_->limits().vocab_size));
    }
    return {context.begin() + start, context.end()};
  }

 private:
  LocalCommunicator comm_;
  std::unique_ptr<Transformer> model_;
};

// The server scores prompts in pieces under its token budget, batched with
// the other prompts of the request, where the reference runs each input
// alone in one pass; on the CPU backend the logits agree bit for bit
// (docs/batch-jobs.md, batch invariance) but for the last bits where it says they may
// not. Each log-probability then travels as a float (7 significant digits)
// through JSON, and the sums run over up to 127 terms of magnitude up to
// ~10 (log of a 600-768 token vocabulary, random weights): float rounding
// alone bounds the sum's error by ~127 * 10 * 6e-8 < 1e-4.
constexpr double kTolerance = 1e-4;

class LmEvalClientTest : public ::testing::TestWithParam<std::string> {
 protected:
  const Tokenizer& tokenizer() const {
    return GetParam() == kLlama3Model ? Llama3FixtureTokenizer() : FixtureTokenizer();
  }
};

TEST_P(LmEvalClientTest, LoglikelihoodIsTheModelsTeacherForcedSum) {
  Serving s({}, {}, GetParam(), kContext);
  TeacherForcing reference(GetParam());
  std::vector<TokenRequest> requests;
  for (const auto& [context, continuation] : std::vector<std::pair<std::string, std::string>>{
           {"The capital of France is", " Paris"},
           {"The capital of France is ", "Paris, the city of light."},
           {"Question: what is 2+2?\nAnswer:", " 4"},
           {"\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\xaf\xe6\x97\xa5\xe6\x9c\xac\xe3\x81\xae",  // 東京は日本の
            "\xe9\xa6\x96\xe9\x83\xbd\xe3\x81\xa7\xe3\x81\x99\xe3\x80\x82"},         // 首都です。
           {"", "Hello world"},
           {"Emoji:", " \xf0\x9f\x99\x82 \xf0\x9f\xa6\x99"},
           {std::string(400, 'a') + " long context is left-truncated", " to fit"},
       }) {
    requests.push_back(EncodePair(tokenizer(), context, continuation));
  }
  // Continuations the model itself would write: is_greedy must say so.
  for (const char* context : {"I believe the meaning of life is", "Simply put,"}) {
    const std::vector<int> context_ids = Encode(tokenizer(), context);
    requests.push_back({context_ids, reference.Greedy(context_ids, 3)});
  }
  const std::vector<Loglikelihood> answers = LoglikelihoodTokens(s, requests);
  ASSERT_EQ(answers.size(), requests.size());
  int greedy = 0, not_greedy = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Loglikelihood expected = reference.Of(requests[i]);
    EXPECT_NEAR(answers[i].logprob, expected.logprob, kTolerance) << "request " << i;
    EXPECT_LT(answers[i].logprob, 0.0) << "request " << i;
    EXPECT_EQ(answers[i].greedy, expected.greedy) << "request " << i;
    (expected.greedy ? greedy : not_greedy)++;
  }
  EXPECT_GE(greedy, 2);
  EXPECT_GE(not_greedy, 2);
}

TEST_P(LmEvalClientTest, LoglikelihoodRollingCoversEveryTokenOnce) {
  Serving s({}, {}, GetParam(), kContext);
  TeacherForcing reference(GetParam());
  std::string document;
  for (int i = 0; i < 12; ++i) {
    document += "Paris, the capital of France, is known for the Eiffel Tower and the Louvre. "
                "\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\xaf\xe6\x97\xa5\xe6\x9c\xac\xe3\x81\xae\xe9\xa6\x96\xe9\x83\xbd. ";
  }
  const std::vector<int> tokens = Encode(tokenizer(), document);
  // loglikelihood_rolling: max_seq_len = self.max_length - 1, where
  // self.max_length is the max_length argument less one.
  const std::vector<TokenRequest> windows = RollingWindows(tokens, tokenizer().bos_id(), kContext - 2);
  ASSERT_GE(windows.size(), 3u) << tokens.size() << " tokens";
  size_t predicted = 0;
  for (const TokenRequest& w : windows) predicted += w.continuation.size();
  EXPECT_EQ(predicted, tokens.size());
  const std::vector<Loglikelihood> answers = LoglikelihoodTokens(s, windows);
  double total = 0, expected = 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    total += answers[i].logprob;
    expected += reference.Of(windows[i]).logprob;
  }
  // Summed over windows: the tolerance above, once per window.
  EXPECT_NEAR(total, expected, kTolerance * windows.size());
}

// max_tokens 0 with echo (lm-eval sent it before it sent 1): the prompt
// scored alone, no token generated, the same numbers at its positions.
// (Today's parse_logprobs drops the last position, [ctxlen:-1], which is
// the generated token only when max_tokens is 1.)
TEST_P(LmEvalClientTest, MaxTokensZeroScoresThePromptOnly) {
  Serving s({}, {}, GetParam(), kContext);
  const std::vector<std::vector<int>> inputs = {Encode(tokenizer(), "The capital of France is Paris"),
                                                Encode(tokenizer(), "Simply put, the theory of relativity")};
  const json one = s.PostJson("/v1/completions", Payload(inputs, 1));
  const json zero = s.PostJson("/v1/completions", Payload(inputs, 0));
  EXPECT_EQ(zero["usage"]["completion_tokens"], 0);
  EXPECT_EQ(one["usage"]["completion_tokens"], 2);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const json& a = one["choices"][i];
    const json& b = zero["choices"][i];
    ASSERT_EQ(b["index"], a["index"]);
    const std::vector<int>& input = inputs[a["index"].get<size_t>()];
    absl::StatusOr<std::string> text = tokenizer().Decode(input);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(b["text"], *text);
    EXPECT_EQ(b["finish_reason"], "length");
    ASSERT_EQ(b["logprobs"]["token_logprobs"].size(), input.size());
    ASSERT_EQ(a["logprobs"]["token_logprobs"].size(), input.size() + 1);
    for (size_t j = 0; j < input.size(); ++j) {
      EXPECT_EQ(b["logprobs"]["token_logprobs"][j], a["logprobs"]["token_logprobs"][j]) << j;
      EXPECT_EQ(b["logprobs"]["top_logprobs"][j], a["logprobs"]["top_logprobs"][j]) << j;
      EXPECT_EQ(b["logprobs"]["tokens"][j], a["logprobs"]["tokens"][j]) << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BothModels, LmEvalClientTest, ::testing::Values(kLlama2Model, kLlama3Model));

}  // namespace
}  // namespace llama::testing
