// bench_train.cpp — single-process training throughput of a GPT on the CPU backend, fp32.
//
// One full training step = zero grads, forward over every unit, backward over every unit,
// one AdamW step over the flat fp32 parameter buffer (LocalModelState + ops::adam_step; no
// engine, no communication, no gradient clipping). Steps are timed with a steady clock after
// `--warmup` untimed steps; the stream is synchronised at the end of every phase, so each
// phase's time is wall time on the host. Comparison: benchmarks/train/torch_gpt_bench.py runs
// the same GPT (same shapes, fp32, same B and T, AdamW, same thread count) in PyTorch and
// prints the same columns. See docs/benchmarks.md.
//
// Thread count: --threads sets the OpenMP team of the compute stream's worker thread (the
// thread every CPU kernel runs on; GEMMs are split over the team, OpenBLAS is single-threaded). Tokens are uniform random in [0, V).
#include <cblas.h>
#include <omp.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/model/gpt.h"
#include "zerotrain/model/local_state.h"
#include "zerotrain/model/unit_runner.h"


namespace zt {
namespace {

struct Args {
  GptConfig gpt{8192, 128, 4, 4, 128};  // vocab, T (= n_ctx), L, H, C
  int64_t batch = 8;
  int threads = 1;
  int warmup = 3, steps = 10;
  std::string csv, json, label = "zerotrain";
};

const char* kUsage =
    "usage: zt_train_bench [--n-embd C] [--n-layer L] [--n-head H] [--seq T] [--vocab V] [--batch B]\n"
    "                      [--threads N] [--warmup W] [--steps S] [--csv F] [--json F]\n"
    "  Times S full fp32 training steps (forward + backward + AdamW) of a GPT after W warm-up steps.\n"
    "  --csv appends one row (header written when the file is new); --json writes one object.\n";

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "-h" || f == "--help") { std::printf("%s", kUsage); std::exit(0); }
    if (i + 1 >= argc) throw InputError(f + " needs a value\n" + kUsage);
    const char* v = argv[++i];
    auto num = [&](int64_t lo) {
      char* end = nullptr;
      long long x = std::strtoll(v, &end, 10);
      if (!*v || *end || x < lo) throw InputError(f + " '" + v + "': expected an integer >= " + std::to_string(lo));
      return static_cast<int64_t>(x);
    };
    if (f == "--n-embd") a.gpt.n_embd = num(1);
    else if (f == "--n-layer") a.gpt.n_layer = num(1);
    else if (f == "--n-head") a.gpt.n_head = num(1);
    else if (f == "--seq") a.gpt.n_ctx = num(1);
    else if (f == "--vocab") a.gpt.vocab_size = num(2);
    else if (f == "--batch") a.batch = num(1);
    else if (f == "--threads") a.threads = static_cast<int>(num(1));
    else if (f == "--warmup") a.warmup = static_cast<int>(num(0));
    else if (f == "--steps") a.steps = static_cast<int>(num(1));
    else if (f == "--csv") a.csv = v;
    else if (f == "--json") a.json = v;
    else throw InputError("unknown flag '" + f + "'\n" + kUsage);
  }
  if (a.gpt.n_embd % a.gpt.n_head != 0)
    throw InputError("--n-embd " + std::to_string(a.gpt.n_embd) + " must be divisible by --n-head " +
                     std::to_string(a.gpt.n_head));
  return a;
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

struct Phases { double fwd = 0, bwd = 0, opt = 0, total = 0, cpu = 0; };  // milliseconds

// CPU time of the whole process (all threads), in milliseconds. On a shared, oversubscribed
// machine this is the robust number: time other processes hold the cores is not counted.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

