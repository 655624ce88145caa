// stop_signals.cpp — see stop_signals.h.
#include "stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "zerotrain/core/check.h"

namespace zt {

namespace {

std::atomic<int> g_pending{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

constexpr int kSignals[] = {SIGTERM, SIGUSR1};
struct sigaction g_previous[2];
std::atomic<bool> g_installed{false};

void on_stop_signal(int sig) {
  int none = 0;
  if (g_pending.compare_exchange_strong(none, sig)) return;
  // A second signal: stop at once, by the signal's default action.
  static const char msg[] = "zerotrain: second stop signal: ending this rank at once, without a checkpoint\n";
  (void)!::write(STDERR_FILENO, msg, sizeof(msg) - 1);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

StopSignals::StopSignals() {
  ZT_CHECK(!g_installed.exchange(true), "StopSignals: already installed in this process");
  g_pending.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;  // blocking calls resume: the step finishes as if nothing happened
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 2; ++i) ZT_CHECK(::sigaction(kSignals[i], &sa, &g_previous[i]) == 0, "sigaction failed");
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 2; ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
  g_installed.store(false);
}

int StopSignals::pending() { return g_pending.load(); }

const char* stop_signal_name(int sig) {
  if (sig == SIGTERM) return "SIGTERM";
  if (sig == SIGUSR1) return "SIGUSR1";
  static thread_local char buf[32];
  std::snprintf(buf, sizeof(buf), "signal %d", sig);
  return buf;
}

}  // namespace zt
