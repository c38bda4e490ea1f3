// The server on the tiny fixture model, over real HTTP (cpp-httplib's
// client, and raw sockets where the bytes matter): answers equal to the
// batch job's, SSE framing, stop strings, seeds, n, chat, every error
// status, and a client that leaves mid-stream.

#include "worker/serve/api_server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "tokenizer/tokenizer_fixture.h"
#include "worker/batch/generator.h"
#include "worker/collectives/communicator.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_loop.h"
#include "worker/engine/kv_block_pool.h"
#include "worker/serve/serving_fixture.h"

namespace llama {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::llama::testing::Serving;
using ::llama::testing::SseEvents;

const char kPrompt[] = "I believe the meaning of life is";

// A raw TCP connection to the server on 127.0.0.1 (-1 if refused).
int ConnectTo(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(ApiServerTest, HealthModelsMetricsAndUnknownRoutes) {
  Serving s;
  httplib::Result health = s.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  json models = json::parse(s.client().Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  httplib::Result missing = s.client().Get("/v1/nothing");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["message"], "no route for GET /v1/nothing");
  s.server().SetDraining();
  EXPECT_EQ(s.client().Get("/health")->status, 503);
  httplib::Result refused = s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}});
  EXPECT_EQ(refused->status, 503);
  EXPECT_THAT(s.client().Get("/metrics")->body, HasSubstr("llama_request_failure_total{reason=\"unavailable\"} 1"));
}

// Speculative decoding behind the API: the same answers (text and
// log-probabilities) as without it, and /metrics counts the guesses and
// the kept ones by source, as vLLM names them.
TEST(ApiServerTest, SpeculationChangesNoAnswerAndIsCounted) {
  EngineOptions guessing;
  guessing.speculative_tokens = 4;
  guessing.speculation_priced = false;  // Every guess found: this tiny model's steps cost next to nothing.
  Serving plain, speculative({}, {}, testing::kLlama2Model, 0, guessing);
  for (const char* prompt : {kPrompt, "Once upon a time", "the the the the the"}) {
    const json request = {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 40}, {"temperature", 0},
                          {"logprobs", 2}};
    const json a = plain.PostJson("/v1/completions", request), b = speculative.PostJson("/v1/completions", request);
    EXPECT_EQ(b["choices"][0]["text"], a["choices"][0]["text"]) << prompt;
    EXPECT_EQ(b["choices"][0]["logprobs"], a["choices"][0]["logprobs"]) << prompt;
  }
  const std::string metrics = speculative.client().Get("/metrics")->body;
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           R"(llama_spec_decode_num_draft_tokens_total.source="ngram". [1-9][0-9]*)"));
  EXPECT_THAT(metrics, HasSubstr("# TYPE llama_spec_decode_num_accepted_tokens_total counter\n"));
  EXPECT_THAT(plain.client().Get("/metrics")->body, ::testing::Not(HasSubstr("llama_spec_decode")));
}

// Each histogram counts the requests it describes once: after 5 answered
// requests (one streamed, one with n = 2), time to first token and
// end-to-end latency count 5 each (a request with n = 2 is one request;
// its first token counts once per choice, as vLLM counts sequences).
TEST(ApiServerTest, MetricsCountEachRequestOnce) {
  Serving s;
  for (int i = 0; i < 3; ++i) s.PostJson("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 3}});
  s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 3}, {"stream", true}});
  s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 3}, {"n", 2}});
  s.Post("/v1/completions", {{"model", "nope"}, {"prompt", "x"}});
  const std::string metrics = s.client().Get("/metrics")->body;
  EXPECT_THAT(metrics, HasSubstr("\nllama_requests_total 6\n"));
  EXPECT_THAT(metrics, HasSubstr("\nllama_request_success_total 5\n"));
  EXPECT_THAT(metrics, HasSubstr("\nllama_e2e_request_latency_seconds_count 5\n"));
  EXPECT_THAT(metrics, HasSubstr("\nllama_time_to_first_token_seconds_count 6\n"));  // 4 + 2 choices.
  EXPECT_THAT(metrics, HasSubstr("\nllama_request_queue_time_seconds_count 6\n"));
  EXPECT_THAT(metrics, HasSubstr("llama_request_failure_total{reason=\"invalid\"} 1\n"));
}