int run(const Args& a) {
  std::unique_ptr<Device> dev = make_cpu_device();
  auto stream = dev->create_stream("compute");
  // OpenMP's thread count is a per-thread setting: set it on the worker that runs the kernels.
  stream->enqueue_host([n = a.threads] { omp_set_num_threads(n); });
  int omp_threads = 0;
  stream->enqueue_host([&omp_threads] { omp_threads = omp_get_max_threads(); });
  stream->synchronize();

  ModelOptions mo;
  mo.compute_dtype = DType::F32;
  mo.micro_batch = a.batch;
  mo.device = dev.get();
  mo.stream = stream.get();
  std::unique_ptr<Model> model = make_gpt(a.gpt, mo);
  LocalModelState state(*model, *dev, *stream, DType::F32);
  state.init(1234);
  const int64_t n = state.total();
  DeviceBuffer m = dev->alloc(static_cast<size_t>(n) * 4, MemCategory::OptimMoments, true);
  DeviceBuffer v = dev->alloc(static_cast<size_t>(n) * 4, MemCategory::OptimMoments, true);
  const TensorView p_view(state.param_data(0), DType::F32, {n});
  const TensorView g_view(state.grad_data(0), DType::F32, {n});
  const TensorView m_view(m.data(), DType::F32, {n}), v_view(v.data(), DType::F32, {n});

  const int64_t B = a.batch, T = a.gpt.n_ctx;
  Batch batch;
  batch.B = B;
  batch.T = T;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(a.gpt.vocab_size - 1));
  batch.inputs.resize(static_cast<size_t>(B * T));
  batch.targets.resize(batch.inputs.size());
  for (auto& t : batch.inputs) t = tok(rng);
  for (auto& t : batch.targets) t = tok(rng);

  using clock = std::chrono::steady_clock;
  auto ms = [](clock::time_point a0, clock::time_point a1) {
    return std::chrono::duration<double, std::milli>(a1 - a0).count();
  };
  std::vector<Phases> timed;
  float first_loss = 0, last_loss = 0;
  for (int k = 0; k < a.warmup + a.steps; ++k) {
    const double c0 = process_cpu_ms();
    const auto t0 = clock::now();
    state.zero_grads();
    model->set_batch(batch);
    run_forward(*model);
    float loss = 0;
    dev->memcpy_async(&loss, model->loss_device(), sizeof(float), CopyKind::DeviceToHost, *stream);
    stream->synchronize();
    const auto t1 = clock::now();
    run_backward(*model, 1.0f);
    stream->synchronize();
    const auto t2 = clock::now();
    const int step = k + 1;
    math::AdamParams ap{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0, 0, true};
    ap.bias_correction1 = 1.0f - std::pow(ap.beta1, static_cast<float>(step));
    ap.bias_correction2 = 1.0f - std::pow(ap.beta2, static_cast<float>(step));
    ops::adam_step(*stream, p_view, m_view, v_view, g_view, 1.0f, ap, TensorView());
    stream->synchronize();
    const auto t3 = clock::now();
    const double c1 = process_cpu_ms();
    if (k == 0) first_loss = loss;
    last_loss = loss;
    if (k >= a.warmup) timed.push_back({ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t0, t3), c1 - c0});
  }

  auto col = [&](double Phases::*f) {
    std::vector<double> x;
    for (const Phases& p : timed) x.push_back(p.*f);
    return x;
  };
  const std::vector<double> tot = col(&Phases::total);
  const double med = median(tot);
  const double mean = std::accumulate(tot.begin(), tot.end(), 0.0) / static_cast<double>(tot.size());
  const double mn = *std::min_element(tot.begin(), tot.end());
  const double tokens = static_cast<double>(B * T);
  const double tok_s = tokens / (med / 1e3);
  const double gflop_step = gpt_flops_per_sequence(a.gpt, T) * static_cast<double>(B) / 1e9;
  const double cpu = median(col(&Phases::cpu));
  const double fwd = median(col(&Phases::fwd)), bwd = median(col(&Phases::bwd)), opt = median(col(&Phases::opt));

  std::printf("zerotrain single-process GPT training throughput (CPU, fp32, AdamW)\n");
  std::printf("  model: V=%lld T=%lld L=%lld H=%lld C=%lld, %lld params; batch B=%lld (%lld tokens/step)\n",
              (long long)a.gpt.vocab_size, (long long)T, (long long)a.gpt.n_layer, (long long)a.gpt.n_head,
              (long long)a.gpt.n_embd, (long long)n, (long long)B, (long long)(B * T));
  const char* core = openblas_get_corename();
  std::printf("  threads: OpenMP %d (compute stream; GEMMs split over them, OpenBLAS core %s single-threaded); "
              "warm-up %d, timed %d steps\n",
              omp_threads, core, a.warmup, a.steps);
  if (std::string(core) == "Prescott" && __builtin_cpu_supports("avx2"))
    std::printf("  WARNING: OpenBLAS runs its SSE3 (Prescott) kernels on an AVX2 CPU; set OPENBLAS_CORETYPE=Haswell\n"
                "           or SkylakeX (docs/benchmarks.md, \"OpenBLAS core type\")\n");
  std::printf("  loss first %.4f, last %.4f (ln V = %.4f)\n", first_loss, last_loss,
              std::log(static_cast<double>(a.gpt.vocab_size)));
  std::printf("%-10s %7s %10s %10s %10s %9s %9s %9s %12s %9s %10s %14s\n", "impl", "threads", "step_ms", "mean_ms",
              "min_ms", "fwd_ms", "bwd_ms", "opt_ms", "tokens_per_s", "GFLOP/s", "cpu_ms", "tokens_per_cpu_s");
  std::printf("%-10s %7d %10.2f %10.2f %10.2f %9.2f %9.2f %9.2f %12.0f %9.2f %10.2f %14.0f\n", a.label.c_str(),
              a.threads, med, mean, mn, fwd, bwd, opt, tok_s, gflop_step / (med / 1e3), cpu, tokens / (cpu / 1e3));
  std::printf("  (step_ms = median wall time of one step; tokens_per_s = B*T / step_ms; GFLOP/s uses the PaLM\n"
              "   convention 6N + 12 L C T FLOPs/token (PaLM convention); cpu_ms = median process CPU time of one\n"
              "   step, all threads; tokens_per_cpu_s = B*T / cpu_ms, robust to other load on the machine)\n");

  if (!a.csv.empty()) {
    // Appends a row: the old rows and the new one replace the file atomically (core/file_io.h).
    struct stat st {};
    std::string text = ::lstat(a.csv.c_str(), &st) == 0 ? read_regular_file(a.csv, "--csv", int64_t(1) << 30) : "";
    std::ostringstream f;
    f << text;
    if (text.empty())
      f << "impl,vocab,seq,n_layer,n_head,n_embd,params,batch,threads,warmup,steps,step_ms_median,step_ms_mean,"
           "step_ms_min,fwd_ms,bwd_ms,opt_ms,tokens_per_s,gflops,cpu_ms,tokens_per_cpu_s\n";
    char row[512];
    std::snprintf(row, sizeof(row), "%s,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%.3f,%.3f,%.1f\n",
                  a.label.c_str(), (long long)a.gpt.vocab_size, (long long)T, (long long)a.gpt.n_layer,
                  (long long)a.gpt.n_head, (long long)a.gpt.n_embd, (long long)n, (long long)B, a.threads, a.warmup,
                  a.steps, med, mean, mn, fwd, bwd, opt, tok_s, gflop_step / (med / 1e3), cpu, tokens / (cpu / 1e3));
    f << row;
    AtomicFile out(a.csv, "--csv", true);
    out.write(f.str());
    out.commit();
  }
  if (!a.json.empty()) {
    std::ostringstream f;
    f << "{\"impl\": \"" << a.label << "\", \"params\": " << n << ", \"batch\": " << B << ", \"seq\": " << T
      << ", \"threads\": " << a.threads << ", \"step_ms_median\": " << med << ", \"step_ms_mean\": " << mean
      << ", \"fwd_ms\": " << fwd << ", \"bwd_ms\": " << bwd << ", \"opt_ms\": " << opt
      << ", \"tokens_per_s\": " << tok_s << ", \"cpu_ms\": " << cpu
      << ", \"tokens_per_cpu_s\": " << tokens / (cpu / 1e3) << "}\n";
    AtomicFile out(a.json, "--json", true);
    out.write(f.str());
    out.commit();
  }
  return 0;
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  try {
    return zt::run(zt::parse(argc, argv));
  } catch (const zt::InputError& e) {
    std::fprintf(stderr, "zt_train_bench: error: %s\n", e.what());
    return 2;
  }
}
