// For tests: the API server on the tiny fixture model (1 rank, 128
// positions, any free port, model name "tiny"), and an HTTP client for it.

#ifndef LLAMA_WORKER_SERVE_SERVING_FIXTURE_H_
#define LLAMA_WORKER_SERVE_SERVING_FIXTURE_H_

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_fixture.h"
#include "worker/collectives/communicator.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_loop.h"
#include "worker/model/golden_fixture.h"
#include "worker/model/transformer.h"
#include "worker/serve/api_server.h"

namespace llama::testing {

using nlohmann::json;

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
  explicit Serving(ApiServerOptions options = {}, std::chrono::milliseconds step_delay = {}) {
    TransformerOptions model_options;
    model_options.max_seq_len = 128;
    model_options.max_batch_size = 8;
    model_ = MakeModel("tiny_fp32_mp1", &comm_, model_options);
    paced_ = std::make_unique<PacedModel>(model_.get(), step_delay);
    engine_ = std::make_unique<Engine>(paced_.get(), EngineOptions{});
    loop_ = std::make_unique<EngineLoop>(engine_.get(), nullptr, std::chrono::milliseconds(1000));
    options.port = 0;
    options.model = "tiny";
    server_ = std::make_unique<ApiServer>(loop_.get(), &FixtureTokenizer(), 128, options);
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
