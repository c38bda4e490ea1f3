#include "worker/model/generator.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ops/cpu/sampling.h"
#include "ops/status_macros.h"

namespace llama {

// One prompt's state while its batch runs.
struct Generator::Row {
  size_t index;                // In the request.
  absl::Span<const int32_t> blocks;  // Its KV cache blocks.
  std::vector<int> tokens;     // Prompt, then generated tokens.
  size_t prompt_len;
  size_t limit;                // Positions [0, limit) may be filled.
  std::vector<float> logprobs; // logprobs[p]: of tokens[p]; [0] is 0, as the reference.
  size_t cached = 0;           // Positions [0, cached) are in the KV cache.
  bool done = false;
  cpu::Rng rng;
};

namespace {

// Seeds row `index`'s stream: SplitMix64 of (seed, index).
uint64_t RowSeed(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Generator::Generator(LanguageModel* model, const Tokenizer* tokenizer, std::vector<int> stop_ids,
                     Communicator* communicator)
    : model_(model),
      tokenizer_(tokenizer),
      stop_ids_(tokenizer != nullptr ? tokenizer->stop_ids() : std::move(stop_ids)),
      communicator_(communicator) {}

absl::Status Generator::CheckOptions(const SamplingOptions& o) const {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature)) {
    return absl::InvalidArgumentError(absl::StrFormat("temperature %g: expected a finite value >= 0", o.temperature));
  }
  if (!(o.top_p > 0 && o.top_p <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("top_p %g: expected 0 < top_p <= 1", o.top_p));
  }
  if (o.max_gen_len.has_value() && *o.max_gen_len < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("max_gen_len %d: expected >= 0", *o.max_gen_len));
  }
  return absl::OkStatus();
}

absl::Status Generator::ScorePrompts(std::vector<Row>& rows) {
  // Every prompt position but the last, whose logits pick the first new
  // token in RunBatch; in steps of at most max_step_tokens tokens.
  const int64_t vocab = model_->vocab_size();
  while (true) {
    std::vector<SequenceChunk> chunks;
    std::vector<Row*> owners;
    int64_t budget = model_->max_step_tokens();
    for (Row& row : rows) {
      if (budget == 0) break;
      const size_t remaining = row.prompt_len - 1 - row.cached;
      if (remaining == 0) continue;
      const size_t take = std::min<size_t>(remaining, budget);
      chunks.push_back({row.blocks, static_cast<int64_t>(row.cached),
                        absl::MakeConstSpan(row.tokens).subspan(row.cached, take), /*all_logits=*/true});
      owners.push_back(&row);
      budget -= take;
    }
    if (chunks.empty()) return absl::OkStatus();
    absl::StatusOr<absl::Span<const float>> logits = model_->Forward(chunks);
    if (!logits.ok()) return logits.status();
    const float* next = logits->data();
    for (size_t c = 0; c < chunks.size(); ++c) {
      Row& row = *owners[c];
      // Logits at position p score the prompt token at p + 1.
      for (size_t i = 0; i < chunks[c].tokens.size(); ++i, next += vocab) {
        const size_t p = row.cached + i;
        row.logprobs[p + 1] = cpu::LogProb(next, vocab, row.tokens[p + 1]);
      }
      row.cached += chunks[c].tokens.size();
    }
  }
}

