// monitors.cpp — see include/zerotrain/app/monitors.h.
#include "zerotrain/app/monitors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "zerotrain/core/check.h"
#include "zerotrain/io/tfevents.h"

namespace zt {

namespace {

constexpr const char* kTrainLoss = "Train/Samples/train_loss";
constexpr const char* kLr = "Train/Samples/lr";
constexpr const char* kLossScale = "Train/Samples/loss_scale";
constexpr const char* kValLoss = "Train/Samples/val_loss";
constexpr const char* kBreakdownTags[] = {
    "Train/Samples/elapsed_time_ms_forward", "Train/Samples/elapsed_time_ms_backward",
    "Train/Samples/elapsed_time_ms_backward_inner", "Train/Samples/elapsed_time_ms_backward_allreduce",
    "Train/Samples/elapsed_time_ms_step"};

double unix_time_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The step's events, in DeepSpeed's order: train_loss, lr, loss_scale, the breakdown's fields.
std::vector<double> step_values(const StepStats& st, bool fp16, bool breakdown) {
  std::vector<double> v = {st.loss, st.lr};
  if (fp16) v.push_back(st.loss_scale);
  if (breakdown) {
    const StepBreakdown b = st.breakdown.value_or(StepBreakdown{});
    // DeepSpeed's backward timer spans its inner (compute) and allreduce timers; here the
    // allreduce part is the time the compute stream waited on communication during the step.
    const double allreduce = b.comm_exposed_ms + b.comm_wait_idle_ms;
    for (double x : {b.fwd_ms, b.bwd_ms + allreduce, b.bwd_ms, allreduce, b.optim_ms}) v.push_back(x);
  }
  return v;
}

// Creates `dir` (and its parents) and checks it is a directory.
void make_monitor_dir(const std::string& section, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  struct stat st {};
  if (ec || ::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw InputError(section + ": output_path/job_name " + dir + ": cannot create the directory (" +
                     (ec ? ec.message() : std::string(std::strerror(errno ? errno : ENOTDIR))) +
                     "); expected a directory, or a path where one can be created");
}

// Opens dir/name for writing, never through a symlink, and only a regular file.
UniqueFd open_output(const std::string& section, const std::string& path, bool exclusive) {
  const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (exclusive ? O_EXCL : O_APPEND);
  UniqueFd fd(::open(path.c_str(), flags, 0644));
  if (fd.get() < 0) {
    const int e = errno;
    throw InputError(section + ": cannot create " + path + " (" + std::strerror(e) + ")" +
                     (e == ELOOP ? "; the path is a symlink, which is never followed" : ""));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw InputError(section + ": " + path + " exists and is not a regular file; expected a regular file to append to");
  ::fcntl(fd.get(), F_SETFL, O_WRONLY | (exclusive ? 0 : O_APPEND));  // blocking writes from here on
  return fd;
}

std::string csv_name(const std::string& tag) {
  std::string f = tag;
  for (char& ch : f)
    if (ch == '/' || ch == ' ') ch = '_';
  return f + ".csv";
}

}  // namespace

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);  // shortest: d.ddde±XX
  const std::string sci(buf, r.ptr);
  const size_t epos = sci.find('e');
  const int exp = std::atoi(sci.c_str() + epos + 1);
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < epos; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {  // Python: exponent form when the decimal point is outside (-4, 16]
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];  // a double's exponent has at most 3 digits; room for any int keeps the format checker quiet
    std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + e;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const size_t point = static_cast<size_t>(exp) + 1;
  if (digits.size() <= point) return out + digits + std::string(point - digits.size(), '0') + ".0";
  return out + digits.substr(0, point) + "." + digits.substr(point);
}

std::string monitor_dir(const MonitorConfig& m) {
  std::string d;
  if (!m.job_name.empty() && m.job_name[0] == '/') d = m.job_name;
  else if (m.output_path.empty() || m.output_path.back() == '/') d = m.output_path + m.job_name;
  else d = m.output_path + "/" + m.job_name;
  return d.empty() ? "." : d;
}

Monitors::Monitors(const MonitorConfig& tensorboard, const MonitorConfig& csv, bool fp16, bool breakdown,
                   bool validation)
    : fp16_(fp16), breakdown_(breakdown) {
  tags_ = {kTrainLoss, kLr};
  if (fp16) tags_.push_back(kLossScale);
  if (breakdown) tags_.insert(tags_.end(), std::begin(kBreakdownTags), std::end(kBreakdownTags));
  if (validation) tags_.push_back(kValLoss);  // last: written only on the steps that evaluated
  std::string names;
  for (const std::string& t : tags_) names += (names.empty() ? "" : ", ") + t;
  if (tensorboard.enabled) {
    const std::string dir = monitor_dir(tensorboard);
    make_monitor_dir("tensorboard", dir);
    char name[512];
    std::snprintf(name, sizeof(name), "events.out.tfevents.%010lld.%s.%d.0", static_cast<long long>(unix_time_s()),
                  process_info().host.c_str(), static_cast<int>(::getpid()));
    const std::string path = dir + "/" + name;
    files_.push_back({"tensorboard", path, "", open_output("tensorboard", path, true)});
    append(files_.back(), tfrecord(file_version_event(unix_time_s())));
    lines_.push_back("tensorboard: " + path + " (" + names + ", step = global samples)");
  }
  if (csv.enabled) {
    const std::string dir = monitor_dir(csv);
    make_monitor_dir("csv_monitor", dir);
    for (const std::string& t : tags_) {
      const std::string path = dir + "/" + csv_name(t);
      files_.push_back({"csv_monitor", path, t, open_output("csv_monitor", path, false)});
      append(files_.back(), "step," + t.substr(t.rfind('/') + 1) + "\r\n");
    }
    lines_.push_back("csv_monitor: " + dir + "/<tag>.csv, one file per event (" + names + ", step = global samples)");
  }
  for (const File& f : files_)
    if (f.failed) throw InputError(f.monitor + ": cannot write " + f.path);
}

std::string Monitors::describe() const {
  std::string s;
  for (const std::string& l : lines_) s += "monitor: " + l + "\n";
  return s;
}

void Monitors::append(File& f, const std::string& bytes) {
  if (f.failed) return;
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t got = ::write(f.fd.get(), p, left);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      std::fprintf(stderr, "warning: %s: cannot write %s (%s); this monitor is off for the rest of the run (the "
                   "--metrics JSONL and the progress lines go on)\n", f.monitor.c_str(), f.path.c_str(),
                   got < 0 ? std::strerror(errno) : "no progress");
      for (File& g : files_)
        if (g.monitor == f.monitor) g.failed = true;
      return;
    }
    p += got;
    left -= static_cast<size_t>(got);
  }
}

void Monitors::write_step(const StepStats& st, int64_t global_samples, std::optional<double> val_loss) {
  std::vector<double> values = step_values(st, fp16_, breakdown_);
  if (val_loss) values.push_back(*val_loss);  // tags_ ends with kValLoss when the run evaluates
  ZT_CHECK(values.size() <= tags_.size(), "monitors: a val_loss for a run without --eval-every");
  const double now = unix_time_s();
  for (File& f : files_) {
    if (f.tag.empty()) {  // tensorboard: one record per scalar
      std::string records;
      for (size_t i = 0; i < values.size(); ++i)
        records += tfrecord(scalar_event(now, global_samples, tags_[i], static_cast<float>(values[i])));
      append(f, records);
      continue;
    }
    for (size_t i = 0; i < values.size(); ++i)
      if (tags_[i] == f.tag) append(f, std::to_string(global_samples) + "," + python_float_repr(values[i]) + "\r\n");
  }
}

}  // namespace zt