// /v1/kv_cache_events: the blocks the engine cached for a prompt, with the
// chain hashes a router computes from the prompt's tokens, read on from
// `next`; a bad `after` is a 400.
TEST(ApiServerTest, CacheEventsNameThePromptsBlocks) {
  Serving s;
  const std::string prompt = "the events of the cache name every full block of this prompt, sixteen tokens each";
  s.PostJson("/v1/completions", {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 1}});
  const json events = json::parse(s.client().Get("/v1/kv_cache_events?after=0")->body);
  const int64_t block_size = events["block_size"];
  ASSERT_GT(block_size, 0);
  EXPECT_FALSE(events["reset"].get<bool>());
  const std::vector<int> tokens = *testing::FixtureTokenizer().Encode(prompt, true, false);
  ASSERT_GE(static_cast<int64_t>(tokens.size()), block_size);
  uint64_t parent = 0;
  std::vector<std::string> expected;
  for (int64_t b = 0; (b + 1) * block_size <= static_cast<int64_t>(tokens.size()); ++b) {
    parent = KvBlockPool::ChainHash(parent, absl::MakeConstSpan(tokens).subspan(b * block_size, block_size));
    expected.push_back(absl::StrFormat("%016x", parent));
  }
  std::vector<std::string> stored;
  for (const json& e : events["events"]) {
    if (e["stored"]) stored.push_back(e["hash"]);
  }
  ASSERT_GE(stored.size(), expected.size());
  EXPECT_EQ(std::vector<std::string>(stored.begin(), stored.begin() + expected.size()), expected);
  const uint64_t next = events["next"];
  EXPECT_TRUE(json::parse(s.client().Get(absl::StrCat("/v1/kv_cache_events?after=", next).c_str())->body)["events"]
                  .empty());
  EXPECT_EQ(s.client().Get("/v1/kv_cache_events?after=x")->status, 400);
}

// The server's greedy completion is the batch job's (the same engine path).
TEST(ApiServerTest, GreedyCompletionEqualsTheBatchJob) {
  Serving s;
  json answer = s.PostJson("/v1/completions",
                           {{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}});
  SamplingOptions greedy;
  greedy.sampling.token.temperature = 0;
  greedy.max_gen_len = 12;
  Generator generator(&s.model(), &testing::FixtureTokenizer());
  absl::StatusOr<std::vector<Completion>> job = generator.TextCompletion({kPrompt}, greedy);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(answer["object"], "text_completion");
  EXPECT_EQ(answer["choices"][0]["text"], (*job)[0].generation);
  EXPECT_EQ(answer["usage"]["completion_tokens"], (*job)[0].token_ids.size() + (answer["choices"][0]["finish_reason"] == "stop" ? 1 : 0));
  EXPECT_EQ(answer["usage"]["prompt_tokens"], testing::FixtureTokenizer().Encode(kPrompt, true, false)->size());
}

// A prompt as token ids (OpenAI's other form) is the same prompt as its text.
TEST(ApiServerTest, PromptsAsTokenIds) {
  Serving s;
  const std::vector<int> ids = *testing::FixtureTokenizer().Encode(kPrompt, /*bos=*/true, /*eos=*/false);
  const json request = {{"model", "tiny"}, {"max_tokens", 8}, {"temperature", 0}};
  json as_text = request, as_ids = request, as_batch = request;
  as_text["prompt"] = kPrompt;
  as_ids["prompt"] = ids;
  as_batch["prompt"] = {ids, ids};
  const json a = s.PostJson("/v1/completions", as_text), b = s.PostJson("/v1/completions", as_ids);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  EXPECT_EQ(a["usage"], b["usage"]);
  EXPECT_EQ(s.PostJson("/v1/completions", as_batch)["choices"].size(), 2u);
}

