// bench_comm.cpp — collective benchmark driver (nccl-tests style), run under mpirun.
//
//   mpirun -np N build/benchmarks/zt_comm_bench [--device cpu|cuda] [--ops all_reduce,...]
//       [--dtype fp32|bf16|fp16] [--min-bytes 1K] [--max-bytes 256M] [--step-factor 2]
//       [--warmup 3] [--iters 20] [--rounds 2] [--budget-bytes 1G] [--chunk-bytes 256K]
//       [--check 1] [--csv F] [--json F]
//
// For each op and each size S (nccl-tests' definition: the full buffer), the same collective
// runs through zerotrain's Communicator and directly on the library (MPI on the CPU backend,
// NCCL on the CUDA backend), out of place, with the same buffers. Each measurement: warm-up
// calls, then `iters` calls back to back and one wait, timed on every rank; the time is the
// slowest rank's; of `rounds` alternating rounds the best is kept for each side.
// algbw = S / time, busbw = algbw · factor (2(n−1)/n all-reduce, (n−1)/n RS/AG, 1 broadcast).
// Before timing a size, one call through zerotrain is checked element by element against the
// exact expected result (nccl-tests' #wrong column); any wrong element fails the run (exit 1).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/core/file_io.h"

using namespace zt;
using namespace zt::bench;

namespace {

struct Args {
  std::string device = "cpu";
  std::vector<std::string> ops = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
  DType dtype = DType::F32;
  size_t min_bytes = 1 << 10, max_bytes = size_t(256) << 20;
  double step = 2;
  int warmup = 3, iters = 20, rounds = 2;
  size_t budget = size_t(1) << 30;  // iterations per measurement shrink so iters·S stays near this
  size_t chunk_bytes = CommOptions{}.chunk_bytes;  // MPI backend: per-peer pipeline chunk
  bool check = true;                                // verify one call per size (--check 0: skip)
  std::string csv, json;
};

size_t parse_size(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  std::string suf(end);
  double mul = 1;
  if (suf == "K" || suf == "k" || suf == "KiB") mul = 1024.0;
  else if (suf == "M" || suf == "MiB") mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "GiB") mul = 1024.0 * 1024 * 1024;
  else if (!suf.empty() || end == v.c_str()) throw InputError(flag + " '" + v + "': expected a size like 4096, 1K, 256M or 1G");
  if (x <= 0) throw InputError(flag + " '" + v + "': must be positive");
  return static_cast<size_t>(x * mul);
}

