#include "base/allowed_cpus.h"

#include <sched.h>

#include <gtest/gtest.h>

namespace llama {
namespace {

// Restricted to one CPU (as Slurm's task affinity or taskset would), the
// count is 1 whatever the machine has.
TEST(AllowedCpusTest, FollowsTheAffinityMask) {
  cpu_set_t original;
  ASSERT_EQ(sched_getaffinity(0, sizeof original, &original), 0);
  EXPECT_EQ(AllowedCpuCount(), CPU_COUNT(&original));
  int first = 0;
  while (!CPU_ISSET(first, &original)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  EXPECT_EQ(AllowedCpuCount(), 1);
  EXPECT_EQ(AllowedCpus(), std::vector<int>{first});
  ASSERT_EQ(sched_setaffinity(0, sizeof original, &original), 0);
}

}  // namespace
}  // namespace llama