TEST(ApiServerTest, StreamingSendsTheSameTextInSseChunks) {
  Serving s;
  const json request = {{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", 20}, {"temperature", 0}};
  const json whole = s.PostJson("/v1/completions", request);
  json streamed = request;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  httplib::Result r = s.Post("/v1/completions", streamed);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<std::string> events = SseEvents(r->body);
  ASSERT_GE(events.size(), 3u);
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    text += chunk["choices"][0]["text"].get<std::string>();
    // The finish reason comes on the choice's last chunk only.
    EXPECT_EQ(chunk["choices"][0]["finish_reason"].is_null(), i + 3 < events.size()) << events[i];
  }
  EXPECT_EQ(text, whole["choices"][0]["text"]);
  const json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], whole["usage"]);
}

TEST(ApiServerTest, StopStringsCutTheTextAndNeverLeak) {
  Serving s;
  const json base = {{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", 30}, {"temperature", 0}};
  const std::string full = s.PostJson("/v1/completions", base)["choices"][0]["text"];
  ASSERT_GT(full.size(), 12u);
  const std::string stop = full.substr(full.size() / 2, 3);
  const std::string expected = full.substr(0, full.find(stop));
  json with_stop = base;
  with_stop["stop"] = {stop, "never appears"};
  const json answer = s.PostJson("/v1/completions", with_stop);
  EXPECT_EQ(answer["choices"][0]["text"], expected);
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "stop");
  with_stop["stream"] = true;
  std::string streamed;
  const std::vector<std::string> events = SseEvents(s.Post("/v1/completions", with_stop)->body);
  for (size_t i = 0; i + 1 < events.size(); ++i) streamed += json::parse(events[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(streamed, expected);
}

TEST(ApiServerTest, SeedsReproduceAndChoicesAreIndependent) {
  Serving s;
  const json request = {{"model", "tiny"}, {"prompt", {kPrompt, "Simply put,"}}, {"max_tokens", 16},
                        {"temperature", 0.9}, {"seed", 7}, {"n", 2}, {"logprobs", 1}};
  const json a = s.PostJson("/v1/completions", request), b = s.PostJson("/v1/completions", request);
  ASSERT_EQ(a["choices"].size(), 4u);  // Two prompts x n = 2.
  EXPECT_EQ(a["choices"], b["choices"]);
  for (const json& choice : a["choices"]) {
    EXPECT_EQ(choice["logprobs"]["tokens"].size(), choice["logprobs"]["token_logprobs"].size());
  }
}

// logprobs k: the k most likely tokens at each position, most likely first,
// the chosen one among them (k + 1 entries at most); chat likewise.
TEST(ApiServerTest, TopLogprobsListTheMostLikelyTokens) {
  Serving s;
  const json answer = s.PostJson("/v1/completions",
                                 {{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", 6}, {"temperature", 0},
                                  {"logprobs", 3}});
  const json& logprobs = answer["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["top_logprobs"].size(), logprobs["tokens"].size());
  for (size_t i = 0; i < logprobs["tokens"].size(); ++i) {
    const json& top = logprobs["top_logprobs"][i];
    EXPECT_GE(top.size(), 2u);  // Pieces that decode alike share an entry.
    EXPECT_LE(top.size(), 4u);
    // Greedy: the chosen token is the most likely.
    float best = -1e30f;
    for (const auto& [text, lp] : top.items()) best = std::max(best, lp.get<float>());
    EXPECT_EQ(top[logprobs["tokens"][i].get<std::string>()], best) << i;
  }
  const json chat = s.PostJson("/v1/chat/completions",
                               {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                {"max_tokens", 4}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}});
  for (const json& token : chat["choices"][0]["logprobs"]["content"]) {
    ASSERT_EQ(token["top_logprobs"].size(), 2u);
    EXPECT_GE(token["top_logprobs"][0]["logprob"], token["top_logprobs"][1]["logprob"]);
    EXPECT_EQ(token["top_logprobs"][0]["logprob"], token["logprob"]);
  }
  httplib::Result bad = s.Post("/v1/chat/completions", {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                                        {"top_logprobs", 2}});
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("top_logprobs: needs"));
}

// logit_bias of +100 makes a token every greedy choice; the log-probability
// reported is still the model's (well below 0), as vLLM reports it. top_k,
// min_p, stop_token_ids and min_tokens reach the engine.
TEST(ApiServerTest, LogitBiasTopKAndMinPReachTheChoice) {
  Serving s;
  const int forced = 300;
  const json answer = s.PostJson("/v1/completions", {{"model", "tiny"},
                                                     {"prompt", kPrompt},
                                                     {"max_tokens", 4},
                                                     {"temperature", 0},
                                                     {"logprobs", 0},
                                                     {"return_tokens_as_token_ids", true},
                                                     {"logit_bias", {{std::to_string(forced), 100}}}});
  const json& logprobs = answer["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), 4u) << answer.dump();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(logprobs["tokens"][i], "token_id:" + std::to_string(forced));
    EXPECT_LT(logprobs["token_logprobs"][i].get<double>(), -1.0);
  }
  const json plain = s.PostJson("/v1/completions", {{"model", "tiny"},
                                                    {"prompt", kPrompt},
                                                    {"max_tokens", 4},
                                                    {"temperature", 0},
                                                    {"logprobs", 0},
                                                    {"return_tokens_as_token_ids", true}});
  EXPECT_NE(plain["choices"][0]["logprobs"]["tokens"][0], "token_id:" + std::to_string(forced));
  // stop_token_ids end the greedy run at its second token; min_tokens holds that back.
  const std::string second = plain["choices"][0]["logprobs"]["tokens"][1];
  const int stop_id = std::stoi(second.substr(second.find(':') + 1));
  json stopped_request = {{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 0},
                          {"stop_token_ids", {stop_id}}};
  const json stopped = s.PostJson("/v1/completions", stopped_request);
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop") << stopped.dump();
  EXPECT_EQ(stopped["usage"]["completion_tokens"], 2);
  stopped_request["min_tokens"] = 4;
  const json held = s.PostJson("/v1/completions", stopped_request);
  EXPECT_EQ(held["choices"][0]["finish_reason"], "length") << held.dump();
  EXPECT_EQ(held["usage"]["completion_tokens"], 4);
  // top_k 1 (or min_p 1) at temperature 1.5 leaves only the greedy token.
  for (const json& filter : {json{{"top_k", 1}}, json{{"min_p", 1}}, json{{"top_k", -1}, {"min_p", 1.0}}}) {
    json request = {{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 1.5}, {"seed", 3},
                    {"logprobs", 0}, {"return_tokens_as_token_ids", true}};
    request.update(filter);
    EXPECT_EQ(s.PostJson("/v1/completions", request)["choices"][0]["logprobs"]["tokens"],
              plain["choices"][0]["logprobs"]["tokens"])
        << filter.dump();
  }
}

// vLLM's /tokenize and /detokenize: the ids the generation routes use.
TEST(ApiServerTest, TokenizeAndDetokenize) {
  Serving s;
  const std::vector<int> ids = *testing::FixtureTokenizer().Encode(kPrompt, /*bos=*/true, /*eos=*/false);
  const json tokenized = s.PostJson("/tokenize", {{"model", "tiny"}, {"prompt", kPrompt}});
  EXPECT_EQ(tokenized["tokens"], ids);
  EXPECT_EQ(tokenized["count"], ids.size());
  EXPECT_EQ(tokenized["max_model_len"], 128);
  const json bare = s.PostJson("/tokenize", {{"model", "tiny"}, {"prompt", kPrompt}, {"add_special_tokens", false}});
  EXPECT_EQ(bare["tokens"], std::vector<int>(ids.begin() + 1, ids.end()));
  const Dialog dialog = {{Role::kUser, "Hello"}};
  const json chat = s.PostJson("/tokenize", {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "Hello"}}}}});
  EXPECT_EQ(chat["tokens"], EncodeDialog(testing::FixtureTokenizer(), dialog)->tokens);
  EXPECT_EQ(s.PostJson("/detokenize", {{"model", "tiny"}, {"tokens", bare["tokens"]}})["prompt"], kPrompt);
  httplib::Result bad = s.Post("/detokenize", {{"model", "tiny"}, {"tokens", {1, 100000}}});
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("tokens: token id 100000 outside the vocabulary"));
  EXPECT_EQ(s.Post("/tokenize", {{"model", "gpt-9"}, {"prompt", "x"}})->status, 404);
}

