// The CUDA allocator's out-of-memory line (check_cuda.h): formatted on the CPU, no GPU needed.
#include <gtest/gtest.h>

#include <string>

#include "zerotrain/core/check_cuda.h"

using namespace zt;

TEST(CudaOomMessage, NamesRequestCategoryFreeTotalAndTracked) {
  const size_t gib = size_t(1) << 30;
  const std::string msg = cuda_oom_message(3 * gib / 2, MemCategory::OptimMoments, 200u << 20, 140 * gib, 120 * gib,
                                           "cuda:0 (NVIDIA H200, 140.0 GiB)");
  const std::string want_request = "requested 1.50 GiB (1610612736 B) for " +
                                   std::string(mem_category_name(MemCategory::OptimMoments));
  EXPECT_NE(msg.find("out of device memory on cuda:0 (NVIDIA H200"), std::string::npos) << msg;
  EXPECT_NE(msg.find(want_request), std::string::npos) << msg;
  EXPECT_NE(msg.find("device has 200.00 MiB (209715200 B) free of 140.00 GiB (150323855360 B)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("zerotrain holds 120.00 GiB"), std::string::npos) << msg;
}

TEST(CudaOomMessage, SaysWhenFreeTotalIsUnknown) {
  const std::string msg = cuda_oom_message(4096, MemCategory::Params, 0, 0, 0, "cuda:1");
  EXPECT_NE(msg.find("requested 0.00 MiB (4096 B)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("free/total device memory unknown"), std::string::npos) << msg;
}
