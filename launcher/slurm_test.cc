#include "launcher/slurm.h"

#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(SlurmTest, ExpandsNodeLists) {
  struct Case {
    const char* list;
    std::vector<std::string> nodes;
  };
  const Case cases[] = {
      {"node1", {"node1"}},
      {"a,b,c", {"a", "b", "c"}},
      {"gpu[01-04,07]", {"gpu01", "gpu02", "gpu03", "gpu04", "gpu07"}},
      {"gpu[1-2],cpu[09-11]", {"gpu1", "gpu2", "cpu09", "cpu10", "cpu11"}},
      {"rack[1-2]-n[1-2]", {"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
      {"n[8-10]x", {"n8x", "n9x", "n10x"}},
      {"n[007]", {"n007"}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<std::string>> nodes = ExpandNodeList(c.list);
    ASSERT_TRUE(nodes.ok()) << c.list << ": " << nodes.status();
    EXPECT_EQ(*nodes, c.nodes) << c.list;
  }
}

TEST(SlurmTest, MalformedListsAreClearErrors) {
  struct Case {
    const char* list;
    const char* expected;
  };
  const Case cases[] = {
      {"", "empty"},
      {"gpu[01-04", "unbalanced '['"},
      {"gpu01-04]", "unbalanced ']'"},
      {"gpu[4-1]", "range \"4-1\" runs backwards"},
      {"gpu[a-b]", "\"a\" is not a number"},
      {"gpu[1-]", "bad range \"1-\""},
      {"a,,b", "empty host name"},
      {"g[[1]]", "nested"},
      {"g[0-99999999]", "too many nodes"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<std::string>> nodes = ExpandNodeList(c.list);
    EXPECT_EQ(nodes.status().code(), absl::StatusCode::kInvalidArgument) << c.list;
    EXPECT_THAT(nodes.status().message(), HasSubstr(c.expected)) << c.list;
    EXPECT_THAT(nodes.status().message(), HasSubstr(absl::StrCat("\"", c.list, "\""))) << c.list;
  }
}

absl::StatusOr<std::optional<SlurmPlacement>> Read(const std::map<std::string, std::string>& vars) {
  return ReadSlurmPlacement([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(SlurmTest, PlacementFromSrunVariables) {
  absl::StatusOr<std::optional<SlurmPlacement>> p =
      Read({{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"},
            {"SLURM_NNODES", "4"}, {"SLURM_JOB_NODELIST", "gpu[07-10]"}});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->has_value());
  EXPECT_EQ((*p)->node_rank, 2);
  EXPECT_EQ((*p)->nnodes, 4);
  EXPECT_EQ((*p)->master_addr, "gpu07");
  EXPECT_EQ((*p)->master_port, 20000 + 4242);
  // Whatever the job id, below the ephemeral port range (32768-60999).
  for (const char* id : {"11999", "12000", "987654321", "31999"}) {
    absl::StatusOr<std::optional<SlurmPlacement>> q =
        Read({{"SLURM_JOB_ID", id}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"},
              {"SLURM_NNODES", "1"}, {"SLURM_JOB_NODELIST", "gpu01"}});
    ASSERT_TRUE(q.ok() && q->has_value()) << id;
    EXPECT_GE((*q)->master_port, 20000) << id;
    EXPECT_LT((*q)->master_port, 32768) << id;
  }
  EXPECT_FALSE(Read({})->has_value());
  EXPECT_THAT(Read({{"SLURM_JOB_ID", "1"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"},
                    {"SLURM_NNODES", "2"}, {"SLURM_JOB_NODELIST", "a,b"}})
                  .status()
                  .message(),
              HasSubstr("--ntasks-per-node=1"));
}

// A batch script (`sbatch --wrap "launcher ..."`) has SLURM_PROCID=0 and the
// job's counts but no step: it is a plain launcher, not node 0 of a step.
TEST(SlurmTest, TheBatchScriptIsNotAStepTask) {
  absl::StatusOr<std::optional<SlurmPlacement>> p =
      Read({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NNODES", "2"}, {"SLURM_JOB_NODELIST", "n[1-2]"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->has_value());
}

// A step on part of the allocation: the step's counts and nodes, not the job's.
TEST(SlurmTest, AStepUsesItsOwnCounts) {
  absl::StatusOr<std::optional<SlurmPlacement>> p =
      Read({{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "3"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"},
            {"SLURM_NNODES", "4"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_STEP_NUM_NODES", "2"},
            {"SLURM_JOB_NODELIST", "n[1-4]"}, {"SLURM_STEP_NODELIST", "n[3-4]"}});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->has_value());
  EXPECT_EQ((*p)->nnodes, 2);
  EXPECT_EQ((*p)->node_rank, 1);
  EXPECT_EQ((*p)->master_addr, "n3");
}

TEST(SlurmTest, SbatchScript) {
  SbatchOptions o;
  o.nodes = 2;
  o.gpus_per_node = 8;
  o.workers_per_node = 8;
  o.partition = "gpu";
  const std::string script = SbatchScript(o, "/opt/llama/launcher", {"--ckpt_dir=/data/llama-2-70b", "--prompt=it's"});
  EXPECT_THAT(script, HasSubstr("#SBATCH --nodes=2\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --gpus-per-node=8\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --partition=gpu\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --exclusive\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --output=llama2-%j.out\n"));
  EXPECT_THAT(script, HasSubstr("export RENDEZVOUS_TOKEN="));
  EXPECT_THAT(script, HasSubstr("node0=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | sed -n 1p)\"\n"));
  EXPECT_THAT(script,
              HasSubstr("node0_addr=\"$(scontrol show node \"$node0\" -o | sed -n 's/.* NodeAddr=\\([^ ]*\\).*/\\1/p' || true)\"\n"));
  EXPECT_THAT(script, HasSubstr("srun --ntasks-per-node=1 --kill-on-bad-exit=1 --label '/opt/llama/launcher' "
                                "--nproc_per_node=8 --master_addr=\"${node0_addr:-$node0}\" "
                                "'--ckpt_dir=/data/llama-2-70b' '--prompt=it'\\''s'\n"));
}

// A partition without GPUs: workers per node, and no gres request (sbatch
// refuses --gpus-per-node there: "Invalid generic resource specification").
TEST(SlurmTest, SbatchScriptForCpuNodes) {
  SbatchOptions o;
  o.nodes = 2;
  o.workers_per_node = 3;
  o.extra = {"--qos=high", "--mem=0"};
  const std::string script = SbatchScript(o, "/shared/my tools/launcher", {});
  EXPECT_THAT(script, Not(HasSubstr("gpus")));
  EXPECT_THAT(script, HasSubstr("#SBATCH --qos=high\n#SBATCH --mem=0\n"));
  EXPECT_THAT(script, HasSubstr("--label '/shared/my tools/launcher' --nproc_per_node=3 --master_addr="));
}

}  // namespace
}  // namespace llama