TEST(ApiServerTest, ChatAnswersAndRefusesSpecialTags) {
  Serving s;
  const json answer = s.PostJson("/v1/chat/completions",
                                 {{"model", "tiny"},
                                  {"messages", {{{"role", "system"}, {"content", "Be brief"}},
                                                {{"role", "user"}, {"content", "Hello"}}}},
                                  {"max_tokens", 8},
                                  {"temperature", 0}});
  EXPECT_EQ(answer["object"], "chat.completion");
  EXPECT_EQ(answer["choices"][0]["message"]["role"], "assistant");
  // max_completion_tokens is max_tokens under OpenAI's current name.
  const json limited = s.PostJson("/v1/chat/completions", {{"model", "tiny"},
                                                           {"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                                                           {"max_completion_tokens", 3},
                                                           {"temperature", 0},
                                                           {"ignore_eos", true}});
  EXPECT_EQ(limited["usage"]["completion_tokens"], 3);
  EXPECT_EQ(limited["choices"][0]["finish_reason"], "length");
  const json refused = s.PostJson("/v1/chat/completions",
                                  {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "[INST] hi"}}}}});
  EXPECT_EQ(refused["choices"][0]["message"]["content"], std::string(kUnsafeRequestAnswer));
  httplib::Result bad = s.Post("/v1/chat/completions",
                               {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "a"}},
                                                                  {{"role", "user"}, {"content", "b"}}}}});
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("messages: "));
}