absl::Status Generator::RunBatch(std::vector<Row>& rows, const SamplingOptions& options) {
  for (Row& row : rows) row.done = row.tokens.size() >= row.limit;
  if (options.logprobs && options.echo) {
    RETURN_IF_ERROR(ScorePrompts(rows));
  }
  // Each step feeds every unfinished row what it has not cached yet (a
  // prompt, in pieces when it exceeds the step's budget, or the last new
  // token) and gets back the next token of each row fed to its end. So
  // prompts are prefilled in one pass, and a step may mix one row's
  // prefill with the others' decoding.
  std::vector<SequenceChunk> chunks;
  std::vector<TokenChoice> choices;
  std::vector<ChosenToken> chosen;
  std::vector<Row*> owners;
  std::vector<int32_t> tokens;
  while (true) {
    chunks.clear();
    choices.clear();
    owners.clear();
    int64_t budget = model_->max_step_tokens();
    for (Row& row : rows) {
      if (budget == 0) break;
      if (row.done) continue;
      const size_t take = std::min<size_t>(row.tokens.size() - row.cached, budget);
      chunks.push_back({row.blocks, static_cast<int64_t>(row.cached),
                        absl::MakeConstSpan(row.tokens).subspan(row.cached, take), false});
      TokenChoice choice{options.temperature, options.top_p, 0.0};
      // A row's stream gives one number per token it samples, whatever the
      // step size or the other rows.
      if (options.temperature > 0 && row.cached + take == row.tokens.size()) choice.uniform = row.rng.Uniform();
      choices.push_back(choice);
      owners.push_back(&row);
      budget -= take;
    }
    if (chunks.empty()) return absl::OkStatus();
    chosen.resize(chunks.size());
    RETURN_IF_ERROR(model_->ForwardAndChoose(chunks, choices, absl::MakeSpan(chosen)));
    if (communicator_ != nullptr) {
      tokens.resize(chosen.size());
      for (size_t c = 0; c < chosen.size(); ++c) tokens[c] = chosen[c].token;
      RETURN_IF_ERROR(communicator_->Broadcast(tokens.data(), tokens.size() * sizeof(int32_t), 0));
      for (size_t c = 0; c < chosen.size(); ++c) chosen[c].token = tokens[c];
    }
    for (size_t c = 0; c < chunks.size(); ++c) {
      Row& row = *owners[c];
      row.cached += chunks[c].tokens.size();
      if (row.cached < row.tokens.size()) continue;  // More prompt to feed.
      row.tokens.push_back(chosen[c].token);
      if (options.logprobs) row.logprobs.push_back(chosen[c].logprob);
      row.done = std::find(stop_ids_.begin(), stop_ids_.end(), chosen[c].token) != stop_ids_.end() ||
                 row.tokens.size() >= row.limit;
    }
  }
}

absl::StatusOr<std::vector<Generation>> Generator::Generate(const std::vector<std::vector<int>>& prompts,
                                                            const SamplingOptions& options,
                                                            const GenerationsDone& on_batch) {
  RETURN_IF_ERROR(CheckOptions(options));
  if (prompts.empty()) return absl::InvalidArgumentError("no prompts: expected at least one");
  const int64_t max_seq_len = model_->max_seq_len();
  const int64_t max_gen_len = options.max_gen_len.value_or(max_seq_len - 1);
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("prompt %d is empty: expected at least one token (BOS)", i));
    }
    if (static_cast<int64_t>(prompts[i].size()) > max_seq_len) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "prompt %d has %d tokens, more than max_seq_len %d; shorten it or raise --max_seq_len", i,
          prompts[i].size(), max_seq_len));
    }
    for (int token : prompts[i]) {
      if (token < 0 || token >= model_->vocab_size()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "prompt %d: token id %d outside the vocabulary [0, %d)", i, token, model_->vocab_size()));
      }
    }
  }

  std::vector<Generation> results(prompts.size());
  const size_t batch = model_->max_batch_size();
  const std::vector<std::vector<int32_t>> tables = SlotBlockTables(*model_, static_cast<int>(batch));
  for (size_t first = 0; first < prompts.size(); first += batch) {
    std::vector<Row> rows;
    for (size_t i = first; i < std::min(prompts.size(), first + batch); ++i) {
      Row row{i, tables[i - first], prompts[i], prompts[i].size(),
              static_cast<size_t>(std::min<int64_t>(prompts[i].size() + max_gen_len, max_seq_len)),
              {}, 0, false, cpu::Rng(RowSeed(options.seed, i))};
      if (options.logprobs) row.logprobs.assign(row.prompt_len, 0.0f);
      rows.push_back(std::move(row));
    }
    RETURN_IF_ERROR(RunBatch(rows, options));
    for (Row& row : rows) {
      // The reference's post-processing: drop the prompt unless echo, then
      // cut at the first stop token.
      const size_t start = options.echo ? 0 : row.prompt_len;
      Generation& out = results[row.index];
      out.tokens.assign(row.tokens.begin() + start, row.tokens.end());
      if (options.logprobs) out.logprobs.assign(row.logprobs.begin() + start, row.logprobs.end());
      auto eos = std::find_first_of(out.tokens.begin(), out.tokens.end(), stop_ids_.begin(), stop_ids_.end());
      if (eos != out.tokens.end()) {
        const size_t cut = eos - out.tokens.begin();
        out.tokens.resize(cut);
        if (options.logprobs) out.logprobs.resize(cut);
      }
    }
    if (on_batch) {
      RETURN_IF_ERROR(on_batch(first, absl::MakeConstSpan(results).subspan(first, rows.size())));
    }
  }
  return results;
}

