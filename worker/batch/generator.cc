#include "worker/batch/generator.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "ops/cpu/sampling.h"

namespace llama {

// One prompt's state while the engine runs it.
struct Generator::Row {
  std::vector<int> tokens;      // Prompt, then generated tokens.
  std::vector<float> logprobs;  // logprobs[p]: of tokens[p]; [0] is 0, as the reference.
  bool done = false;
  absl::Status status;
};

Generator::Generator(LanguageModel* model, const Tokenizer* tokenizer, std::vector<int> stop_ids,
                     const EngineOptions& engine)
    : model_(model),
      tokenizer_(tokenizer),
      stop_ids_(tokenizer != nullptr ? tokenizer->stop_ids() : std::move(stop_ids)),
      engine_options_(engine) {}

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

absl::Status Generator::CheckPrompts(const std::vector<std::vector<int>>& prompts) const {
  if (prompts.empty()) return absl::InvalidArgumentError("no prompts: expected at least one");
  const int64_t max_seq_len = model_->limits().max_seq_len;
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
      if (token < 0 || token >= model_->limits().vocab_size) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "prompt %d: token id %d outside the vocabulary [0, %d)", i, token, model_->limits().vocab_size));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Generator::SubmitRows(Engine& engine, const std::vector<std::vector<int>>& prompts,
                                   const SamplingOptions& options, std::vector<Row>& rows) const {
  for (size_t i = 0; i < prompts.size(); ++i) {
    Row& row = rows[i];
    row.tokens = prompts[i];
    if (options.logprobs) row.logprobs.assign(prompts[i].size(), 0.0f);
    EngineRequest request;
    request.prompt = prompts[i];
    request.temperature = options.temperature;
    request.top_p = options.top_p;
    // A row's stream does not depend on the other rows or the batch size.
    request.seed = cpu::StreamSeed(options.seed, i);
    request.max_new_tokens = options.max_gen_len.value_or(model_->limits().max_seq_len - 1);
    request.stop_ids = stop_ids_;
    request.prompt_logprobs = options.logprobs && options.echo;
    request.sink = [&row, &options](const RequestEvent& event) {
      switch (event.kind) {
        case RequestEvent::kPromptLogprobs:
          row.logprobs.assign(event.prompt_logprobs.begin(), event.prompt_logprobs.end());
          break;
        case RequestEvent::kToken:
          row.tokens.push_back(event.token);
          if (options.logprobs) row.logprobs.push_back(event.logprob);
          break;
        case RequestEvent::kFinished:
          row.done = true;
          row.status = event.status;
          break;
        case RequestEvent::kScheduled:
          break;
      }
    };
    RETURN_IF_ERROR(engine.Submit(std::move(request)).status());
  }
  return absl::OkStatus();
}

Generation Generator::Output(const Row& row, size_t prompt_len, const SamplingOptions& options) const {
  // The reference's post-processing: drop the prompt unless echo, then cut
  // at the first stop token.
  const size_t start = options.echo ? 0 : prompt_len;
  Generation out;
  out.tokens.assign(row.tokens.begin() + start, row.tokens.end());
  if (options.logprobs) out.logprobs.assign(row.logprobs.begin() + start, row.logprobs.end());
  auto eos = std::find_first_of(out.tokens.begin(), out.tokens.end(), stop_ids_.begin(), stop_ids_.end());
  if (eos != out.tokens.end()) {
    const size_t cut = eos - out.tokens.begin();
    out.tokens.resize(cut);
    if (options.logprobs) out.logprobs.resize(cut);
  }
  return out;
}

absl::StatusOr<std::vector<Generation>> Generator::Generate(const std::vector<std::vector<int>>& prompts,
                                                            const SamplingOptions& options,
                                                            const GenerationsDone& on_batch) {
  RETURN_IF_ERROR(CheckOptions(options));
  RETURN_IF_ERROR(CheckPrompts(prompts));
  Engine engine(model_, engine_options_);
  std::vector<Row> rows(prompts.size());  // Never resized: the requests' sinks hold its rows.
  RETURN_IF_ERROR(SubmitRows(engine, prompts, options, rows));

  std::vector<Generation> results(prompts.size());
  const size_t batch = model_->limits().max_batch_size;
  size_t reported = 0;
  while (reported < prompts.size()) {
    RETURN_IF_ERROR(engine.Step());
    // Runs of `batch` finished prompts go to on_batch in order.
    while (reported < prompts.size()) {
      const size_t end = std::min(prompts.size(), reported + batch);
      if (!std::all_of(rows.begin() + reported, rows.begin() + end, [](const Row& r) { return r.done; })) break;
      for (size_t i = reported; i < end; ++i) {
        RETURN_IF_ERROR(rows[i].status);
        results[i] = Output(rows[i], prompts[i].size(), options);
      }
      if (on_batch) RETURN_IF_ERROR(on_batch(reported, absl::MakeConstSpan(results).subspan(reported, end - reported)));
      reported = end;
    }
  }
  return results;
}

absl::StatusOr<std::vector<Completion>> Generator::Decode(absl::Span<const Generation> generations,
                                                          const SamplingOptions& options) {
  std::vector<Completion> completions;
  for (const Generation& g : generations) {
    Completion c;
    ASSIGN_OR_RETURN(c.generation, tokenizer_->Decode(g.tokens));
    c.token_ids = g.tokens;
    c.logprobs = g.logprobs;
    if (options.logprobs) {
      for (int id : g.tokens) {
        ASSIGN_OR_RETURN(std::string piece, tokenizer_->Decode({id}));
        c.tokens.push_back(std::move(piece));
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
