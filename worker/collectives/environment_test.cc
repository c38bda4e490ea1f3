#include "worker/collectives/environment.h"

#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<WorkerEnvironment> Read(const std::map<std::string, std::string>& vars) {
  return ReadWorkerEnvironment([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(EnvironmentTest, NoVariablesMeansOneRank) {
  absl::StatusOr<WorkerEnvironment> env = Read({});
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env->distributed);
  EXPECT_EQ(env->world_size, 1);
}

TEST(EnvironmentTest, TorchrunVariables) {
  absl::StatusOr<WorkerEnvironment> env =
      Read({{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"},
            {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29400"}, {"RENDEZVOUS_TOKEN", "s3cret"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_TRUE(env->distributed);
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->master_addr, "node0");
  EXPECT_EQ(env->master_port, 29400);
  EXPECT_EQ(env->token, "s3cret");
  EXPECT_EQ(env->listen_fd, -1);
  EXPECT_EQ(env->node_rank, 1);  // No GROUP_RANK: rank / LOCAL_WORLD_SIZE, as torchrun numbers nodes.
}

// What the launcher writes is what a worker reads: a worker's environment,
// written out again, is the same variables with the same values.
TEST(EnvironmentTest, VariablesReadBackAsWritten) {
  const std::map<std::string, std::string> torchrun = {
      {"RANK", "6"},        {"LOCAL_RANK", "2"},          {"WORLD_SIZE", "8"},       {"LOCAL_WORLD_SIZE", "4"},
      {"GROUP_RANK", "1"},  {"MASTER_ADDR", "node0.lan"}, {"MASTER_PORT", "29400"},  {"RENDEZVOUS_TOKEN", "s3cret"}};
  std::map<std::string, std::string> with_socket = torchrun;
  with_socket["RENDEZVOUS_LISTEN_FD"] = "7";
  for (const auto& vars : {torchrun, with_socket}) {
    absl::StatusOr<WorkerEnvironment> env = Read(vars);
    ASSERT_TRUE(env.ok()) << env.status();
    std::map<std::string, std::string> written;
    for (const auto& [name, value] : WorkerEnvironmentVariables(*env)) {
      EXPECT_TRUE(written.emplace(name, value).second) << name << " written twice";
    }
    EXPECT_EQ(written, vars);
  }
}

TEST(EnvironmentTest, ErrorsNameTheVariable) {
  struct Case {
    std::map<std::string, std::string> vars;
    const char* expected;
  };
  const Case cases[] = {
      {{{"RANK", "0"}}, "RANK and WORLD_SIZE must be set together"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"RENDEZVOUS_TOKEN", "t"}}, "RANK=\"2\": expected an integer in [0, 1]"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"RENDEZVOUS_TOKEN", "t"}}, "RANK=\"x\""},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=\"0\""},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}, {"RENDEZVOUS_TOKEN", "t"}}, "MASTER_PORT=\"70000\""},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}}, "RENDEZVOUS_TOKEN is not set"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"RENDEZVOUS_TOKEN", "t"}, {"RENDEZVOUS_LISTEN_FD", "-3"}},
       "RENDEZVOUS_LISTEN_FD=\"-3\""},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"RENDEZVOUS_TOKEN", "t"}, {"GROUP_RANK", "2"}},
       "GROUP_RANK=\"2\": expected an integer in [0, 1]"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<WorkerEnvironment> env = Read(c.vars);
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(env.status().message(), HasSubstr(c.expected));
  }
}

}  // namespace
}  // namespace llama
