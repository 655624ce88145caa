// calibrate.cpp — this machine measured as a hardware profile (zerotrain/sim/calibrate.h).
#include "zerotrain/sim/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/kernels/cpu_ops.h"

namespace zt {

namespace {

using Clock = std::chrono::steady_clock;

// Host storage of one dtype filled with small random values; views for the CPU kernels.
class Buffer {
 public:
  Buffer(DType t, std::vector<int64_t> dims, std::mt19937& rng) : dtype_(t), dims_(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    bytes_.resize(static_cast<size_t>(n) * dtype_size(t) + 1);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (int64_t i = 0; i < n; ++i) {
      const float f = u(rng);
      if (t == DType::F32) std::memcpy(bytes_.data() + 4 * i, &f, 4);
      else {
        const uint16_t h = t == DType::BF16 ? f32_to_bf16_bits(f) : f32_to_f16_bits(f);
        std::memcpy(bytes_.data() + 2 * i, &h, 2);
      }
    }
  }
  TensorView view() {
    TensorView v;
    v.data = bytes_.data();
    v.dtype = dtype_;
    v.device = DeviceKind::CPU;
    v.ndim = static_cast<int>(dims_.size());
    for (size_t i = 0; i < dims_.size(); ++i) v.shape[i] = dims_[i];
    return v;
  }
  size_t bytes() const { return bytes_.size() - 1; }
  unsigned char* data() { return bytes_.data(); }

