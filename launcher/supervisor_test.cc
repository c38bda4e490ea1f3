#include "launcher/supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/fixtures/test_util.h"

namespace llama {
namespace {

using ::llama::testing::ReadFileOrEmpty;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

WorkerLaunch Shell(int rank, const std::string& script) {
  WorkerLaunch w;
  w.rank = rank;
  w.process.argv = {"/bin/sh", "-c", script};
  return w;
}

class SupervisorTest : public ::testing::Test {
 protected:
  SupervisorOptions Options(const std::string& name) {
    SupervisorOptions o;
    o.log_dir = std::string(getenv("TEST_TMPDIR")) + "/" + name;
    o.grace = 500ms;
    results_path_ = o.log_dir + ".results";
    results_ = std::fopen(results_path_.c_str(), "w");
    o.results = results_;
    return o;
  }
  std::string Results() {
    std::fflush(results_);
    return ReadFileOrEmpty(results_path_);
  }
  void TearDown() override {
    if (results_ != nullptr) std::fclose(results_);
  }
  std::string results_path_;
  FILE* results_ = nullptr;
};

TEST_F(SupervisorTest, ForwardsRankZeroAndLogsEveryRank) {
  SupervisorOptions o = Options("ok");
  absl::StatusOr<JobOutcome> outcome =
      SuperviseJob({Shell(0, "echo result line; echo progress >&2"), Shell(1, "echo quiet")}, o);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->success);
  EXPECT_EQ(Results(), "result line\n");
  EXPECT_THAT(ReadFileOrEmpty(RankLogPath(o.log_dir, 0)), HasSubstr("[rank 0] result line\n"));
  EXPECT_THAT(ReadFileOrEmpty(RankLogPath(o.log_dir, 0)), HasSubstr("[rank 0] progress\n"));
  EXPECT_EQ(ReadFileOrEmpty(RankLogPath(o.log_dir, 1)), "[rank 1] quiet\n");
}

TEST_F(SupervisorTest, OneFailureStopsTheOthers) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<JobOutcome> outcome =
      SuperviseJob({Shell(0, "sleep 30"), Shell(1, "sleep 0.2; exit 3"), Shell(2, "sleep 30")}, Options("fail"));
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->success);
  EXPECT_EQ(outcome->failed_rank, 1);
  EXPECT_EQ(outcome->failed_exit.Describe(), "exit code 3");
  EXPECT_THAT(outcome->failed_log, HasSubstr("rank1.log"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(SupervisorTest, WorkersIgnoringSigtermAreKilledAfterTheGrace) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<JobOutcome> outcome = SuperviseJob(
      {Shell(0, "trap '' TERM; sleep 30 & wait; sleep 30"), Shell(1, "kill -9 $$")}, Options("stubborn"));
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->failed_rank, 1);
  EXPECT_THAT(outcome->failed_exit.Describe(), HasSubstr("signal 9"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(SupervisorTest, SigtermToTheLauncherStopsTheJob) {
  // SIGTERM once a worker runs, which is after the supervisor's handler is
  // installed (it is set up before the first spawn), not after a guess.
  const std::string started = std::string(std::getenv("TEST_TMPDIR")) + "/sigterm_worker_started";
  std::remove(started.c_str());
  std::thread interrupter([&] {
    for (int i = 0; i < 1000 && access(started.c_str(), F_OK) != 0; ++i) std::this_thread::sleep_for(10ms);
    kill(getpid(), SIGTERM);
  });
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<JobOutcome> outcome =
      SuperviseJob({Shell(0, "touch " + started + "; sleep 30"), Shell(1, "sleep 30")}, Options("sigterm"));
  interrupter.join();
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->interrupted);
  EXPECT_FALSE(outcome->success);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(SupervisorTest, MissingWorkerBinary) {
  WorkerLaunch w;
  w.process.argv = {"/nonexistent/worker"};
  absl::StatusOr<JobOutcome> outcome = SuperviseJob({w}, Options("missing"));
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(outcome.status().message(), HasSubstr("/nonexistent/worker"));
}

}  // namespace
}  // namespace llama