absl::StatusOr<std::vector<Completion>> Generator::Decode(absl::Span<const Generation> generations,
                                                          const SamplingOptions& options) {
  std::vector<Completion> completions;
  for (const Generation& g : generations) {
    Completion c;
    absl::StatusOr<std::string> text = tokenizer_->Decode(g.tokens);
    if (!text.ok()) return text.status();
    c.generation = *std::move(text);
    c.token_ids = g.tokens;
    c.logprobs = g.logprobs;
    if (options.logprobs) {
      for (int id : g.tokens) {
        absl::StatusOr<std::string> piece = tokenizer_->Decode({id});
        if (!piece.ok()) return piece.status();
        c.tokens.push_back(*std::move(piece));
      }
    }
    completions.push_back(std::move(c));
  }
  return completions;
}

absl::StatusOr<std::vector<Completion>> Generator::Complete(const std::vector<std::vector<int>>& prompt_tokens,
                                                            const std::vector<bool>& unsafe,
                                                            const SamplingOptions& options,
                                                            const CompletionsDone& on_batch) {
  std::vector<Completion> completions;
  const auto decode_batch = [&](size_t first, absl::Span<const Generation> batch) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<Completion> decoded, Decode(batch, options));
    for (size_t i = 0; i < decoded.size(); ++i) {
      if (unsafe[first + i]) decoded[i].generation = std::string(kUnsafeRequestAnswer);
    }
    if (on_batch) RETURN_IF_ERROR(on_batch(first, decoded));
    for (Completion& c : decoded) completions.push_back(std::move(c));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(Generate(prompt_tokens, options, decode_batch).status());
  return completions;
}

absl::StatusOr<std::vector<Completion>> Generator::TextCompletion(const std::vector<std::string>& prompts,
                                                                  const SamplingOptions& options,
                                                                  const CompletionsDone& on_batch) {
  if (tokenizer_ == nullptr) return absl::FailedPreconditionError("TextCompletion needs a tokenizer");
  std::vector<std::vector<int>> prompt_tokens;
  for (const std::string& prompt : prompts) {
    ASSIGN_OR_RETURN(std::vector<int> ids, tokenizer_->Encode(prompt, /*bos=*/true, /*eos=*/false));
    prompt_tokens.push_back(std::move(ids));
  }
  return Complete(prompt_tokens, std::vector<bool>(prompts.size(), false), options, on_batch);
}

absl::StatusOr<std::vector<Completion>> Generator::ChatCompletion(const std::vector<Dialog>& dialogs,
                                                                  const SamplingOptions& options,
                                                                  const CompletionsDone& on_batch) {
  if (tokenizer_ == nullptr) return absl::FailedPreconditionError("ChatCompletion needs a tokenizer");
  std::vector<std::vector<int>> prompt_tokens;
  std::vector<bool> unsafe;
  for (size_t i = 0; i < dialogs.size(); ++i) {
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(*tokenizer_, dialogs[i]);
    if (!prompt.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("dialog ", i, ": ", prompt.status().message()));
    }
    prompt_tokens.push_back(std::move(prompt->tokens));
    unsafe.push_back(prompt->unsafe);
  }
  return Complete(prompt_tokens, unsafe, options, on_batch);
}

}  // namespace llama
