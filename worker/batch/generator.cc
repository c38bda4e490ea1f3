#include "worker/batch/generator.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "worker/sampling/sampler.h"

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
  RETURN_IF_ERROR(o.sampling.Validate(model_->limits().vocab_size));
  if (o.max_gen_len.has_value() && *o.max_gen_len < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("max_gen_len %d: expected >= 0", *o.max_gen_len));
  }
  return absl::OkStatus();
}

absl::Status Generator::CheckPrompt(size_t index, const std::vector<int>& prompt) const {
  const int64_t max_seq_len = model_->limits().max_seq_len;
  if (prompt.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("prompt %d is empty: expected at least one token (BOS)", index));
  }
  if (static_cast<int64_t>(prompt.size()) > max_seq_len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "prompt %d has %d tokens, more than max_seq_len %d; shorten it or raise --max_seq_len", index, prompt.size(),
        max_seq_len));
  }
  for (int token : prompt) {
    if (token < 0 || token >= model_->limits().vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat("prompt %d: token id %d outside the vocabulary [0, %d)", index,
                                                        token, model_->limits().vocab_size));
    }
  }
  return absl::OkStatus();
}

namespace {

size_t JobIndex(const BatchSelection& selection, size_t i) {
  return selection.indices.empty() ? i : selection.indices[i];
}

}  // namespace

absl::Status Generator::SubmitRows(Engine& engine, const std::vector<std::vector<int>>& prompts,
                                   const SamplingOptions& options, const BatchSelection& selection,
                                   std::vector<Row>& rows) const {
  for (size_t i = 0; i < prompts.size(); ++i) {
    Row& row = rows[i];
    if (!row.status.ok()) continue;
    row.tokens = prompts[i];
    if (options.logprobs) row.logprobs.assign(prompts[i].size(), 0.0f);
    EngineRequest request;
    request.prompt = prompts[i];
    request.sampling = options.sampling;
    // A row's stream does not depend on the other rows or the batch size.
    request.sampling.seed = StreamSeed(options.sampling.seed, JobIndex(selection, i));
    request.max_new_tokens = options.max_gen_len.value_or(model_->limits().max_seq_len - 1);
    request.stop_ids = stop_ids_;
    request.prompt_logprobs = options.logprobs && options.echo;
    if (options.grammar != nullptr) {
      ASSIGN_OR_RETURN(std::unique_ptr<grammar::TokenMatcher> matcher, grammar::TokenMatcher::Start(options.grammar));
      request.grammar = std::move(matcher);
    }
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
                                                            const GenerationsDone& on_batch,
                                                            const BatchSelection& selection) {
  return GenerateRows(prompts, std::vector<absl::Status>(prompts.size()), options, on_batch, selection);
}

absl::StatusOr<std::vector<Generation>> Generator::GenerateRows(const std::vector<std::vector<int>>& prompts,
                                                                std::vector<absl::Status> errors,
                                                                const SamplingOptions& options,
                                                                const GenerationsDone& on_batch,
                                                                const BatchSelection& selection) {
  RETURN_IF_ERROR(CheckOptions(options));
  if (prompts.empty()) return absl::InvalidArgumentError("no prompts: expected at least one");
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (errors[i].ok()) errors[i] = CheckPrompt(JobIndex(selection, i), prompts[i]);
    if (!selection.each_alone) RETURN_IF_ERROR(errors[i]);
  }
  Engine engine(model_, engine_options_);
  std::vector<Row> rows(prompts.size());  // Never resized: the requests' sinks hold its rows.
  for (size_t i = 0; i < prompts.size(); ++i) {
    rows[i].status = errors[i];
    rows[i].done = !errors[i].ok();
  }
  RETURN_IF_ERROR(SubmitRows(engine, prompts, options, selection, rows));

  std::vector<Generation> results(prompts.size());
  const size_t batch = model_->limits().max_batch_size;
  size_t reported = 0;
  while (true) {
    // Runs of `batch` finished prompts go to on_batch in order.
    while (reported < prompts.size()) {
      const size_t end = std::min(prompts.size(), reported + batch);
      if (!std::all_of(rows.begin() + reported, rows.begin() + end, [](const Row& r) { return r.done; })) break;
      for (size_t i = reported; i < end; ++i) {
        if (!selection.each_alone) RETURN_IF_ERROR(rows[i].status);
        if (rows[i].status.ok()) {
          results[i] = Output(rows[i], prompts[i].size(), options);
        } else {
          results[i].status = rows[i].status;
        }
      }
      if (on_batch) RETURN_IF_ERROR(on_batch(reported, absl::MakeConstSpan(results).subspan(reported, end - reported)));
      reported = end;
    }
    if (reported == prompts.size()) break;
    RETURN_IF_ERROR(engine.Step());
  }
  engine_stats_ = engine.stats();
  return results;
}