int parse_int(const std::string& flag, const std::string& v, int lo) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end || x < lo) throw InputError(flag + " '" + v + "': expected an integer >= " + std::to_string(lo));
  return static_cast<int>(x);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--help" || f == "-h") {
      std::printf(
          "usage: mpirun -np N zt_comm_bench [--device cpu|cuda] [--ops all_reduce,reduce_scatter,all_gather,broadcast]\n"
          "         [--dtype fp32|bf16|fp16] [--min-bytes 1K] [--max-bytes 256M] [--step-factor 2] [--warmup 3]\n"
          "         [--iters 20] [--rounds 2] [--budget-bytes 1G] [--chunk-bytes 256K] [--check 1] [--csv F] [--json F]\n"
          "Times each collective through zerotrain's Communicator and directly on MPI/NCCL for sizes from\n"
          "--min-bytes to --max-bytes (x --step-factor); --check 1 verifies every element first.\n"
          "Sizes accept K/M/G suffixes. Exit: 0 ok, 1 wrong result, 2 bad flag. Details: docs/comm.md.\n");
      std::exit(0);
    }
    if (i + 1 >= argc) throw InputError(f + ": missing value (or unknown flag)");
    std::string v = argv[++i];
    if (f == "--device") {
      if (v != "cpu" && v != "cuda") throw InputError("--device '" + v + "': expected cpu or cuda");
      a.device = v;
    } else if (f == "--ops") {
      a.ops.clear();
      size_t p = 0;
      while (p <= v.size()) {
        size_t q = v.find(',', p);
        if (q == std::string::npos) q = v.size();
        a.ops.push_back(v.substr(p, q - p));
        p = q + 1;
      }
    } else if (f == "--dtype") {
      if (!parse_dtype(v.c_str(), &a.dtype)) throw InputError("--dtype '" + v + "': expected fp32, bf16 or fp16");
    } else if (f == "--min-bytes") a.min_bytes = parse_size(f, v);
    else if (f == "--max-bytes") a.max_bytes = parse_size(f, v);
    else if (f == "--step-factor") {
      a.step = std::strtod(v.c_str(), nullptr);
      if (!(a.step > 1)) throw InputError("--step-factor '" + v + "': expected a number > 1");
    } else if (f == "--warmup") a.warmup = parse_int(f, v, 0);
    else if (f == "--iters") a.iters = parse_int(f, v, 1);
    else if (f == "--rounds") a.rounds = parse_int(f, v, 1);
    else if (f == "--budget-bytes") a.budget = parse_size(f, v);
    else if (f == "--chunk-bytes") {
      a.chunk_bytes = parse_size(f, v);
      if (a.chunk_bytes < 64 || a.chunk_bytes > (size_t(1) << 30)) {
        throw InputError("--chunk-bytes '" + v + "': expected 64 B to 1 GiB");
      }
    }    else if (f == "--check") {
      if (v != "0" && v != "1") throw InputError("--check '" + v + "': expected 0 or 1");
      a.check = v == "1";
    } else if (f == "--csv") a.csv = v;
    else if (f == "--json") a.json = v;
    else throw InputError("unknown flag " + f + " (see --help)");
  }
  if (a.min_bytes > a.max_bytes) throw InputError("--min-bytes is larger than --max-bytes");
  return a;
}

const Collective& find_op(const std::string& name) {
  for (const Collective* c : {&all_reduce_collective(), &reduce_scatter_collective(), &all_gather_collective(),
                              &broadcast_collective()}) {
    if (name == c->name) return *c;
  }
  throw InputError("--ops: unknown op '" + name + "' (all_reduce, reduce_scatter, all_gather, broadcast)");
}

struct Row {
  std::string op;
  size_t bytes, count;
  int iters;
  double t_ours, t_direct;  // seconds per call, slowest rank, best round
  double bus;               // bus factor
  long long wrong;          // wrong elements over all ranks in the checked call (-1: not checked)
};

// Host image of `elems` elements of dtype dt with element i = value(i).
template <typename F>
std::vector<uint8_t> host_image(size_t elems, DType dt, F value) {
  std::vector<uint8_t> h(elems * dtype_size(dt));
  for (size_t i = 0; i < elems; ++i) {
    const float v = value(i);
    if (dt == DType::F32) std::memcpy(h.data() + 4 * i, &v, 4);
    else {
      const uint16_t b = dt == DType::BF16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
      std::memcpy(h.data() + 2 * i, &b, 2);
    }
  }
  return h;
}

float element(const std::vector<uint8_t>& h, DType dt, size_t i) {
  if (dt == DType::F32) {
    float v;
    std::memcpy(&v, h.data() + 4 * i, 4);
    return v;
  }
  uint16_t b;
  std::memcpy(&b, h.data() + 2 * i, 2);
  return dt == DType::BF16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
}

// One call through zerotrain on fresh inputs; returns this rank's wrong elements.
long long check_once(const Collective& op, Communicator& comm, Device& dev, void* send, void* recv, size_t count,
                     DType dt) {
  const int n = comm.world_size(), rank = comm.rank();
  const size_t elt = dtype_size(dt), se = op.send_elems(count, n), re = op.recv_elems(count, n);
  auto input = [&](size_t i) { return input_value(rank, i); };
  const std::vector<uint8_t> in_send = host_image(se, dt, input), in_recv = host_image(re, dt, input);
  std::vector<uint8_t> out(re * elt);
  Stream& s = comm.stream();
  dev.memcpy_async(send, in_send.data(), se * elt, CopyKind::HostToDevice, s);
  dev.memcpy_async(recv, in_recv.data(), re * elt, CopyKind::HostToDevice, s);
  op.ours(comm, send, recv, count, dt);
  dev.memcpy_async(out.data(), recv, re * elt, CopyKind::DeviceToHost, s);
  s.synchronize();
  long long wrong = 0;
  for (size_t i = 0; i < re; ++i) wrong += element(out, dt, i) != op.expected(rank, n, count, i);
  return wrong;
}

