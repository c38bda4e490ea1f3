#include "launcher/process.h"

#include <signal.h>

#include <fstream>
#include <thread>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ProcessTest, RunsWithAnExplicitEnvironmentAndRedirects) {
  const std::string out = std::string(getenv("TEST_TMPDIR")) + "/out.txt";
  absl::StatusOr<std::unique_ptr<Process>> p =
      Process::Spawn({{"/bin/sh", "-c", "echo \"$GREETING\" and ${HOME:-no-home}; exit 3"}, {"GREETING=hello"}, out, ""});
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<ExitStatus> exit = (*p)->Wait(10s);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 3);
  EXPECT_EQ(exit->Describe(), "exit code 3");
  EXPECT_EQ(Slurp(out), "hello and no-home\n");  // Nothing inherited.
}

TEST(ProcessTest, SignalsReachTheWholeGroup) {
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn({{"/bin/sh", "-c", "sleep 30 & sleep 30; wait"}, {}, "", ""});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Wait(200ms).status().code(), absl::StatusCode::kDeadlineExceeded);
  const pid_t group = (*p)->pid();
  (*p)->SignalGroup(SIGKILL);
  absl::StatusOr<ExitStatus> exit = (*p)->Wait(10s);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_THAT(exit->Describe(), HasSubstr("signal 9"));
  // The background sleep was in the group too.
  for (int i = 0; i < 100 && ::kill(-group, 0) == 0; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_NE(::kill(-group, 0), 0) << "a process of the group survived";
}

TEST(ProcessTest, MissingProgramIsAClearError) {
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn({{"/nonexistent/worker"}, {}, "", ""});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(p.status().message(), HasSubstr("cannot run \"/nonexistent/worker\""));
}

}  // namespace
}  // namespace llama
