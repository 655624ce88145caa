// bench_host_optim.cpp — the host (ZeRO-Offload) AdamW step, zt::host_optim::adam_step, on one
// flat fp32 partition (p, m, v, g fp32, no param_out), compared with memcpy on the same machine,
// same thread pool and same bytes moved. torch.optim.AdamW is the other baseline:
// bench_host_optim_torch.py, and bench_host_optim_run.py runs both interleaved into one table.
//
//   zt_host_optim_bench --params 16M --threads 1 [--iters 10] [--warmup 2] [--isa avx512]
//
// State traffic per element: read p, m, v, g and write p, m, v = 7 x 4 B = 28 B (fp32, no out).
// memcpy: a 14 B/element source copied to a 14 B/element destination = 28 B/element read + written.
// Prints one line of key=value pairs (the driver parses it) with units in the key names.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "zerotrain/kernels/host_optim.h"

using namespace zt;
using namespace zt::host_optim;
using namespace zt::cpu;

namespace {

int64_t parse_count(const std::string& s) {  // 16M, 1K, 128M, or a plain number
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end == 'K' || *end == 'k') v *= 1 << 10;
  if (*end == 'M' || *end == 'm') v *= 1 << 20;
  if (*end == 'G' || *end == 'g') v *= 1 << 30;
  return static_cast<int64_t>(v);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename Fn>
double median_ms(int warmup, int iters, const Fn& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const double t0 = now_s();
    fn();
    ms.push_back((now_s() - t0) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 16 << 20;
  int threads = default_host_threads(), iters = 10, warmup = 2;
  std::string isa_arg;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::printf("usage: zt_host_optim_bench [--params N] [--threads T] [--iters I] [--warmup W] [--isa scalar|avx2|avx512]\n"
                  "Times the host (offload) Adam step over N parameters (K/M/G suffixes) with T threads.\n"
                  "Exit: 0 ok, 2 bad flag. Details: docs/optim.md.\n");
      return 0;
    }
  }
  if (argc % 2 == 0) { std::fprintf(stderr, "%s: missing value (every flag takes one)\n", argv[argc - 1]); return 2; }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--params") n = parse_count(v);
    else if (k == "--threads") threads = std::atoi(v.c_str());
    else if (k == "--iters") iters = std::atoi(v.c_str());
    else if (k == "--warmup") warmup = std::atoi(v.c_str());
    else if (k == "--isa") isa_arg = v;
    else { std::fprintf(stderr, "unknown flag %s\n", k.c_str()); return 2; }
  }
  if (!isa_arg.empty()) setenv("ZT_CPU_ISA", isa_arg.c_str(), 1);
  Isa isa;
  try {
    isa = active_isa();
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  HostThreadPool pool(threads);
  auto first_touch = [&](std::vector<float>& buf, float lo, float step) {  // parallel, like the step
    pool.parallel_for(static_cast<int64_t>(buf.size()), 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) buf[i] = lo + step * static_cast<float>(i % 1000);
    });
  };
  std::vector<float> p(n), m(n), v(n), g(n);
  first_touch(p, -0.5f, 1e-3f), first_touch(m, -0.01f, 2e-5f), first_touch(v, 0.0f, 1e-5f), first_touch(g, -1.0f, 2e-3f);
  math::AdamParams a{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 0.001f, true};
  const TensorView pv(p.data(), DType::F32, {n}), mv(m.data(), DType::F32, {n}), vv(v.data(), DType::F32, {n}),
      gv(g.data(), DType::F32, {n});
  const double adam_ms = median_ms(warmup, iters, [&] { adam_step(pool, isa, pv, mv, vv, gv, 1.0f, a, TensorView()); });
  std::vector<float>().swap(m), std::vector<float>().swap(v);  // memcpy buffers take their place

  const int64_t copy_bytes = 14 * n;
  std::vector<char> src(copy_bytes, 1), dst(copy_bytes);
  pool.parallel_for(copy_bytes, 1 << 20, [&](int64_t b, int64_t e) { std::memset(dst.data() + b, 0, e - b); });
  const double copy_ms = median_ms(warmup, iters, [&] {
    pool.parallel_for(copy_bytes, 1 << 20, [&](int64_t b, int64_t e) { std::memcpy(dst.data() + b, src.data() + b, e - b); });
  });
  const double adam_gbs = 28.0 * n / (adam_ms * 1e6), copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e6);
  std::printf("impl=zerotrain-%s params=%lld threads=%d adam_ms_per_step=%.3f adam_GB_per_s=%.2f memcpy_ms=%.3f "
              "memcpy_GB_per_s=%.2f fraction_of_memcpy=%.3f\n",
              isa_name(isa), static_cast<long long>(n), threads, adam_ms, adam_gbs, copy_ms, copy_gbs, adam_gbs / copy_gbs);
  return 0;
}