// Seconds per call: the slowest rank's average over `iters` calls.
template <typename Issue, typename Sync>
double measure(int warmup, int iters, Issue issue, Sync sync) {
  for (int i = 0; i < warmup; ++i) issue();
  sync();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) issue();
  sync();
  double t = (MPI_Wtime() - t0) / iters;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

int run(MpiEnvironment& env, int argc, char** argv) {
  Args a = parse(argc, argv);
  const int n = env.world_size(), rank = env.rank();
  std::vector<const Collective*> ops;
  for (const std::string& o : a.ops) ops.push_back(&find_op(o));

  std::unique_ptr<Device> dev;
  std::unique_ptr<DirectLib> direct;
  if (a.device == "cuda") {
    const int ord = select_local_cuda_device(MPI_COMM_WORLD);  // also refuses two ranks on one GPU
    dev = make_cuda_device(ord);
    direct = make_direct_nccl(ord, MPI_COMM_WORLD);
  } else {
    dev = make_cpu_device();
    direct = make_direct_mpi(MPI_COMM_WORLD);
  }
  CommOptions copts;
  copts.chunk_bytes = a.chunk_bytes;
  auto comm = make_communicator(*dev, MPI_COMM_WORLD, copts);
  // Ours waits like the engine does: on an event recorded after the last call (one wake-up),
  // not Stream::synchronize (which re-checks after every task on the comm thread).
  auto all_done = comm->create_event();
  auto wait_ours = [&] {
    all_done->record(comm->stream());
    all_done->synchronize();
  };
  const size_t elt = dtype_size(a.dtype);
  DeviceBuffer send = dev->alloc(a.max_bytes, MemCategory::Workspace, true);
  DeviceBuffer recv = dev->alloc(a.max_bytes, MemCategory::Workspace, true);

  if (rank == 0) {
    std::printf("# zerotrain collective benchmark: %d ranks, %s, ours = zt::Communicator (%s) vs direct %s, "
                "out of place, GB/s = 1e9 B/s, MPI chunk %zu B\n", n, dtype_name(a.dtype),
                comm_backend_name(comm->backend()), direct->name(), a.chunk_bytes);
    std::printf("# %-14s %11s %10s %5s | %10s %9s %9s | %10s %9s %9s | %6s %6s\n", "op", "size(B)", "count", "iters",
                "ours(us)", "algbw", "busbw", "direct(us)", "algbw", "busbw", "ratio", "wrong");
  }
  std::vector<Row> rows;
  long long total_wrong = 0;
  for (const Collective* op : ops) {
    for (double sd = static_cast<double>(a.min_bytes); sd <= static_cast<double>(a.max_bytes) * 1.0000001; sd *= a.step) {
      const size_t S = static_cast<size_t>(sd);
      const size_t count = op->count_for(S, n, elt);
      if (count == 0) continue;
      const int iters = static_cast<int>(std::clamp<size_t>(a.budget / S, 2, static_cast<size_t>(a.iters)));
      const int warmup = std::min(a.warmup, iters);
      const size_t full = std::max(op->send_elems(count, n), op->recv_elems(count, n)) * elt;  // S, rounded down
      Row row{op->name, full, count, iters, 1e30, 1e30, op->bus_factor(n), -1};
      if (a.check) {
        row.wrong = check_once(*op, *comm, *dev, send.data(), recv.data(), count, a.dtype);
        MPI_Allreduce(MPI_IN_PLACE, &row.wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        total_wrong += row.wrong;
      }
      for (int r = 0; r < a.rounds; ++r) {
        row.t_ours = std::min(row.t_ours, measure(warmup, iters,
            [&] { op->ours(*comm, send.data(), recv.data(), count, a.dtype); }, wait_ours));
        row.t_direct = std::min(row.t_direct, measure(warmup, iters,
            [&] { op->direct(*direct, send.data(), recv.data(), count, a.dtype); }, [&] { direct->synchronize(); }));
      }
      rows.push_back(row);
      if (rank == 0) {
        const double alg_o = row.bytes / row.t_ours / 1e9, alg_d = row.bytes / row.t_direct / 1e9;
        const std::string wrong = row.wrong < 0 ? "-" : std::to_string(row.wrong);
        std::printf("  %-14s %11zu %10zu %5d | %10.1f %9.3f %9.3f | %10.1f %9.3f %9.3f | %6.2f %6s\n", row.op.c_str(),
                    row.bytes, row.count, iters, row.t_ours * 1e6, alg_o, alg_o * row.bus, row.t_direct * 1e6, alg_d,
                    alg_d * row.bus, row.t_direct / row.t_ours, wrong.c_str());
        std::fflush(stdout);
      }
    }
  }
  if (rank == 0 && !a.csv.empty()) {
    std::ostringstream f;
    f << "op,dtype,ranks,bytes,count,iters,ours_us,ours_algbw_gbs,ours_busbw_gbs,direct_us,direct_algbw_gbs,"
         "direct_busbw_gbs,busbw_ratio,ours_wrong\n";
    for (const Row& r : rows) {
      const double ao = r.bytes / r.t_ours / 1e9, ad = r.bytes / r.t_direct / 1e9;
      f << r.op << "," << dtype_name(a.dtype) << "," << n << "," << r.bytes << "," << r.count << "," << r.iters << ","
        << r.t_ours * 1e6 << "," << ao << "," << ao * r.bus << "," << r.t_direct * 1e6 << "," << ad << ","
        << ad * r.bus << "," << r.t_direct / r.t_ours << "," << r.wrong << "\n";
    }
    AtomicFile out(a.csv, "--csv", true);
    out.write(f.str());
    out.commit();
  }
  if (rank == 0 && !a.json.empty()) {
    std::ostringstream f;
    f << "{\"ranks\": " << n << ", \"dtype\": \"" << dtype_name(a.dtype) << "\", \"backend\": \""
      << comm_backend_name(comm->backend()) << "\", \"direct\": \"" << direct->name() << "\", \"results\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const double ao = r.bytes / r.t_ours / 1e9, ad = r.bytes / r.t_direct / 1e9;
      f << "  {\"op\": \"" << r.op << "\", \"bytes\": " << r.bytes << ", \"count\": " << r.count
        << ", \"iters\": " << r.iters << ", \"ours_us\": " << r.t_ours * 1e6 << ", \"ours_algbw_gbs\": " << ao
        << ", \"ours_busbw_gbs\": " << ao * r.bus << ", \"direct_us\": " << r.t_direct * 1e6
        << ", \"direct_algbw_gbs\": " << ad << ", \"direct_busbw_gbs\": " << ad * r.bus
        << ", \"busbw_ratio\": " << r.t_direct / r.t_ours << ", \"ours_wrong\": " << r.wrong << "}"
        << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    f << "]}\n";
    AtomicFile out(a.json, "--json", true);
    out.write(f.str());
    out.commit();
  }
  if (total_wrong > 0) {
    if (rank == 0) {
      std::fprintf(stderr, "zt_comm_bench: %lld wrong elements in the checked calls (column 'wrong'): "
                   "zerotrain's results are NOT correct\n", total_wrong);
    }
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MpiEnvironment env(&argc, &argv);
  try {
    return run(env, argc, argv);
  } catch (const InputError& e) {
    // Every rank parses the same flags, but a device error can be one rank's alone: abort all.
    std::fprintf(stderr, "zt_comm_bench (rank %d): %s\n", env.rank(), e.what());
    std::fflush(stderr);
    if (env.world_size() > 1) MPI_Abort(MPI_COMM_WORLD, kExitBadInput);
    return kExitBadInput;
  }
}
