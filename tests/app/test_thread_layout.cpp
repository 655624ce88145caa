// The per-rank thread count rule (app/thread_layout.h).
#include <gtest/gtest.h>

#include <cstdlib>

#include "zerotrain/app/thread_layout.h"
#include "zerotrain/app/train_setup.h"
#include "zerotrain/config/ds_config.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/cpu_isa.h"

using zt::plan_thread_layout;

TEST(ThreadLayout, UnboundRanksSplitTheMask) {
  EXPECT_EQ(plan_thread_layout(16, 16, 2, nullptr, nullptr).threads, 8);
  EXPECT_EQ(plan_thread_layout(2, 2, 2, nullptr, nullptr).threads, 1);
  EXPECT_EQ(plan_thread_layout(2, 2, 4, nullptr, nullptr).threads, 1);  // oversubscribed: still 1
  EXPECT_EQ(plan_thread_layout(2, 2, 1, nullptr, nullptr).threads, 2);
  EXPECT_FALSE(plan_thread_layout(2, 2, 1, nullptr, nullptr).from_env);
}

TEST(ThreadLayout, BoundRankUsesItsMask) {
  EXPECT_EQ(plan_thread_layout(4, 16, 4, nullptr, nullptr).threads, 4);  // --bind-to socket/l3 etc.
  EXPECT_EQ(plan_thread_layout(1, 16, 8, nullptr, nullptr).threads, 1);  // --bind-to core
}

TEST(ThreadLayout, UserVariablesWin) {
  EXPECT_EQ(plan_thread_layout(16, 16, 2, "3", nullptr).threads, 3);
  EXPECT_TRUE(plan_thread_layout(16, 16, 2, "3", nullptr).from_env);
  EXPECT_EQ(plan_thread_layout(16, 16, 2, nullptr, "5").threads, 5);
  EXPECT_EQ(plan_thread_layout(16, 16, 2, "4,2", nullptr).threads, 4);  // nested OpenMP list: outer level
  EXPECT_EQ(plan_thread_layout(16, 16, 2, "zero", nullptr).threads, 8);  // not a count: ignored
  EXPECT_EQ(plan_thread_layout(16, 16, 2, "0", nullptr).threads, 8);
  EXPECT_NE(zt::describe(plan_thread_layout(16, 16, 2, nullptr, nullptr)).find("8 threads per rank"), std::string::npos);
}

// offload_optimizer.cpuadam_cores_perc: the CPU optimizer's share of the rank's cores (rounded,
// at least 1). A 2-rank run on 2 cores has one core per rank, so only this test can show it.
TEST(OffloadThreads, CpuadamCoresPercSharesTheCores) {
  auto threads_for = [](const char* perc) {
    const std::string text = std::string(R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW"},
        "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "cpuadam_cores_perc": )") + perc + "}}}";
    return zt::engine_options_from(zt::parse_ds_config(text, "test", zt::ConfigOptions{})).offload.host_threads;
  };
  setenv("OMP_NUM_THREADS", "8", 1);
  EXPECT_EQ(threads_for("0.5"), 4);
  EXPECT_EQ(threads_for("0.8"), 6);  // 6.4 rounds to 6
  EXPECT_EQ(threads_for("0.01"), 1);
  unsetenv("OMP_NUM_THREADS");
}

// The run header's CPU kernel paths follow ZT_CPU_ISA and ZT_CPU_BF16_GEMM; bad values are input errors.
TEST(ThreadLayout, CpuKernelPathsNameTheIsaAndBf16Gemm) {
  unsetenv("ZT_CPU_ISA");
  setenv("ZT_CPU_BF16_GEMM", "widen", 1);
  EXPECT_NE(zt::cpu_kernel_paths().find("bf16 GEMM widened to fp32 + OpenBLAS sgemm"), std::string::npos);
  zt::ThreadLayout t = plan_thread_layout(2, 2, 1, nullptr, nullptr);
  t.cpu_kernels = zt::cpu_kernel_paths();
  EXPECT_NE(zt::describe(t).find("; CPU kernels "), std::string::npos);
  setenv("ZT_CPU_ISA", "scalar", 1);
  EXPECT_NE(zt::cpu_kernel_paths().find("CPU kernels scalar"), std::string::npos);
  for (const char* own : {"native", "dpbf16"}) {  // never at the scalar level
    setenv("ZT_CPU_BF16_GEMM", own, 1);
    EXPECT_THROW(zt::cpu_kernel_paths(), zt::InputError) << own;
  }
  setenv("ZT_CPU_ISA", "avx1024", 1);
  EXPECT_THROW(zt::cpu_kernel_paths(), zt::InputError);
  unsetenv("ZT_CPU_ISA");
  unsetenv("ZT_CPU_BF16_GEMM");
}

// The bf16 note: only for bf16 compute on the CPU device with a GEMM path that multiplies in fp32.
TEST(ThreadLayout, Bf16NoteOnlyWhereBf16GemmsMultiplyFp32) {
  unsetenv("ZT_CPU_ISA");
  for (const char* path : {"widen", "native"}) {
    setenv("ZT_CPU_BF16_GEMM", path, 1);
    EXPECT_NE(zt::bf16_cpu_note(true, true).find("does not speed steps up"), std::string::npos) << path;
    EXPECT_EQ(zt::bf16_cpu_note(false, true), "") << path;  // fp32 compute
    EXPECT_EQ(zt::bf16_cpu_note(true, false), "") << path;  // the CUDA device
  }
  if (zt::cpu::avx512_bf16_supported()) {
    setenv("ZT_CPU_BF16_GEMM", "dpbf16", 1);
    EXPECT_EQ(zt::bf16_cpu_note(true, true), "");
  }
  setenv("ZT_CPU_BF16_GEMM", "fast", 1);
  EXPECT_THROW(zt::bf16_cpu_note(true, true), zt::InputError);
  unsetenv("ZT_CPU_BF16_GEMM");
}
