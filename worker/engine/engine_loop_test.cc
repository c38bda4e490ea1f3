#include "worker/engine/engine_loop.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "worker/engine/cache_checking_model.h"

namespace llama {
namespace {

using ::llama::testing::CacheCheckingModel;

EngineRequest Request(int salt, int tokens, absl::Notification* done, std::atomic<int>* count, FinishReason* finish) {
  EngineRequest r;
  for (int i = 0; i < 6; ++i) r.prompt.push_back(1 + (i * 5 + salt) % 31);
  r.max_new_tokens = tokens;
  r.sink = [done, count, finish](const RequestEvent& e) {
    if (e.kind == RequestEvent::kToken) ++*count;
    if (e.kind == RequestEvent::kFinished) {
      *finish = e.finish;
      done->Notify();
    }
  };
  return r;
}

TEST(EngineLoopTest, RequestsFromManyThreadsAreServedAndTheIdleLoopBeats) {
  CacheCheckingModel model({});
  Engine engine(&model, {});
  std::atomic<int> beats{0};
  EngineLoop loop(&engine, [&] {
    ++beats;
    return absl::OkStatus();
  }, std::chrono::milliseconds(20));
  std::vector<absl::Notification> done(8);
  std::vector<std::atomic<int>> tokens(8);
  std::vector<FinishReason> finish(8, FinishReason::kError);
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] { ASSERT_TRUE(loop.Submit(Request(i, 5, &done[i], &tokens[i], &finish[i])).ok()); });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(done[i].WaitForNotificationWithTimeout(absl::Seconds(10))) << i;
    EXPECT_NE(finish[i], FinishReason::kError);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_GE(beats.load(), 2) << "no heartbeat while idle";
  EXPECT_TRUE(loop.status().ok());
}

TEST(EngineLoopTest, StopFinishesWhatIsInFlightThenRefuses) {
  CacheCheckingModel model({});
  Engine engine(&model, {});
  EngineLoop loop(&engine, nullptr, std::chrono::milliseconds(1000));
  absl::Notification done;
  std::atomic<int> tokens{0};
  FinishReason finish = FinishReason::kError;
  EngineRequest r = Request(1, 40, &done, &tokens, &finish);
  r.stop_ids.clear();
  ASSERT_TRUE(loop.Submit(std::move(r)).ok());
  loop.Stop();
  loop.Join();
  EXPECT_TRUE(done.HasBeenNotified());
  EXPECT_EQ(tokens.load(), 40);
  EXPECT_EQ(finish, FinishReason::kLength);
  absl::Notification never;
  EXPECT_EQ(loop.Submit(Request(2, 1, &never, &tokens, &finish)).status().message(), "the server is shutting down");
}

TEST(EngineLoopTest, AFailureEndsTheRequestsAndIsKept) {
  CacheCheckingModel model({});
  model.fail_at_step = 1;
  Engine engine(&model, {});
  EngineLoop loop(&engine, nullptr, std::chrono::milliseconds(1000));
  absl::Notification done;
  std::atomic<int> tokens{0};
  FinishReason finish = FinishReason::kLength;
  ASSERT_TRUE(loop.Submit(Request(1, 40, &done, &tokens, &finish)).ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(finish, FinishReason::kError);
  loop.Join();
  EXPECT_EQ(loop.status().message(), "rank 1 is gone");
  EXPECT_EQ(loop.Submit(Request(2, 1, &done, &tokens, &finish)).status().message(),
            "the engine failed: rank 1 is gone");
}

}  // namespace
}  // namespace llama
