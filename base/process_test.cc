#include "base/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/allowed_cpus.h"
#include "base/durable_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(ProcessTest, RunsWithAnExplicitEnvironmentAndRedirects) {
  const std::string out = std::string(getenv("TEST_TMPDIR")) + "/out.txt";
  absl::StatusOr<std::unique_ptr<Process>> p =
      Process::Spawn({{"/bin/sh", "-c", "echo \"$GREETING\" and ${HOME:-no-home}; exit 3"}, {"GREETING=hello"}, out, ""});
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<ExitStatus> exit = (*p)->Wait(10s);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 3);
  EXPECT_EQ(exit->Describe(), "exit code 3");
  EXPECT_EQ(ReadFileToString(out).value_or(""), "hello and no-home\n");  // Nothing inherited.
}

// ProcessOptions::cpus is the child's affinity mask (a replica's share of
// the CPUs), whatever the parent's is.
TEST(ProcessTest, RunsOnTheCpusItIsGiven) {
  const std::string out = std::string(getenv("TEST_TMPDIR")) + "/cpus.txt";
  ProcessOptions options;
  options.argv = {"/bin/grep", "Cpus_allowed_list", "/proc/self/status"};
  options.stdout_path = out;
  options.cpus = {AllowedCpus().back()};
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn(options);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE((*p)->Wait(10s).ok());
  EXPECT_THAT(ReadFileToString(out).value_or(""),
              ::testing::MatchesRegex(absl::StrCat("Cpus_allowed_list:[ \t]*", options.cpus[0], "\n")));
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

TEST(ProcessTest, CapturesOutputThroughPipes) {
  ProcessOptions options;
  options.argv = {"/bin/sh", "-c", "echo out; echo err >&2"};
  options.capture_output = true;
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn(options);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->Wait(10s).ok());
  char buffer[16] = {};
  EXPECT_EQ(read((*p)->stdout_fd(), buffer, sizeof buffer), 4);
  EXPECT_STREQ(buffer, "out\n");
  EXPECT_EQ(read((*p)->stderr_fd(), buffer, sizeof buffer), 4);
}

// A child of a supervisor that is killed outright dies with it.
// The launcher hands rank 0 its listening socket this way; nothing else of
// the parent's may leak into a worker.
TEST(ProcessTest, KeepsOnlyTheInheritedDescriptor) {
  int kept[2], other[2];
  ASSERT_EQ(pipe2(kept, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(other, O_CLOEXEC), 0);
  ProcessOptions options;
  options.argv = {"/bin/sh", "-c", absl::StrCat("echo kept >&", kept[1], "; echo leaked >&", other[1], " 2>/dev/null")};
  options.inherit_fd = kept[1];
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn(options);
  ASSERT_TRUE(p.ok()) << p.status();
  close(kept[1]);
  close(other[1]);
  absl::StatusOr<ExitStatus> exit = (*p)->Wait(10s);
  ASSERT_TRUE(exit.ok());
  char buffer[16] = {};
  EXPECT_EQ(read(kept[0], buffer, sizeof buffer), 5);
  EXPECT_STREQ(buffer, "kept\n");
  EXPECT_EQ(read(other[0], buffer, sizeof buffer), 0);  // Closed on exec: the child could not write.
  close(kept[0]);
  close(other[0]);
}

TEST(ProcessTest, ChildrenDieWithTheirSupervisor) {
  const std::string pid_file = std::string(getenv("TEST_TMPDIR")) + "/grandchild.pid";
  // A forked helper plays the supervisor: it spawns a sleeper, then is killed.
  const pid_t helper = fork();
  if (helper == 0) {
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Spawn({{"/bin/sh", "-c", "echo $$ > " + pid_file + "; exec sleep 60"}, {}, "", ""});
    if (!p.ok()) _exit(1);
    (*p).release();  // Never destroyed: only the kernel's death signal can stop it.
    pause();
    _exit(0);
  }
  std::string pid_text;
  for (int i = 0; i < 200 && pid_text.empty(); ++i) {
    std::this_thread::sleep_for(10ms);
    pid_text = ReadFileToString(pid_file).value_or("");
  }
  ASSERT_FALSE(pid_text.empty());
  const pid_t child = std::stoi(pid_text);
  EXPECT_EQ(::kill(child, 0), 0);
  ::kill(helper, SIGKILL);
  waitpid(helper, nullptr, 0);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::this_thread::sleep_for(10ms);
    gone = ::kill(child, 0) != 0 ||
           ReadFileToString("/proc/" + pid_text + "/stat").value_or("").find(" Z ") != std::string::npos;
  }
  EXPECT_TRUE(gone) << "the child outlived its supervisor";
}

TEST(ProcessTest, MissingProgramIsAClearError) {
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn({{"/nonexistent/worker"}, {}, "", ""});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(p.status().message(), HasSubstr("cannot run \"/nonexistent/worker\""));
}

}  // namespace
}  // namespace llama
