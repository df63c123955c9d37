// The binary's map from the library's option fields to its flags.

#include "flag_names.h"

#include <gtest/gtest.h>

namespace ferry::app {
namespace {

TEST(FlagNames, AFieldBecomesItsFlag) {
  EXPECT_EQ(in_flag_terms("ServiceOptions::max_batch must be at least 1", "http"),
            "--max-batch must be at least 1");
  EXPECT_EQ(
      in_flag_terms("HttpOptions::max_request_line must be between 16 and HttpOptions::max_head", "http"),
      "--max-request-line must be between 16 and --max-head");
}

TEST(FlagNames, OnlyAWholeNameIsReplaced) {
  // max_batch is a prefix of max_batch_tokens: the longer field keeps its own flag.
  EXPECT_EQ(in_flag_terms(
                "ServiceOptions::max_batch_tokens must be at least ServiceOptions::max_tokens (256)", "http"),
            "--max-batch-tokens must be at least --max-tokens (256)");
  EXPECT_EQ(in_flag_terms("MyServiceOptions::max_batch", "http"), "MyServiceOptions::max_batch");
}

TEST(FlagNames, AFieldSetByDifferentFlagsGetsTheSubcommandsFlag) {
  EXPECT_EQ(in_flag_terms("WorkerOptions::gpu 7: there are only 1 CUDA device(s)", "orchestrator"),
            "--gpu-pci-addr 7: there are only 1 CUDA device(s)");
  EXPECT_EQ(in_flag_terms("WorkerOptions::gpu 7: there are only 1 CUDA device(s)", "http"),
            "--gpu 7: there are only 1 CUDA device(s)");
}

TEST(FlagNames, ANameWithNoFlagStays) {
  EXPECT_EQ(in_flag_terms("tier 'floppy:3': unknown tier kind", "agent"),
            "tier 'floppy:3': unknown tier kind");
  EXPECT_EQ(in_flag_terms("kGpuNone", "http"), "kGpuNone");
  EXPECT_EQ(in_flag_terms("", "agent"), "");
}

}  // namespace
}  // namespace ferry::app
