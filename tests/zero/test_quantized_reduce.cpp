// qgZ's two-hop quantised reduce-scatter (zero/quantized_reduce.h) over real ranks: for every split
// of the world into nodes of L ranks (L·K = N), slice sizes around the block size and both
// bucket dtypes, each rank's slice equals bit for bit a local emulation of the two hops (the same
// quantiser, the same summation orders, every rank's input regenerated here), lies within the
// quantisation bound of the exact sum, and the comm log holds the hops it should: within a node
// when L > 1, across nodes when K > 1, with the bytes of the int4 words.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <random>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/zero/plan.h"
#include "zerotrain/zero/quantized_reduce.h"
#include "zerotrain/zero/zero_ops.h"

using namespace zt;

namespace {

// Rank r's bucket: N slices; values of mixed scale so blocks differ.
std::vector<float> bucket_of(int rank, int64_t n, int64_t slice, uint64_t salt) {
  std::mt19937_64 rng(salt * 1000003 + static_cast<uint64_t>(rank));
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n * slice));
  for (size_t i = 0; i < v.size(); ++i) v[i] = g(rng) * (1.0f + static_cast<float>((i / 97) % 5));
  return v;
}

TensorView host_view(std::vector<float>& v, int64_t off, int64_t n) {
  return TensorView(v.data() + off, DType::F32, {n}, DeviceKind::CPU);
}

// deq(q(x)) in fp32 through the library's quantiser, on a local stream.
std::vector<float> round_trip(Stream& s, std::vector<float> x, int64_t block) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(static_cast<size_t>((n + 1) / 2));
  std::vector<float> scales(static_cast<size_t>((n + block - 1) / block)), out(x.size());
  zero_ops::quantize_blockwise(s, q.data(), scales.data(), host_view(x, 0, n), block, 4);
  zero_ops::dequantize_blockwise(s, host_view(out, 0, n), q.data(), scales.data(), block, 4, false);
  s.synchronize();
  return out;
}

}  // namespace

