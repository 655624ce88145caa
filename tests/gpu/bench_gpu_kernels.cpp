// bench_gpu_kernels — times the CUDA kernels behind zt::ops at GPT-2-small shapes (bf16) and
// prints one table: milliseconds per call and achieved TFLOP/s (GEMM, attention) or GB/s
// (memory-bound ops, bytes = compulsory reads + writes, each row's count in a comment). Compare
// GB/s with the H200's 4.8 TB/s and TFLOP/s with its 989 dense bf16 (NVIDIA H200 data sheet):
// the "% peak" column does (Bench::time). Exits 0 without a GPU.
//   usage: bench_gpu_kernels [iterations=20]
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "zerotrain/core/device.h"
#include "zerotrain/kernels/ops.h"

namespace {
using namespace zt;

struct Bench {
  // The "% of peak" column: TFLOP/s / 989 (H200 dense bf16) or GB/s / 4800 (H200 HBM3e).
  static constexpr double kPeakTflops = 989, kPeakGBs = 4800;
  Bench(Device& d, Stream& st, int n) : dev(d), s(st), iters(n) {}
  Device& dev;
  Stream& s;
  int iters;
  std::vector<DeviceBuffer> keep;  // owns every buffer for the run
  std::mt19937 rng{7};

  TensorView tensor(DType t, std::initializer_list<int64_t> dims, float lo = -1.0f, float hi = 1.0f) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    keep.push_back(dev.alloc(static_cast<size_t>(n) * dtype_size(t), MemCategory::Workspace));
    std::vector<float> host(static_cast<size_t>(n));
    std::uniform_real_distribution<float> u(lo, hi);
    for (auto& x : host) x = u(rng);
    std::vector<uint16_t> narrow;
    const void* src = host.data();
    if (t != DType::F32) {
      narrow.resize(host.size());
      convert(host.data(), DType::F32, narrow.data(), t, host.size());
      src = narrow.data();
    }
    dev.memcpy_async(keep.back().data(), src, keep.back().bytes(), CopyKind::HostToDevice, s);
    s.synchronize();
    return keep.back().view(t, dims);
  }
  int32_t* ids(int64_t n, int32_t range) {
    keep.push_back(dev.alloc(static_cast<size_t>(n) * 4, MemCategory::Workspace));
    std::vector<int32_t> host(static_cast<size_t>(n));
    std::uniform_int_distribution<int32_t> u(0, range - 1);
    for (auto& x : host) x = u(rng);
    dev.memcpy_async(keep.back().data(), host.data(), host.size() * 4, CopyKind::HostToDevice, s);
    s.synchronize();
    return keep.back().as<int32_t>();
  }
  // Runs fn twice to warm up, then `iters` times between two timing events; returns ms per call.
  double time(const std::string& name, const std::string& shape, double bytes, double flops, const std::function<void()>& fn) {
    fn();
    fn();
    auto e0 = dev.create_event(true), e1 = dev.create_event(true);
    e0->record(s);
    for (int i = 0; i < iters; ++i) fn();
    e1->record(s);
    e1->synchronize();
    double ms = e1->elapsed_ms_since(*e0) / iters;
    char rate[64] = "";
    if (flops > 0) {
      const double tflops = flops / (ms * 1e-3) / 1e12;
      std::snprintf(rate, sizeof(rate), "%8.1f TFLOP/s %6.1f%%", tflops, 100.0 * tflops / kPeakTflops);
    } else if (bytes > 0) {
      const double gbs = bytes / (ms * 1e-3) / 1e9;
      std::snprintf(rate, sizeof(rate), "%8.1f GB/s    %6.1f%%", gbs, 100.0 * gbs / kPeakGBs);
    }
    std::printf("%-26s %-28s %9.3f ms %s\n", name.c_str(), shape.c_str(), ms, rate);
    std::fflush(stdout);
    return ms;
  }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace zt;
  if (cuda_device_count() == 0) {
    std::printf("bench_gpu_kernels: no CUDA GPU visible, nothing to time\n");
    return 0;
  }
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  auto dev = make_cuda_device(0);
  auto stream = dev->create_stream("bench");
  Bench b(*dev, *stream, iters);
  Stream& s = *stream;
  std::printf("%s, %d iterations per op, bf16 unless noted; %% of peak: of %.0f TFLOP/s (H200 dense bf16) or %.0f "
              "GB/s (H200 HBM3e)\n", dev->description().c_str(), iters, Bench::kPeakTflops, Bench::kPeakGBs);
  std::printf("%-26s %-28s %12s %-16s %7s\n", "op", "shape", "time", "rate", "% peak");

