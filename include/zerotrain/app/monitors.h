// monitors.h — DeepSpeed's tensorboard and csv_monitor sections: rank 0 logs every optimizer
// step's numbers (the same as the --metrics JSONL row) against global_samples (the samples
// trained so far, this step included), under DeepSpeed's event names:
//   Train/Samples/train_loss, Train/Samples/lr, Train/Samples/loss_scale (fp16 only), and with
//   wall_clock_breakdown Train/Samples/elapsed_time_ms_{forward,backward,backward_inner,
//   backward_allreduce,step}; with train --eval-every, Train/Samples/val_loss on the steps that
//   evaluated.
// Files go in output_path/job_name (os.path.join's rules; "" -> the working directory):
//   tensorboard: events.out.tfevents.<unix time, 10 digits>.<host>.<pid>.0 (SummaryWriter's name),
//                created new (O_EXCL), one TFRecord per scalar (io/tfevents.h);
//   csv_monitor: <tag with '/' and ' ' -> '_'>.csv, appended to (DeepSpeed opens them "a+"), a
//                "step,<last tag component>" header first, rows "<step>,<value>" with CRLF line
//                ends and Python's repr of the value, as Python's csv module writes them.
// No file is opened through a symlink (O_NOFOLLOW) and only regular files are written.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zerotrain/config/ds_config.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/zero/engine.h"

namespace zt {

// Python's repr() of a float (shortest round-trip digits; exponent form below 1e-4 and from 1e16).
std::string python_float_repr(double v);

// output_path/job_name as os.path.join forms it ("" when both are empty means ".").
std::string monitor_dir(const MonitorConfig& m);

class Monitors {
 public:
  // Rank 0 only. Creates each enabled monitor's directory and opens all its files; InputError
  // naming the section and the path when that fails (a file where a directory must be, no
  // permission, a symlink or non-regular file where a file must be).
  // validation: the run evaluates (train --eval-every): the val_loss event exists.
  Monitors(const MonitorConfig& tensorboard, const MonitorConfig& csv, bool fp16, bool breakdown,
           bool validation = false);
  bool any() const { return !files_.empty(); }
  std::string describe() const;  // one line per monitor: where it writes, which events

  // Writes the step's events (flushed to the kernel). A failed write prints one warning and turns
  // that file's monitor off for the rest of the run; training goes on.
  // val_loss: the step's validation loss, on the steps that evaluated (else nothing is written
  // for that event).
  void write_step(const StepStats& st, int64_t global_samples, std::optional<double> val_loss = std::nullopt);

 private:
  struct File {
    std::string monitor;  // "tensorboard" or "csv_monitor"
    std::string path;
    std::string tag;      // csv_monitor: the one tag this file holds; tensorboard: ""
    UniqueFd fd;
    bool failed = false;
  };
  void append(File& f, const std::string& bytes);

  std::vector<std::string> tags_;
  std::vector<File> files_;
  std::vector<std::string> lines_;  // describe()
  bool fp16_, breakdown_;
};

}  // namespace zt