 private:
  DType dtype_;
  std::vector<int64_t> dims_;
  std::vector<unsigned char> bytes_;
};

// Every rank enters together, so all of them run the measured work at once (they share the
// cores and the memory bus as they do in training).
void align(Communicator& comm) {
  comm.barrier("calibrate");
  comm.stream().synchronize();
}

float slowest_rank(Communicator& comm, double seconds) {
  const float mine = static_cast<float>(seconds);
  float slowest = mine;
  comm.all_reduce(&mine, &slowest, 1, DType::F32, ReduceOp::Max, "calibrate");
  comm.stream().synchronize();
  return slowest;
}

// The median of v (the upper one of an even count).
double median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Seconds of one call of f: the median of repeats filling about `budget` seconds (3 to 1000 of
// them, the same count on every rank: f may be a collective; the median, as training sustains the
// work rather than catching its best bursts), the slowest rank's (a step waits for the slowest).
double best_seconds(Communicator& comm, double budget, const std::function<void()>& f) {
  align(comm);
  auto timed = [&] {
    const auto t0 = Clock::now();
    f();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  const double pilot = slowest_rank(comm, timed());  // also the warm-up
  const int reps = static_cast<int>(std::clamp(budget / std::max(pilot, 1e-9), 3.0, 1000.0));
  align(comm);
  std::vector<double> t;
  for (int rep = 0; rep < reps; ++rep) t.push_back(timed());
  return slowest_rank(comm, median(std::move(t)));
}

double gemm_peak(Communicator& comm, const CalibrationShapes& s, DType t, std::mt19937& rng) {
  double best = 0;
  for (int64_t n : {256, 512, 1024}) {
    Buffer a(t, {n, n}, rng), b(t, {n, n}, rng), c(t, {n, n}, rng);
    const double sec = best_seconds(comm, s.seconds_per_measurement, [&] {
      cpu_ops::gemm(false, false, n, n, n, 1.0f, a.view(), b.view(), 0.0f, c.view());
    });
    best = std::max(best, 2.0 * n * n * n / sec);
  }
  return best;
}

// The block's four linear layers forward and backward (6 FLOPs per weight per token).
double block_gemm_rate(Communicator& comm, const CalibrationShapes& s, std::mt19937& rng) {
  const DType t = s.compute;
  const int64_t N = s.batch * s.T, C = s.C;
  const int64_t shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
  double flops = 0, sec = 0;
  for (const auto& sh : shapes) {
    const int64_t IC = sh[0], OC = sh[1];
    Buffer x(t, {N, IC}, rng), w(t, {OC, IC}, rng), y(t, {N, OC}, rng), dy(t, {N, OC}, rng), dx(t, {N, IC}, rng),
        dw(t, {OC, IC}, rng);
    sec += best_seconds(comm, s.seconds_per_measurement / 4, [&] {
      cpu_ops::linear_forward(y.view(), TensorView{}, x.view(), w.view(), TensorView{}, N, IC, OC, true, false);
      cpu_ops::linear_backward(dx.view(), dw.view(), TensorView{}, dy.view(), x.view(), w.view(), TensorView{}, N, IC, OC,
                               true);
    });
    flops += 6.0 * static_cast<double>(N * IC * OC);
  }
  return flops / sec;
}

double attention_rate(Communicator& comm, const CalibrationShapes& s, std::mt19937& rng) {
  const DType t = s.compute;
  const int64_t B = s.batch, T = s.T, C = s.C, H = s.H;
  Buffer qkv(t, {B, T, 3 * C}, rng), out(t, {B, T, C}, rng), dout(t, {B, T, C}, rng), dqkv(t, {B, T, 3 * C}, rng),
      stats(DType::F32, {B, H, T, 2}, rng);
  const double sec = best_seconds(comm, s.seconds_per_measurement, [&] {
    cpu_ops::attention_tiled_forward(out.view(), stats.view(), qkv.view(), B, T, C, H, 0, 0);
    cpu_ops::attention_tiled_backward(dqkv.view(), dout.view(), qkv.view(), out.view(), stats.view(), B, T, C, H, 0, 0);
  });
  return 12.0 * static_cast<double>(B) * T * T * C / sec;  // the cost model's forward 4·B·T²·C, backward twice
}

double copy_rate(Communicator& comm, const CalibrationShapes& s, std::mt19937& rng) {
  const int64_t n = int64_t(1) << 24;  // 64 MiB of fp32: past every cache
  Buffer a(DType::F32, {n}, rng), b(DType::F32, {n}, rng);
  const double sec = best_seconds(comm, s.seconds_per_measurement, [&] { std::memcpy(b.data(), a.data(), a.bytes()); });
  return 2.0 * static_cast<double>(a.bytes()) / sec;
}

// Two LayerNorms, GELU over 4C, two residual adds: the cost model's 18·C bytes per token.
double elementwise_rate(Communicator& comm, const CalibrationShapes& s, std::mt19937& rng) {
  const DType t = s.compute;
  const int64_t N = s.batch * s.T, C = s.C;
  Buffer x(t, {N, C}, rng), y(t, {N, C}, rng), z(t, {N, C}, rng), g(t, {C}, rng), bb(t, {C}, rng),
      mean(DType::F32, {N}, rng), rstd(DType::F32, {N}, rng), h(t, {N, 4 * C}, rng), hg(t, {N, 4 * C}, rng);
  const double sec = best_seconds(comm, s.seconds_per_measurement, [&] {
    for (int i = 0; i < 2; ++i) {
      cpu_ops::layernorm_forward(y.view(), mean.view(), rstd.view(), x.view(), g.view(), bb.view(), 1e-5f);
      cpu_ops::residual_add(z.view(), x.view(), y.view());
    }
    cpu_ops::gelu_forward(hg.view(), h.view());
  });
  return 18.0 * static_cast<double>(N * C) * static_cast<double>(dtype_size(t)) / sec;
}

double optimizer_rate(Communicator& comm, const CalibrationShapes& s, std::mt19937& rng) {
  const int64_t n = s.optimizer_elems;
  Buffer p(DType::F32, {n}, rng), m(DType::F32, {n}, rng), v(DType::F32, {n}, rng), g(DType::F32, {n}, rng),
      out(s.compute, {n}, rng);
  const math::AdamParams a{1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 0.001f, true};
  const TensorView param_out = s.compute == DType::F32 ? TensorView{} : out.view();
  const double sec = best_seconds(comm, s.seconds_per_measurement,
                                  [&] { cpu_ops::adam_step(p.view(), m.view(), v.view(), g.view(), 1.0f, a, param_out); });
  return s.optimizer_bytes_per_element * static_cast<double>(n) / sec;
}

double collective_seconds(Communicator& comm, double budget, size_t bytes, bool all_reduce) {
  const int n = comm.world_size();
  const size_t count = std::max<size_t>(1, bytes / 4);
  std::vector<float> send(count), recv(all_reduce ? count : count * static_cast<size_t>(n));
  return best_seconds(comm, budget, [&] {
    if (all_reduce) comm.all_reduce(send.data(), recv.data(), count, DType::F32, ReduceOp::Sum, "calibrate");
    else comm.all_gather(send.data(), recv.data(), count, DType::F32, "calibrate");
    comm.stream().synchronize();
  });
}

void fit_links(Communicator& comm, const CalibrationShapes& s, HardwareProfile& h, CollectiveFit& fit) {
  const int n = comm.world_size();
  if (n < 2) {  // nothing to measure: links are never used at one rank
    h.launch_latency_s = h.intra_latency_s = h.inter_latency_s = 1e-9;
    h.intra_bytes_per_s = h.inter_bytes_per_s = h.hbm_bytes_per_s;
    return;
  }
  // All-gathers of 8 B to 16 MiB per rank. L is the 8-byte one's time; then t = L + x / β with x the
  // (N-1)/N of the buffer a rank moves, β fitted by least squares through (0, L) over the larger
  // sizes (one noisy point cannot swing it as a difference of two would).
  const size_t sizes[] = {8, size_t(64) << 10, size_t(1) << 20, size_t(16) << 20};
  double sxx = 0, sxy = 0;
  for (size_t per_rank : sizes) {
    const double t = collective_seconds(comm, s.seconds_per_measurement, per_rank, false);
    const double x = static_cast<double>(n - 1) * static_cast<double>(per_rank);  // (N-1)/N of N·per_rank bytes
    if (per_rank == sizes[0]) {
      fit.small_all_gather_s = t;
      continue;
    }
    sxx += x * x, sxy += x * (t - fit.small_all_gather_s);
    fit.large_all_gather_s = t;
    fit.large_bytes = static_cast<double>(per_rank) * n;
  }
  // One world size cannot tell the launch latency from N-1 ring steps: the whole latency is the
  // launch's, so the profile is exact at this N (calibrate with the ranks the runs will use).
  h.launch_latency_s = std::max(fit.small_all_gather_s, 1e-9);
  h.intra_latency_s = 1e-9;
  h.intra_bytes_per_s = sxy > 0 ? sxx / sxy : fit.large_bytes / std::max(fit.large_all_gather_s, 1e-9);
  h.inter_latency_s = h.intra_latency_s;
  h.inter_bytes_per_s = h.intra_bytes_per_s;
}

// While compute runs, the comm thread shares the rank's cores, and a collective issued then ends
// when the OS scheduler gives that thread its turn. Measured as training meets it: four small
// all-gathers (an 8 KiB block per rank) queued at once while this thread multiplies matrices until
// the last one is done, a collective's time being that span / 4. Five rounds of six (the turns
// vary from round to round): the median of the rounds' medians, the slowest rank's. 0 when that
// is within twice the same collectives' time on idle cores (the comm thread has a core to itself).
double beside_compute_seconds(Communicator& comm, std::mt19937& rng) {
  constexpr size_t kCount = 2048;
  constexpr int kQueued = 4, kReps = 6, kRounds = 5;
  constexpr int64_t kN = 192;  // one GEMM ~0.1 ms: how often this thread looks for the completion
  std::vector<float> send(kCount), recv(kCount * static_cast<size_t>(comm.world_size()));
  Buffer a(DType::F32, {kN, kN}, rng), b(DType::F32, {kN, kN}, rng), c(DType::F32, {kN, kN}, rng);
  auto queue = [&] {
    for (int q = 0; q < kQueued; ++q) comm.all_gather(send.data(), recv.data(), kCount, DType::F32, "calibrate");
  };
  const double idle = best_seconds(comm, 0.05, [&] {
    queue();
    comm.stream().synchronize();
  }) / kQueued;
  std::vector<double> rounds;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<double> beside;
    align(comm);
    for (int rep = 0; rep < kReps; ++rep) {
      std::atomic<bool> done{false};
      Clock::time_point ended;
      const auto issued = Clock::now();
      queue();
      comm.stream().enqueue_host([&] {
        ended = Clock::now();
        done.store(true, std::memory_order_release);
      });
      while (!done.load(std::memory_order_acquire))
        cpu_ops::gemm(false, false, kN, kN, kN, 1.0f, a.view(), b.view(), 0.0f, c.view());
      beside.push_back(std::chrono::duration<double>(ended - issued).count() / kQueued);
    }
    rounds.push_back(slowest_rank(comm, median(beside)));
  }
  const double t = median(rounds);
  return t > 2 * idle ? t : 0;
}

}  // namespace

Calibration calibrate(const CalibrationShapes& s, Communicator& comm, int ranks_per_node, const std::string& name) {
  ZT_CHECK(s.batch >= 1 && s.T >= 1 && s.C >= 1 && s.optimizer_elems >= 1, "calibration shapes");
  std::mt19937 rng(1234 + static_cast<unsigned>(comm.rank()));
  Calibration c;
  HardwareProfile& h = c.profile;
  h.name = name;
  h.peak_fp32_flops = gemm_peak(comm, s, DType::F32, rng);
  h.peak_bf16_flops = gemm_peak(comm, s, DType::BF16, rng);
  const double peak = s.compute == DType::F32 ? h.peak_fp32_flops : h.peak_bf16_flops;
  const double copy = copy_rate(comm, s, rng), elementwise = elementwise_rate(comm, s, rng),
               optimizer = optimizer_rate(comm, s, rng);
  // At a small model's working set the caches outrun a large copy: "hbm" is the best of the
  // three rates, so each efficiency stays a fraction of it.
  h.hbm_bytes_per_s = std::max({copy, elementwise, optimizer});
  auto clamp = [](double e) { return std::clamp(e, 1e-6, 1.0); };
  h.efficiency.gemm = clamp(block_gemm_rate(comm, s, rng) / peak);
  h.efficiency.attention = s.H > 0 ? clamp(attention_rate(comm, s, rng) / peak) : h.efficiency.gemm;
  h.efficiency.elementwise = clamp(elementwise / h.hbm_bytes_per_s);
  h.efficiency.optimizer = clamp(optimizer / h.hbm_bytes_per_s);
  h.gpus_per_node = ranks_per_node;
  // A rank's "device" memory is its share of the machine's RAM.
  h.device_memory_bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE)) /
                          ranks_per_node;
  h.host_link_bytes_per_s = copy;
  h.host_memory_bytes_per_s = copy * ranks_per_node;
  fit_links(comm, s, h, c.links);
  if (comm.world_size() > 1) h.collective_beside_compute_s = beside_compute_seconds(comm, rng);
  return c;
}

}  // namespace zt
