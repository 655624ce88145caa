// zt_tokenizer_bench TOKENIZER.json TEXT [--threads N] [--reps R]: encode throughput of a byte-level
// BPE tokenizer in memory (no file I/O): the text is split into 1 MiB chunks at safe points, each
// thread encodes its share of the chunks R times. Prints MB/s of wall time and MB/s per thread of
// CPU time (the number that holds on a shared machine). docs/benchmarks.md, "Tokenizer".
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/data/tokenizer.h"

namespace {
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: zt_tokenizer_bench TOKENIZER.json TEXT [--threads N] [--reps R]\n";
  if (argc > 1 && (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help"))) {
    std::printf("%s", usage);
    return 0;
  }
  int threads = 1, reps = 3;
  bool ok = argc >= 3 && (argc - 3) % 2 == 0;
  for (int i = 3; ok && i + 1 < argc; i += 2) {
    const int v = std::atoi(argv[i + 1]);
    ok = v >= 1 && v <= 1024;
    if (!std::strcmp(argv[i], "--threads")) threads = v;
    else if (!std::strcmp(argv[i], "--reps")) reps = v;
    else ok = false;
  }
  if (!ok) {
    std::fprintf(stderr, "zt_tokenizer_bench: bad arguments (N and R: integers from 1 to 1024)\n%s", usage);
    return 2;
  }
  try {
    const zt::Tokenizer tok = zt::Tokenizer::load(argv[1]);
    std::vector<std::string> chunks;
    int64_t bytes = 0;
    zt::read_text_chunks(argv[2], size_t(1) << 20, [&](std::string_view c) {
      chunks.emplace_back(c);
      bytes += static_cast<int64_t>(c.size());
    });
    std::vector<double> cpu(static_cast<size_t>(threads));
    std::vector<int64_t> tokens(static_cast<size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const double c0 = thread_cpu_seconds();
        std::vector<uint32_t> ids;
        for (int r = 0; r < reps; ++r)
          for (size_t i = static_cast<size_t>(t); i < chunks.size(); i += static_cast<size_t>(threads)) {
            ids.clear();
            tok.encode_into(chunks[i], ids);
            tokens[t] += static_cast<int64_t>(ids.size());
          }
        cpu[t] = thread_cpu_seconds() - c0;
      });
    for (auto& th : pool) th.join();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double cpu_total = 0;
    int64_t ntok = 0;
    for (int t = 0; t < threads; ++t) {
      cpu_total += cpu[t];
      ntok += tokens[t];
    }
    const double mb = static_cast<double>(bytes) * reps / 1e6;
    std::printf("text %.2f MB x %d reps, %d thread(s), %lld tokens: wall %.3f s = %.1f MB/s; CPU %.3f s = %.1f MB/s "
                "per thread\n",
                static_cast<double>(bytes) / 1e6, reps, threads, static_cast<long long>(ntok), wall, mb / wall,
                cpu_total, mb / cpu_total);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt_tokenizer_bench: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