  const DType bf = DType::BF16;
  const int64_t B = 8, T = 1024, C = 768, H = 12, V = 50257, N = B * T;
  {  // GEMMs: the MLP up-projection forward and a square one.
    for (auto [M, Nn, K] : {std::tuple<int64_t, int64_t, int64_t>{N, 4 * C, C}, {4096, 4096, 4096}}) {
      TensorView A = b.tensor(bf, {M, K}), Bm = b.tensor(bf, {K, Nn}), Cm = b.tensor(bf, {M, Nn});
      b.time("gemm", std::to_string(M) + "x" + std::to_string(Nn) + "x" + std::to_string(K), 0, 2.0 * M * Nn * K,
             [&] { ops::gemm(s, false, false, M, Nn, K, 1.0f, A, Bm, 0.0f, Cm); });
    }
  }
  {  // Fused linear ops (linear_plan.h: cuBLASLt epilogues) at GPT-2 124M shapes, N = 8·1024 rows.
    // FLOPs: 2·M·N·K per GEMM; forward is one GEMM, backward two (dW and dinp). % of 989 dense bf16.
    struct Lin { const char* name; int64_t IC, OC; bool gelu; };
    for (const Lin& l : {Lin{"qkv (C->3C, bias)", C, 3 * C, false}, Lin{"attn proj (C->C, bias)", C, C, false},
                         Lin{"fc (C->4C, bias+gelu)", C, 4 * C, true}, Lin{"mlp proj (4C->C, bias)", 4 * C, C, false}}) {
      TensorView x = b.tensor(bf, {N, l.IC}), w = b.tensor(bf, {l.IC, l.OC}), bias = b.tensor(bf, {l.OC});
      TensorView out = b.tensor(bf, {N, l.OC}), pre = l.gelu ? b.tensor(bf, {N, l.OC}) : TensorView{};
      TensorView dw = b.tensor(bf, {l.IC, l.OC}), db = b.tensor(bf, {l.OC}), dx = b.tensor(bf, {N, l.IC});
      // mlp proj's input is gelu(fc): its backward fuses DGELU (gelu_pre = the fc pre-activation).
      TensorView gpre = l.IC == 4 * C ? b.tensor(bf, {N, l.IC}, -3.0f, 3.0f) : TensorView{};
      const double f1 = 2.0 * N * l.OC * l.IC;
      const std::string sh = std::to_string(N) + "x" + std::to_string(l.OC) + "x" + std::to_string(l.IC);
      b.time(std::string("linear_fwd ") + l.name, sh, 0, f1, [&] {
        ops::linear_forward(s, out, pre, x, w, bias, N, l.IC, l.OC, false, l.gelu);
      });
      b.time(std::string("linear_bwd ") + l.name, sh + (gpre.data ? " dgelu" : ""), 0, 2 * f1, [&] {
        ops::linear_backward(s, dx, dw, db, out, x, w, gpre, N, l.IC, l.OC, false);
      });
    }
    // LM head (tied wte, no bias): logits[N,V] = lnf·wteᵀ, at V = 50257 and padded Vp = 50304
    // (a multiple of 128: 16-byte-aligned rows; same FLOPs counted over the real V only).
    for (int64_t Vc : {V, int64_t(50304)}) {
      TensorView lnf = b.tensor(bf, {N, C}), wte = b.tensor(bf, {Vc, C}), logits = b.tensor(bf, {N, Vc});
      TensorView dwte = b.tensor(bf, {Vc, C}), dlnf = b.tensor(bf, {N, C});
      const double f1 = 2.0 * N * V * C;
      const std::string sh = "N=" + std::to_string(N) + " V=" + std::to_string(Vc) + " C=768";
      b.time("lm_head fwd gemm", sh, 0, f1, [&] { ops::gemm(s, false, true, N, Vc, C, 1.0f, lnf, wte, 0.0f, logits); });
      b.time("lm_head bwd 2 gemms", sh, 0, 2 * f1, [&] {
        ops::gemm(s, true, false, Vc, C, N, 1.0f, logits, lnf, 1.0f, dwte);
        ops::gemm(s, false, false, N, C, Vc, 1.0f, logits, wte, 0.0f, dlnf);
      });
    }
  }
  {
    TensorView x = b.tensor(bf, {N, C}), y = b.tensor(bf, {N, C}), w = b.tensor(bf, {C}), bb = b.tensor(bf, {C});
    TensorView mean = b.tensor(DType::F32, {N}), rstd = b.tensor(DType::F32, {N});
    TensorView dy = b.tensor(bf, {N, C}), dx = b.tensor(bf, {N, C}), dw = b.tensor(bf, {C}), db = b.tensor(bf, {C});
    const std::string sh = "N=" + std::to_string(N) + " C=" + std::to_string(C);
    const int64_t nc = N * C;
    const double NC = double(nc);
    // Compulsory bytes (bf16 = 2 B): forward reads x, w, b and writes y, mean, rstd (fp32):
    // 2NC·2 + 2C·2 + 2N·4. Backward reads dout, x, w, mean, rstd, reads and writes dinp (+=),
    // dweight, dbias (+=): 4NC·2 + C·2 + 2N·4 + 4C·2. The vector path (vector_path.h) runs here.
    const double ln_fwd = 4.0 * NC + 4.0 * C + 8.0 * N, ln_bwd = 8.0 * NC + 10.0 * C + 8.0 * N;
    b.time("layernorm_forward", sh, ln_fwd, 0, [&] { ops::layernorm_forward(s, y, mean, rstd, x, w, bb, 1e-5f); });
    b.time("layernorm_backward", sh, ln_bwd, 0, [&] { ops::layernorm_backward(s, dx, dw, db, dy, x, w, mean, rstd); });
    // The same rows one element off the 16-byte grid: the scalar kernels.
    auto rows = [&](const TensorView& t) {  // rows [N-1, C] starting one element in
      return TensorView(static_cast<char*>(t.data) + 2, t.dtype, {N - 1, C}, t.device);
    };
    const TensorView x1 = rows(x), y1 = rows(y);
    const TensorView m1 = mean.slice1d(0, N - 1), r1 = rstd.slice1d(0, N - 1);
    const double ln_fwd1 = 4.0 * (N - 1) * C + 4.0 * C + 8.0 * (N - 1);  // N - 1 rows
    b.time("layernorm_forward scalar", sh + " +1 elem", ln_fwd1, 0,
           [&] { ops::layernorm_forward(s, y1, m1, r1, x1, w, bb, 1e-5f); });
    b.time("bias_grad", sh, 2.0 * NC, 0, [&] { ops::bias_grad(s, db, dy); });
    // residual: reads a, b, writes out: 3NC·2.
    b.time("residual_add", sh, 6.0 * NC, 0, [&] { ops::residual_add(s, y, x, dy); });
    const TensorView a1 = x.slice1d(1, nc - 1), b1 = dy.slice1d(1, nc - 1), o1 = y.slice1d(1, nc - 1);
    b.time("residual_add +1 elem", sh + " all off by 1", 6.0 * (NC - 1), 0,
           [&] { ops::residual_add(s, o1, a1, b1); });  // a 7-element scalar head, then vectors
  }
  {
    const int64_t n = N * 4 * C;
    TensorView x = b.tensor(bf, {n}), y = b.tensor(bf, {n}), dy = b.tensor(bf, {n});
    // GELU at the MLP width (N x 4C): forward reads x, writes y: 2n·2; backward reads dinp,
    // x, dout and writes dinp: 4n·2.
    b.time("gelu_forward", "n=" + std::to_string(n), 2.0 * n * 2, 0, [&] { ops::gelu_forward(s, y, x); });
    b.time("gelu_backward", "n=" + std::to_string(n), 2.0 * n * 4, 0, [&] { ops::gelu_backward(s, y, x, dy); });
  }
  {
    TensorView qkv = b.tensor(bf, {B, T, 3 * C}), out = b.tensor(bf, {B, T, C});
    TensorView att = b.tensor(DType::F32, {B, H, T, T}), datt = b.tensor(DType::F32, {B, H, T, T});
    TensorView dqkv = b.tensor(bf, {B, T, 3 * C}), dout = b.tensor(bf, {B, T, C});
    const std::string sh = "B=8 T=1024 C=768 H=12";
    const double fwd_flops = 4.0 * B * T * T * C;  // QK^T and PV, full (non-causal) matrices
    b.time("attention_forward", sh, 0, fwd_flops, [&] { ops::attention_forward(s, out, att, qkv, B, T, C, H); });
    b.time("attention_backward", sh, 0, 2.0 * fwd_flops,
           [&] { ops::attention_backward(s, dqkv, datt, dout, qkv, att, B, T, C, H); });
  }
  {  // Tiled (flash) attention, causal, at the GPT-2 124M shape (hs = 64).
    // FLOPs: forward = 2 matmuls (Q Kᵀ, P V) x 2·B·H·T²·hs, halved for causal = 2·B·H·T²·hs;
    // backward = 2.5 x forward (5 matmuls: S recomputed once, dV, dP, dQ, dK; the FlashAttention-2
    // convention). The kernels run 7 (S and dP are formed in both the dK/dV and the dQ kernel), so
    // the hardware rate is 1.4x the printed backward rate. Peak: 989 TFLOP/s dense bf16 (H200).
    TensorView qkv = b.tensor(bf, {B, T, 3 * C}), out = b.tensor(bf, {B, T, C}), stats = b.tensor(DType::F32, {B, H, T, 2});
    TensorView dqkv = b.tensor(bf, {B, T, 3 * C}, -0.01f, 0.01f), dout = b.tensor(bf, {B, T, C});
    const std::string sh = "B=8 T=1024 H=12 hs=64 causal";
    const double fwd_flops = 2.0 * B * H * T * T * (C / H), bwd_flops = 2.5 * fwd_flops;
    b.time("attention_tiled_forward", sh, 0, fwd_flops,
           [&] { ops::attention_tiled_forward(s, out, stats, qkv, B, T, C, H, 0, 0); });
    b.time("attention_tiled_backward", sh, 0, bwd_flops,
           [&] { ops::attention_tiled_backward(s, dqkv, dout, qkv, out, stats, B, T, C, H, 0, 0); });
  }
  {
    const int64_t rows = 4096;
    TensorView logits = b.tensor(bf, {rows, V}, -4.0f, 4.0f), losses = b.tensor(DType::F32, {rows});
    int32_t* targets = b.ids(rows, static_cast<int32_t>(V));
    b.time("softmax_cross_entropy", "N=4096 V=50257 (in place)", 2.0 * rows * V * 2, 0,
           [&] { ops::softmax_cross_entropy(s, losses, logits, logits, targets, 1.0f / rows); });
  }
  {
    TensorView wte = b.tensor(bf, {V, C}), wpe = b.tensor(bf, {T, C}), out = b.tensor(bf, {B, T, C});
    int32_t* tokens = b.ids(N, static_cast<int32_t>(V));
    b.time("embedding_forward", "B=8 T=1024 C=768", 2.0 * N * C * 3, 0,
           [&] { ops::embedding_forward(s, out, tokens, wte, wpe, B, T, C); });
    b.time("embedding_backward", "B=8 T=1024 C=768 V=50257", 2.0 * N * C * 3, 0,
           [&] { ops::embedding_backward(s, wte, wpe, out, tokens, B, T, C); });
  }
  {
    const int64_t n = 50'000'000;
    TensorView p = b.tensor(DType::F32, {n}), m = b.tensor(DType::F32, {n}, -1e-3f, 1e-3f);
    TensorView v = b.tensor(DType::F32, {n}, 0.0f, 1e-6f), g = b.tensor(bf, {n}), out = b.tensor(bf, {n});
    math::AdamParams a{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f, true};
    b.time("adam_step fp32+bf16 g/out", "n=50M (28 B/param)", 28.0 * n, 0,
           [&] { ops::adam_step(s, p, m, v, g, 1.0f, a, out); });
    auto norm = dev->alloc(sizeof(double), MemCategory::Workspace);
    b.time("squared_norm bf16", "n=50M", 2.0 * n, 0, [&] { ops::squared_norm(s, norm.as<double>(), g); });
    b.time("cast fp32->bf16", "n=50M", 6.0 * n, 0, [&] { ops::cast(s, out, p); });
    s.synchronize();
  }
  {  // AdamW over GPT-2 124M's flat shard (the engine's step: ops::adam_step_multi).
    // Parameter tensors in layout order; every size is a multiple of 8 (plan.h's alignment).
    std::vector<int64_t> sizes = {V * C, T * C};
    for (int l = 0; l < 12; ++l)
      for (int64_t n : {C, C, C * 3 * C, 3 * C, C * C, C, C, C, C * 4 * C, 4 * C, 4 * C * C, C}) sizes.push_back(n);
    sizes.push_back(C);
    sizes.push_back(C);
    int64_t P = 0;
    for (int64_t n : sizes) P += n;  // 124,439,808 (GPT-2 124M, the head tied to wte)
    // fp32 master, m, v read + written (24 B), fp32 accumulated grad read (4 B), bf16 param
    // written (2 B): 30 B per parameter.
    TensorView p = b.tensor(DType::F32, {P}), m = b.tensor(DType::F32, {P}, -1e-3f, 1e-3f);
    TensorView v = b.tensor(DType::F32, {P}, 0.0f, 1e-6f);
    TensorView g = b.tensor(DType::F32, {2 * P}, -1e-2f, 1e-2f), out = b.tensor(bf, {2 * P});
    math::AdamParams a{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f, true};
    const std::vector<AdamChunk> whole = {{0, 0, 0, P}};  // stages 0 and 3: one coalesced chunk
    std::vector<AdamChunk> gapped;  // stage-1-like (one chunk per parameter tensor): grads/params in the full layout, gaps between
    int64_t at = 0;
    for (int64_t n : sizes) {
      gapped.push_back({at, 2 * at, 2 * at, n});
      at += n;
    }
    const std::string sh = "P=" + std::to_string(P) + " (30 B/param)";
    b.time("adamw multi, 1 chunk", sh, 30.0 * P, 0, [&] { ops::adam_step_multi(s, p, m, v, g, 1.0f, a, out, whole); });
    b.time("adamw multi, 148 chunks", sh, 30.0 * P, 0,
           [&] { ops::adam_step_multi(s, p, m, v, g, 1.0f, a, out, gapped); });
    b.time("adam_step per chunk", sh + " 148 calls", 30.0 * P, 0, [&] {
      for (const AdamChunk& c : gapped)
        ops::adam_step(s, p.slice1d(c.p, c.n), m.slice1d(c.p, c.n), v.slice1d(c.p, c.n), g.slice1d(c.g, c.n), 1.0f, a,
                       out.slice1d(c.out, c.n));
    });
    s.synchronize();
  }
  return 0;
}