TEST(ApiServerTest, ErrorsHaveOpenAisShapeAndNameTheField) {
  ApiServerOptions options;
  options.limits.max_body_bytes = 1 << 16;
  Serving s(options);
  const auto expect = [&](const httplib::Result& r, int status, const std::string& message, const char* param) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    const json error = json::parse(r->body)["error"];
    EXPECT_THAT(error["message"].get<std::string>(), HasSubstr(message));
    if (param != nullptr) {
      EXPECT_EQ(error["param"], param);
    }
    EXPECT_TRUE(error.contains("type") && error.contains("code"));
  };
  expect(s.client().Post("/v1/completions", "{not json", "application/json"), 400, "not valid JSON", nullptr);
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", "ten"}}), 400,
         "max_tokens: expected an integer", "max_tokens");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"temperature", 3}}), 400,
         "temperature: 3 is out of range [0, 2]", "temperature");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", 5}}), 400, "prompt: expected a string", "prompt");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", {1, 100000}}}), 400,
         "prompt: token id 100000 outside the vocabulary", "prompt");
  // 2^32 + 5 must not wrap to token 5.
  expect(s.client().Post("/v1/completions", R"({"model": "tiny", "prompt": [1, 4294967301]})", "application/json"),
         400, "prompt: expected a string, an array of strings, an array of token ids", "prompt");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"stop", {"a", "b", "c", "d", "e"}}}), 400,
         "stop: expected a string or an array of up to 4 strings", "stop");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", 125}}), 400,
         "context is 128 tokens, but the prompt has 13 tokens and max_tokens is 125 (138 in all)", "prompt");
  const json hi = {{{"role", "user"}, {"content", "hi"}}};
  expect(s.Post("/v1/chat/completions",
                {{"model", "tiny"}, {"messages", hi}, {"max_tokens", 3}, {"max_completion_tokens", 4}}),
         400, "max_completion_tokens: differs from max_tokens", "max_completion_tokens");
  expect(s.Post("/v1/chat/completions", {{"model", "tiny"}, {"messages", hi}, {"functions", {{{"name", "f"}}}}}),
         400, "functions: not supported by this server", "functions");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"suffix", "}"}}), 400,
         "suffix: not supported by this server", "suffix");
  EXPECT_EQ(s.Post("/v1/chat/completions", {{"model", "tiny"},
                                            {"messages", hi},
                                            {"max_tokens", 1},
                                            {"response_format", {{"type", "text"}}},
                                            {"tools", json::array()},
                                            {"store", false},
                                            {"some_future_field", 1}})
                ->status,
            200);  // Neutral values, harmless fields and unknown ones (logged) pass.
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}, {"min_tokens", 3}}), 400,
         "min_tokens: 3 is more than max_tokens (2)", "min_tokens");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"stop_token_ids", {1, 100000}}}), 400,
         "stop_token_ids: token id 100000 outside the vocabulary", "stop_token_ids");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"stop_token_ids", {-1}}}), 400,
         "stop_token_ids: token id -1 outside the vocabulary", "stop_token_ids");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"stop_token_ids", "2"}}), 400,
         "stop_token_ids: expected an array of token ids", "stop_token_ids");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"logit_bias", {1, 2}}}), 400,
         "logit_bias: expected an object of token ids to numbers", "logit_bias");
  expect(s.Post("/tokenize", {{"model", "tiny"}, {"prompt", 5}}), 400, "prompt: expected a string", "prompt");
  expect(s.Post("/detokenize", {{"model", "tiny"}}), 400, "tokens: required", "tokens");
  expect(s.Post("/detokenize", {{"model", "tiny"}, {"tokens", {"a"}}}), 400, "tokens: expected an array of token ids",
         "tokens");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"top_k", -2}}), 400,
         "top_k: -2 is out of range [-1, ", "top_k");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"min_p", 1.5}}), 400,
         "min_p: 1.5 is out of range [0, 1]", "min_p");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"typical_p", 0}}), 400,
         "typical_p: 0 is out of range (0, 1]", "typical_p");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"presence_penalty", -3}}), 400,
         "presence_penalty: -3 is out of range [-2, 2]", "presence_penalty");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"logit_bias", {{"the", 1}}}}), 400,
         "logit_bias: key \"the\": expected a token id", "logit_bias");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"logit_bias", {{"5", 101}}}}), 400,
         "logit_bias: token 5: expected a number from -100 to 100", "logit_bias");
  expect(s.Post("/v1/chat/completions",
                {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"logit_bias", {{"100000", 1}}}}),
         400, "logit_bias: token id 100000 outside the vocabulary", "logit_bias");
  expect(s.Post("/v1/completions", {{"model", "gpt-9"}, {"prompt", "x"}}), 404, "the model `gpt-9` does not exist",
         "model");
  expect(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", std::vector<std::string>(20, "x")}, {"n", 16}}),
         400, "20 prompts x n = 16 asks for 320 completions; at most 256 per request", "n");
  expect(s.client().Post("/v1/completions", std::string(1 << 17, ' '), "application/json"), 413,
         "larger than 65536 bytes", nullptr);

  ApiServerOptions keyed;
  keyed.api_keys = {"s3cret"};
  Serving k(keyed);
  expect(k.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}}), 401, "API key", nullptr);
  expect(k.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}}, {{"Authorization", "Bearer s3cre"}}), 401,
         "API key", nullptr);
  EXPECT_EQ(k.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 1}},
                   {{"Authorization", "Bearer s3cret"}})
                ->status,
            200);
  EXPECT_EQ(k.client().Get("/health")->status, 200);  // Open without a key.

  ApiServerOptions queue;
  queue.max_queue = 0;
  Serving q(queue);
  httplib::Result full = q.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}});
  expect(full, 429, "requests are waiting", nullptr);
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");
}