absl::StatusOr<std::vector<Completion>> Generator::Decode(absl::Span<const Generation> generations,
                                                          const SamplingOptions& options) {
  std::vector<Completion> completions;
  for (const Generation& g : generations) {
    Completion c;
    c.status = g.status;
    if (!g.status.ok()) {
      completions.push_back(std::move(c));
      continue;
    }
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

absl::StatusOr<std::vector<Completion>> Generator::Complete(
    const std::vector<absl::StatusOr<std::vector<int>>>& encoded, const std::vector<bool>& unsafe,
    const SamplingOptions& options, const CompletionsDone& on_batch, const BatchSelection& selection) {
  std::vector<std::vector<int>> prompt_tokens(encoded.size());
  std::vector<absl::Status> errors(encoded.size());
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (!encoded[i].ok() && !selection.each_alone) return encoded[i].status();
    if (encoded[i].ok()) prompt_tokens[i] = *encoded[i];
    errors[i] = encoded[i].status();
  }
  std::vector<Completion> completions;
  const auto decode_batch = [&](size_t first, absl::Span<const Generation> batch) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<Completion> decoded, Decode(batch, options));
    for (size_t i = 0; i < decoded.size(); ++i) {
      if (unsafe[first + i] && decoded[i].status.ok()) decoded[i].generation = std::string(kUnsafeRequestAnswer);
    }
    if (on_batch) RETURN_IF_ERROR(on_batch(first, decoded));
    for (Completion& c : decoded) completions.push_back(std::move(c));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(GenerateRows(prompt_tokens, std::move(errors), options, decode_batch, selection).status());
  return completions;
}

absl::StatusOr<std::vector<Completion>> Generator::TextCompletion(const std::vector<std::string>& prompts,
                                                                  const SamplingOptions& options,
                                                                  const CompletionsDone& on_batch,
                                                                  const BatchSelection& selection) {
  if (tokenizer_ == nullptr) return absl::InternalError("TextCompletion needs a tokenizer");
  std::vector<absl::StatusOr<std::vector<int>>> encoded;
  for (const std::string& prompt : prompts) encoded.push_back(tokenizer_->Encode(prompt, /*bos=*/true, /*eos=*/false));
  return Complete(encoded, std::vector<bool>(prompts.size(), false), options, on_batch, selection);
}

absl::StatusOr<std::vector<Completion>> Generator::ChatCompletion(const std::vector<Dialog>& dialogs,
                                                                  const SamplingOptions& options,
                                                                  const CompletionsDone& on_batch,
                                                                  const BatchSelection& selection) {
  if (tokenizer_ == nullptr) return absl::InternalError("ChatCompletion needs a tokenizer");
  std::vector<absl::StatusOr<std::vector<int>>> encoded;
  std::vector<bool> unsafe;
  for (size_t i = 0; i < dialogs.size(); ++i) {
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(*tokenizer_, dialogs[i]);
    if (!prompt.ok()) {
      encoded.push_back(absl::InvalidArgumentError(
          absl::StrCat("dialog ", JobIndex(selection, i), ": ", prompt.status().message())));
      unsafe.push_back(false);
      continue;
    }
    encoded.push_back(std::move(prompt->tokens));
    unsafe.push_back(prompt->unsafe);
  }
  return Complete(encoded, unsafe, options, on_batch, selection);
}

}  // namespace llama
