// tune_confirm.cpp — `zerotrain tune --confirm K` (tune_confirm.h).
#include "tune_confirm.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

extern char** environ;

namespace zt {

namespace {

constexpr double kRunTimeoutS = 600;  // one confirmation run; a stuck run is killed, not waited for

// A scratch directory, removed with everything in it when this goes out of scope.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "zerotrain-tune-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw InputError("tune --confirm: cannot create a scratch directory under " + tmpl);
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::string self_exe() {
  if (process_info().exe.empty()) throw InputError("tune --confirm: cannot find this program's path (/proc/self/exe)");
  return process_info().exe;
}

// Runs argv with stdout and stderr to `log`, in its own process group; the exit status, or -1 when
// it ran past kRunTimeoutS (the group is killed).
int run_logged(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int err = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err != 0) throw InputError("tune --confirm: cannot start " + args[0] + ": " + std::strerror(err));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kRunTimeoutS);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Median step time (ms) of the steps after the warm-up in a --metrics file; NaN when none.
double measured_step_ms(const std::string& metrics) {
  std::ifstream f(metrics);
  std::vector<double> ms;
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("step_ms") && j.value("step", 0) > kConfirmWarmupSteps) ms.push_back(j["step_ms"].get<double>());
  }
  return ms.empty() ? std::nan("") : median_of(ms);
}

std::string data_spec(const ModelConfig& m) {
  return m.is_token_model() ? "markov:vocab=" + std::to_string(std::min<int64_t>(64, m.vocab_size())) : "teacher:";
}

std::vector<std::string> train_command(const TuneInputs& in, const std::string& config, const std::string& metrics,
                                       int64_t steps) {
  std::vector<std::string> a = {"mpirun", "-np", std::to_string(in.world), "--oversubscribe"};
  if (geteuid() == 0) a.push_back("--allow-run-as-root");
  for (const std::string& s : {self_exe(), std::string("train"), std::string("--device"), std::string("cpu"),
                               std::string("--config"), config, std::string("--model"), in.model_path,
                               std::string("--data"), data_spec(in.model), std::string("--steps"), std::to_string(steps),
                               std::string("--metrics"), metrics})
    a.push_back(s);
  a.insert(a.end(), in.client_flags.begin(), in.client_flags.end());
  return a;
}

}  // namespace

double median_of(std::vector<double> v) {
  ZT_CHECK(!v.empty(), "median of nothing");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  ZT_CHECK(a.size() == b.size(), "spearman: series of different lengths");
  const size_t n = a.size();
  if (n < 2) return 1;
  auto ranks = [n](const std::vector<double>& v) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n; ++i) r[order[i]] = static_cast<double>(i);
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  double d2 = 0;
  for (size_t i = 0; i < n; ++i) d2 += (ra[i] - rb[i]) * (ra[i] - rb[i]);
  const double nn = static_cast<double>(n);
  return 1 - 6 * d2 / (nn * (nn * nn - 1));
}

int confirm_top(const TuneInputs& in, const std::vector<TuneOutcome>& ranked, const ConfirmOptions& opt) {
  size_t k = 0;
  while (k < ranked.size() && k < static_cast<size_t>(opt.count) && ranked[k].fits) ++k;
  if (opt.steps <= kConfirmWarmupSteps)
    throw InputError("tune: --confirm-steps " + std::to_string(opt.steps) + ": expected more than the " +
                     std::to_string(kConfirmWarmupSteps) + " warm-up steps");
  const ScratchDir dir;
  std::vector<std::vector<double>> runs(k);
  for (size_t i = 0; i < k; ++i) {
    AtomicFile f(dir.file("c" + std::to_string(i) + ".json"), "tune --confirm", true);
    f.write(ranked[i].config.dump(2) + "\n");
    f.commit();
  }
  std::printf("confirm: the top %zu run on this machine (CPU backend, %d ranks, %lld steps, %lld interleaved rounds; "
              "median step time after %lld warm-up steps)\n",
              k, in.world, static_cast<long long>(opt.steps), static_cast<long long>(opt.rounds),
              static_cast<long long>(kConfirmWarmupSteps));
  for (int64_t round = 0; round < opt.rounds; ++round)
    for (size_t i = 0; i < k; ++i) {
      const std::string metrics = dir.file("m" + std::to_string(i) + ".jsonl"), log = dir.file("log.txt");
      const int rc = run_logged(train_command(in, dir.file("c" + std::to_string(i) + ".json"), metrics, opt.steps), log);
      const double ms = measured_step_ms(metrics);
      if (rc != 0 || std::isnan(ms)) {
        const std::string tail = read_regular_file(log, "tune --confirm log", int64_t(1) << 24);
        std::printf("candidate %zu failed (exit %d%s); its output:\n%s\n", i + 1, rc, rc < 0 ? ", timed out" : "",
                    tail.substr(tail.size() > 2000 ? tail.size() - 2000 : 0).c_str());
        return 1;
      }
      runs[i].push_back(ms);
    }
  std::vector<double> predicted, measured;
  for (size_t i = 0; i < k; ++i) {
    predicted.push_back(ranked[i].step_s * 1e3);
    measured.push_back(median_of(runs[i]));
    std::string rounds;
    for (double r : runs[i]) rounds += (rounds.empty() ? "" : ", ") + std::to_string(r).substr(0, 7);
    std::printf("  %zu. predicted %9.3f ms, measured %9.3f ms per step (rounds: %s ms)\n", i + 1, predicted.back(),
                measured.back(), rounds.c_str());
  }
  const size_t best = static_cast<size_t>(std::min_element(measured.begin(), measured.end()) - measured.begin());
  std::printf("predicted best (1.) measured %.3f ms; measured best (%zu.) %.3f ms: the predicted best is %.1f%% slower "
              "than the measured best; Spearman rank correlation predicted vs measured %.2f\n",
              measured[0], best + 1, measured[best], 100 * (measured[0] / measured[best] - 1), spearman(predicted, measured));
  return 0;
}

}  // namespace zt
