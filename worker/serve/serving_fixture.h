// For tests: the API server on a tiny fixture model (1 rank, 128
// positions, any free port, model name "tiny"), and an HTTP client for it.
// The Llama 2 layout's model by default; kLlama3Model for Llama 3's
// (tiktoken tokenizer, header-based chat, tool calling), with 1024
// positions: its small vocabulary spells Llama 3.1's tool prompt in more
// than 128 tokens.

#ifndef LLAMA_WORKER_SERVE_SERVING_FIXTURE_H_
#define LLAMA_WORKER_SERVE_SERVING_FIXTURE_H_

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "tokenizer/tokenizer_fixture.h"
#include "worker/collectives/communicator.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_loop.h"
#include "worker/model/golden_fixture.h"
#include "worker/model/transformer.h"
#include "worker/serve/api_server.h"

namespace llama::testing {

using nlohmann::json;

inline constexpr char kLlama2Model[] = "tiny_fp32_mp1";
inline constexpr char kLlama3Model[] = "llama3_bf16_mp1";

// The tokenizer of kLlama3Model (//tests/fixtures:tiktoken_fixture).
inline const Tokenizer& Llama3FixtureTokenizer() {
  static const Tokenizer* tokenizer = [] {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Load("tests/fixtures/tiktoken_fixture/tokenizer.model");
    EXPECT_TRUE(t.ok()) << t.status() << " HINT: the test needs //tests/fixtures:tiktoken_fixture as data";
    return t.ok() ? t->release() : nullptr;
  }();
  return *tokenizer;
}

// The data of each event of an SSE body, checking the framing: every event
// is "data: <payload>\n\n" and the last is "[DONE]".
inline std::vector<std::string> SseEvents(const std::string& body) {
  std::vector<std::string> events;
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    if (absl::StartsWith(event, ":")) continue;  // A keep-alive comment.
    EXPECT_TRUE(absl::StartsWith(event, "data: ")) << event;
    events.push_back(std::string(event.substr(6)));
  }
  EXPECT_TRUE(absl::EndsWith(body, "data: [DONE]\n\n")) << body;
  return events;
}

// A model that takes at least `delay` per step: the fixture model is so
// fast that a test could not otherwise act while a request runs.
class PacedModel final : public LanguageModel {
 public:
  PacedModel(LanguageModel* model, std::chrono::milliseconds delay) : model_(model), delay_(delay) {}
  const ModelLimits& limits() const override { return model_->limits(); }
  absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) override {
    std::this_thread::sleep_for(delay_);
    return model_->Forward(chunks);
  }

 private:
  LanguageModel* model_;
  std::chrono::milliseconds delay_;
};

// A server on the fixture model, and a client for it. With `step_delay`,
// each engine step takes at least that long.
class Serving {
 public:
  // `context` 0: the model's default above.
  explicit Serving(ApiServerOptions options = {}, std::chrono::milliseconds step_delay = {},
                   const std::string& model = kLlama2Model, int context = 0,
                   const EngineOptions& engine_options = {}) {
    if (context == 0) context = model == kLlama3Model ? 1024 : 128;
    TransformerOptions model_options;
    model_options.max_seq_len = context;
    model_options.max_batch_size = 8;
    model_ = MakeModel(model, &comm_, model_options);
    paced_ = std::make_unique<PacedModel>(model_.get(), step_delay);
    engine_ = std::make_unique<Engine>(paced_.get(), engine_options);
    loop_ = std::make_unique<EngineLoop>(engine_.get(), nullptr, std::chrono::milliseconds(1000));
    options.port = 0;
    options.model = "tiny";
    const Tokenizer& tokenizer = model == kLlama3Model ? Llama3FixtureTokenizer() : FixtureTokenizer();
    server_ = std::make_unique<ApiServer>(loop_.get(), &tokenizer, context, options);
    EXPECT_TRUE(server_->Start().ok());
    server_->SetReady();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(60, 0);
  }
  ~Serving() {
    server_->Stop();
    loop_->Stop();
  }

  httplib::Result Post(const std::string& path, const json& body, const httplib::Headers& headers = {}) {
    return client_->Post(path.c_str(), headers, body.dump(), "application/json");
  }
  json PostJson(const std::string& path, const json& body) {
    httplib::Result r = Post(path, body);
    EXPECT_TRUE(r) << "no response";
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }

  LanguageModel& model() { return *model_; }
  ApiServer& server() { return *server_; }
  EngineLoop& loop() { return *loop_; }
  httplib::Client& client() { return *client_; }

 private:
  LocalCommunicator comm_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<PacedModel> paced_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace llama::testing

#endif  // LLAMA_WORKER_SERVE_SERVING_FIXTURE_H_