TEST(QuantizedReduceScatter, TwoHopsEqualTheirEmulationAndStayWithinTheBound) {
  auto dev = make_cpu_device();
  auto comm = make_communicator(*dev, MPI_COMM_WORLD);
  auto local = dev->create_stream("reference");
  const int n = comm->world_size(), r = comm->rank();
  uint64_t salt = 0;
  for (int L = 1; L <= n; ++L) {
    if (n % L) continue;
    const int K = n / L;
    comm->prepare_block(L);
    for (int64_t slice : {int64_t(8), int64_t(2048 + 8), int64_t(5000)})
      for (int64_t block : {int64_t(64), int64_t(2048)})
        for (DType dt : {DType::F32, DType::BF16}) {
          ++salt;
          const std::string what = "L " + std::to_string(L) + " K " + std::to_string(K) + " slice " +
                                   std::to_string(slice) + " block " + std::to_string(block) + " " + dtype_name(dt);
          const QuantizedReduceShape sh{L, K, slice, block};
          std::vector<float> scratch(static_cast<size_t>(quantized_reduce_sizes(sh).total()));
          const QuantizedReduceScratch sc =
              quantized_reduce_scratch(host_view(scratch, 0, static_cast<int64_t>(scratch.size())), sh);
          // Every rank's bucket, rounded to the bucket dtype as the engine's wire slot holds it.
          std::vector<std::vector<float>> in(static_cast<size_t>(n));
          for (int k = 0; k < n; ++k) {
            in[k] = bucket_of(k, n, slice, salt);
            for (float& x : in[k]) x = dt == DType::F32 ? x : bf16_bits_to_f32(f32_to_bf16_bits(x));
          }
          std::vector<uint16_t> b16(in[r].size());
          for (size_t i = 0; i < b16.size(); ++i) b16[i] = f32_to_bf16_bits(in[r][i]);
          std::vector<float> mine = in[r];  // the reduction writes its slice in place
          const TensorView full = dt == DType::F32 ? host_view(mine, 0, n * slice)
                                                   : TensorView(b16.data(), DType::BF16, {n * slice}, DeviceKind::CPU);
          const TensorView out = full.slice1d(r * slice, slice);  // in place, as the engine calls it
          const uint64_t before = comm->log().last_issued();
          quantized_reduce_scatter(*comm, comm->stream(), sh, full, out, sc, 7);
          comm->synchronize();
          std::vector<float> got(static_cast<size_t>(slice));
          for (int64_t i = 0; i < slice; ++i)
            got[i] = dt == DType::F32 ? static_cast<float*>(out.data)[i] : bf16_bits_to_f32(b16[r * slice + i]);

          // Emulation: node k's partial for this rank's slice, then the nodes' sum.
          auto slice_of = [&](int k) { return std::vector<float>(in[k].begin() + r * slice, in[k].begin() + (r + 1) * slice); };
          std::vector<float> want(static_cast<size_t>(slice), 0.0f), exact(static_cast<size_t>(slice), 0.0f);
          double bound = 0;
          for (int node = 0; node < K; ++node) {
            std::vector<float> partial(static_cast<size_t>(slice), 0.0f);
            for (int i = 0; i < L; ++i) {
              const std::vector<float> x = slice_of(node * L + i);
              const std::vector<float> y = L > 1 ? round_trip(*local, x, block) : x;
              for (int64_t e = 0; e < slice; ++e) partial[e] = i == 0 ? y[e] : partial[e] + y[e];
              for (int64_t e = 0; e < slice; ++e) exact[e] += x[e];
              float amax = 0;
              for (float v : x) amax = std::max(amax, std::fabs(v));
              bound += L > 1 ? amax / 14.0 : 0.0;  // scale/2 = absmax/7/2 per block, bounded by the slice's
            }
            const std::vector<float> y = K > 1 ? round_trip(*local, partial, block) : partial;
            for (int64_t e = 0; e < slice; ++e) want[e] = node == 0 ? y[e] : want[e] + y[e];
            float amax = 0;
            for (float v : partial) amax = std::max(amax, std::fabs(v));
            bound += K > 1 ? amax / 14.0 : 0.0;
          }
          for (float& x : want) x = dt == DType::F32 ? x : bf16_bits_to_f32(f32_to_bf16_bits(x));
          EXPECT_EQ(got, want) << what;
          double worst = 0, rounding = dt == DType::F32 ? 0 : 1.0 / 256;
          for (int64_t e = 0; e < slice; ++e)
            worst = std::max(worst, std::fabs(got[e] - exact[e]) - rounding * std::fabs(exact[e]));
          EXPECT_LE(worst, bound * 1.0001 + 1e-5) << what;
          if (n > 1) EXPECT_GT(bound, 0) << what << ": a reduction over several ranks quantises";

          // The hops in the log: label, group, count of fp32 words.
          std::vector<CommRecord> recs;
          for (uint64_t q = before + 1; q <= comm->log().last_issued(); ++q) recs.push_back(*comm->log().find(q));
          ASSERT_EQ(recs.size(), static_cast<size_t>((L > 1) + (K > 1))) << what;
          size_t h = 0;
          if (L > 1) {
            EXPECT_EQ(recs[h].label, "b7 int4 intra");
            EXPECT_EQ(recs[h].ranks, L);
            EXPECT_FALSE(recs[h].across);
            EXPECT_EQ(recs[h].count, static_cast<size_t>(K * sh.words()));
            ++h;
          }
          if (K > 1) {
            EXPECT_EQ(recs[h].label, "b7 int4 inter");
            EXPECT_EQ(recs[h].ranks, K);
            EXPECT_TRUE(recs[h].across);
            EXPECT_EQ(recs[h].bytes, static_cast<size_t>(K * sh.words() * 4));
          }
        }
  }
}
