// Resident memory by kind from smaps text (zerotrain/core/process_memory.h), and this process's.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "zerotrain/core/process_memory.h"

namespace {

std::map<std::string, int64_t> rows_of(const zt::ProcessMemory& p) {
  std::map<std::string, int64_t> m;
  for (const zt::ProcessMemoryRow& r : p.rows) m[r.name] = r.bytes;
  return m;
}

TEST(ProcessMemory, SmapsRowsByKind) {
  const std::string smaps =
      "7f0000000000-7f0000100000 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libopenblas.so.0\n"
      "Size:               1024 kB\nRss:                 100 kB\nPss:                  50 kB\n"
      "AnonHugePages:         0 kB\nVmFlags: rd ex mr mw me\n"
      "7f0000100000-7f0000200000 rw-s 00000000 00:1a 456 /dev/shm/vader_segment.host.1.0\n"
      "Rss:                  20 kB\n"
      "55b000000000-55b000100000 rw-p 00000000 00:00 0                          [heap]\n"
      "Rss:                 300 kB\n"
      "7f0000300000-7f0000400000 rw-p 00000000 00:00 0 \n"
      "Rss:                  40 kB\n"
      "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]\n"
      "Rss:                   8 kB\n"
      "7f0000500000-7f0000501000 r--p 00000000 08:01 789 /etc/ld.so.cache.d/data.bin\n"
      "Rss:                   4 kB\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
      "Rss:                   0 kB\n";
  const zt::ProcessMemory p = zt::parse_smaps(smaps);
  const auto m = rows_of(p);
  EXPECT_EQ(m.at("libraries"), 100 * 1024 + 4 * 1024);  // ".so" in the path counts as a library
  EXPECT_EQ(m.at("mpi_shared_memory"), 20 * 1024);
  EXPECT_EQ(m.at("heap_anonymous"), 340 * 1024);
  EXPECT_EQ(m.at("main_stack"), 8 * 1024);
  EXPECT_EQ(m.at("other"), 0);
  EXPECT_EQ(p.resident, 472 * 1024);
}

TEST(ProcessMemory, ThisProcessAddsUpToItsResidentSize) {
  const zt::ProcessMemory p = zt::read_process_memory();
  ASSERT_TRUE(p.available);
  EXPECT_GT(rows_of(p).at("libraries"), 0);
  EXPECT_GT(p.vm_hwm, 0);
  EXPECT_GE(p.vm_hwm, p.vm_rss);
  // smaps and status are read a moment apart: the rows' sum is within 10% of VmRSS.
  EXPECT_NEAR(static_cast<double>(p.resident), static_cast<double>(p.vm_rss), 0.1 * static_cast<double>(p.vm_rss));
}

}  // namespace
