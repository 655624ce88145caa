// metrics_writer.h — `zerotrain train`'s machine-readable outputs: the per-step metrics JSONL
// (--metrics) and the per-rank memory report JSON (--memory-report). Units are in the key names
// (_bytes, _ms, _per_s); tflops is 10^12 FLOP/s; mfu a fraction of peak (null: unknown peak).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "mfu.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/allocator.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/zero/engine.h"

namespace zt {

// One JSON object per line, per optimizer step, written as it goes (a StreamFile: a regular file
// or a device, every write checked). Rank 0 only (every rank with wall_clock_breakdown).
class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& path);  // InputError naming --metrics when unwritable
  // samples_done: samples trained so far, this step included. val_loss: the step's validation
  // loss (train --eval-every), written as "val_loss" (null on the steps that did not evaluate).
  void write_step(const StepStats& st, const StepThroughput& tp, int64_t samples_done, double tokens_per_sample,
                  const MemoryTracker& mem, std::optional<double> val_loss = std::nullopt);  // InputError naming the file when a write fails
  void close() { out_.close(); }            // fsync + close, checked (InputError)

 private:
  StreamFile out_;
};

// Gathers every rank's memory lines (Communicator::gather_strings) and writes
// {"stage", "world_size", "ranks": [...]} to `path` on rank 0. Every rank must call it.
void write_memory_report(const std::string& path, const ZeroEngine& engine, Communicator& comm, int stage);

}  // namespace zt
