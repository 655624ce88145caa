// Rank 0's epoch lines (train_progress.h epoch_line): one per epoch start, at the step whose batch
// reads the epoch's first sequence; several epochs inside one step give one line.
#include <gtest/gtest.h>

#include <string>

#include "../../csrc/app/train_progress.h"

TEST(EpochLine, EachEpochStartOnItsStep) {
  // S = 21 sequences per epoch, B = 8: epoch 2 starts at sequence 21 (step 3, k = 2), epoch 3 at
  // 42 (step 6), epoch 4 at 63 (step 8).
  std::string lines;
  for (int64_t k = 0; k < 8; ++k) lines += zt::epoch_line(k, 8, 21);
  EXPECT_EQ(lines,
            "data: epoch 2 begins at step 3 (global sequence 21)\n"
            "data: epoch 3 begins at step 6 (global sequence 42)\n"
            "data: epoch 4 begins at step 8 (global sequence 63)\n");
  // A batch that starts exactly on an epoch boundary.
  EXPECT_EQ(zt::epoch_line(2, 8, 16), "data: epoch 2 begins at step 3 (global sequence 16)\n");
  EXPECT_EQ(zt::epoch_line(1, 8, 16), "");
  // The first epoch is not announced; generated data (S = 0) has no epochs.
  EXPECT_EQ(zt::epoch_line(0, 8, 21), "");
  EXPECT_EQ(zt::epoch_line(5, 8, 0), "");
  // S smaller than the batch: several epochs begin during one step.
  EXPECT_EQ(zt::epoch_line(0, 12, 1), "data: epochs 2-12 begin during step 1 (1 sequences per epoch)\n");
  EXPECT_EQ(zt::epoch_line(1, 12, 5), "data: epochs 4-5 begin during step 2 (5 sequences per epoch)\n");
}