// A streaming client that goes away: its request is cancelled at the next
// step, and the server goes on serving.
TEST(ApiServerTest, AClientThatLeavesCancelsItsRequest) {
  Serving s;
  const int fd = ConnectTo(s.server().port());
  ASSERT_GE(fd, 0);
  const std::string body =
      json{{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", 110}, {"stream", true}, {"ignore_eos", true}}.dump();
  const std::string request = absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                           "application/json\r\nContent-Length: ",
                                           body.size(), "\r\n\r\n", body);
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  char buffer[256];
  ASSERT_GT(::read(fd, buffer, sizeof buffer), 0);  // The stream began.
  ::close(fd);
  for (int i = 0; i < 100 && s.loop().stats().running > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(s.loop().stats().running, 0) << "the request kept running after its client left";
  EXPECT_LT(s.loop().stats().generated_tokens, 110);
  EXPECT_EQ(s.PostJson("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}})["object"],
            "text_completion");
}

// A request and its raw HTTP bytes, for the tests that hold a socket.
std::string RawPost(const std::string& path, const json& body, const std::string& extra_headers = "") {
  const std::string text = body.dump();
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n", extra_headers,
                      "Content-Length: ", text.size(), "\r\n\r\n", text);
}

// Waits for the engine to run something (true) or for 5 s.
bool AwaitRunning(Serving& s) {
  for (int i = 0; i < 500 && s.loop().stats().running == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return s.loop().stats().running > 0;
}

// A drain that runs out of time cancels what is in flight: a stream ends
// with vLLM's "abort" and an error event, a plain answer is a 503; neither
// says "length".
TEST(ApiServerTest, CancelledAnswersEndWithAnErrorNeverLength) {
  Serving s({}, std::chrono::milliseconds(5));
  const json long_request = {{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", 110}, {"ignore_eos", true}};
  // Streamed.
  std::string streamed;
  std::thread stream([&] {
    json request = long_request;
    request["stream"] = true;
    httplib::Result r = s.Post("/v1/completions", request);
    if (r) streamed = r->body;
  });
  ASSERT_TRUE(AwaitRunning(s));
  s.server().CancelAll();
  stream.join();
  const std::vector<std::string> events = SseEvents(streamed);
  ASSERT_GE(events.size(), 2u) << streamed;
  EXPECT_EQ(json::parse(events[events.size() - 3])["choices"][0]["finish_reason"], "abort") << streamed;
  const json error = json::parse(events[events.size() - 2]);
  EXPECT_EQ(error["error"]["code"], "cancelled") << streamed;
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("drain time ran out"));
  EXPECT_THAT(streamed, ::testing::Not(HasSubstr("\"length\"")));
  // Not streamed.
  int status = 0;
  std::string body;
  std::thread plain([&] {
    httplib::Result r = s.Post("/v1/completions", long_request);
    if (r) std::tie(status, body) = std::pair(r->status, r->body);
  });
  ASSERT_TRUE(AwaitRunning(s));
  s.server().CancelAll();
  plain.join();
  EXPECT_EQ(status, 503) << body;
  EXPECT_EQ(json::parse(body)["error"]["code"], "cancelled");
  EXPECT_THAT(s.client().Get("/metrics")->body, HasSubstr("llama_request_failure_total{reason=\"cancelled\"} 2"));
}

// A client that leaves before a plain (not streamed) answer cancels it too.
TEST(ApiServerTest, AClientThatLeavesBeforeAPlainAnswerCancelsIt) {
  Serving s({}, std::chrono::milliseconds(5));
  const int fd = ConnectTo(s.server().port());
  ASSERT_GE(fd, 0);
  const std::string request =
      RawPost("/v1/completions", {{"model", "tiny"}, {"prompt", kPrompt}, {"max_tokens", 110}, {"ignore_eos", true}});
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  if (!AwaitRunning(s)) {
    char reply[4096] = {};
    const ssize_t n = ::read(fd, reply, sizeof reply - 1);
    FAIL() << "never ran; the server said (" << n << "): " << reply;
  }
  ::close(fd);
  for (int i = 0; i < 100 && s.loop().stats().running > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(s.loop().stats().running, 0) << "the request kept running after its client left";
  EXPECT_LT(s.loop().stats().generated_tokens, 110);
}

// Text that cannot fit the context is refused before it is tokenized, and
// a bad key is refused before the body is looked at, on every keyed route.
TEST(ApiServerTest, HugePromptsAndBadKeysAreRefusedEarly) {
  ApiServerOptions options;
  options.api_keys = {"s3cret"};
  Serving s(options);
  const httplib::Headers key = {{"Authorization", "Bearer s3cret"}};
  const std::string huge(7 << 20, 'a');
  const auto start = std::chrono::steady_clock::now();
  httplib::Result r = s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", huge}}, key);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_THAT(json::parse(r->body)["error"]["message"].get<std::string>(),
              HasSubstr("7340032 bytes of text cannot fit in this model's context of 128 tokens"));
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  r = s.Post("/v1/chat/completions", {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", huge}}}}}, key);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "messages");
  r = s.Post("/tokenize", {{"model", "tiny"}, {"prompt", huge}}, key);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  // A bad key and a bad body: the key is what is reported.
  for (const char* path : {"/tokenize", "/detokenize", "/v1/completions", "/v1/chat/completions"}) {
    httplib::Result refused = s.client().Post(path, {{"Authorization", "Bearer wrong"}}, "{not json", "application/json");
    ASSERT_TRUE(refused) << path;
    EXPECT_EQ(refused->status, 401) << path << ": " << refused->body;
  }
  // Percent-encoding is not decoded: "s3cret" spelled "s%33cret" is not the key.
  EXPECT_EQ(s.Post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}}, {{"Authorization", "Bearer s%33cret"}})
                ->status,
            401);
}

// A second server on a busy port fails to start and names the port: a
// stale server cannot silently take part of the traffic.
TEST(ApiServerTest, ASecondServerOnTheSamePortFailsNamingIt) {
  Serving s;
  ApiServerOptions options;
  options.port = s.server().port();
  ApiServer second(&s.loop(), &testing::FixtureTokenizer(), 128, options);
  const absl::Status started = second.Start();
  EXPECT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.message()), HasSubstr(absl::StrCat("127.0.0.1:", s.server().port())));
  EXPECT_EQ(s.client().Get("/health")->status, 200);
}

// Bytes that are not HTTP, and headers that never finish, cost their own
// connection only: the server cuts them off and goes on serving.
TEST(ApiServerTest, GarbageAndSlowHeadersDoNotDisturbOthers) {
  ApiServerOptions options;
  options.limits.request_timeout = absl::Seconds(1);
  Serving s(options);
  const auto connect = [&] { return ConnectTo(s.server().port()); };
  const int garbage = connect();
  const std::string noise = "\x16\x03\x01\x02\x00 \xff\xfe not http at all\r\n\r\n";
  ASSERT_EQ(::write(garbage, noise.data(), noise.size()), static_cast<ssize_t>(noise.size()));
  // Answered with a 400 or closed: either way it is over for that connection.
  char reply[512] = {};
  if (::read(garbage, reply, sizeof reply - 1) > 0) {
    EXPECT_THAT(std::string(reply), HasSubstr("HTTP/1.1 400"));
  }
  ::close(garbage);
  const int slow = connect();
  const std::string half = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le";
  ASSERT_EQ(::write(slow, half.data(), half.size()), static_cast<ssize_t>(half.size()));
  // Served meanwhile.
  EXPECT_EQ(s.PostJson("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}})["object"],
            "text_completion");
  // Cut off after the read timeout (1 s): answered with an error, or closed.
  const auto start = std::chrono::steady_clock::now();
  std::memset(reply, 0, sizeof reply);
  if (::read(slow, reply, sizeof reply - 1) > 0) {
    EXPECT_THAT(std::string(reply), ::testing::StartsWith("HTTP/1.1 4"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ::close(slow);
  EXPECT_EQ(s.client().Get("/health")->status, 200);
}

}  // namespace
}  // namespace llama
