// quantized_reduce.cpp — qgZ's two-hop quantised reduce-scatter (zero/quantized_reduce.h). Word
// layout of one quantised slice (w fp32 words): the int4 codes, two per byte, padded to a whole
// word, then one fp32 scale per block.
#include "zerotrain/zero/quantized_reduce.h"

#include "zerotrain/core/check.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/kernels/quantize_math.h"
#include "zerotrain/zero/plan.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt {

namespace {

constexpr int kBits = 4;

int64_t code_words(int64_t slice) { return (quant::payload_bytes(slice, kBits) + 3) / 4; }

// Quantised slice `i` of a words buffer: its codes and scales.
struct QuantizedSlice {
  uint8_t* codes;
  float* scales;
};
QuantizedSlice quantized_slice(const TensorView& words, int64_t i, const QuantizedReduceShape& sh) {
  float* base = static_cast<float*>(words.data) + i * sh.words();
  return {reinterpret_cast<uint8_t*>(base), base + code_words(sh.slice)};
}

void quantize(Stream& s, const TensorView& words, int64_t i, const TensorView& x, const QuantizedReduceShape& sh) {
  const QuantizedSlice q = quantized_slice(words, i, sh);
  zero_ops::quantize_blockwise(s, q.codes, q.scales, x, sh.block, kBits);
}

// into (fp32, s elements) = Σ over `count` quantised slices first, first + stride, ... in that order.
void dequantize_sum(Stream& s, const TensorView& into, const TensorView& words, int64_t first, int64_t stride,
                    int64_t count, const QuantizedReduceShape& sh) {
  for (int64_t j = 0; j < count; ++j) {
    const QuantizedSlice q = quantized_slice(words, first + j * stride, sh);
    zero_ops::dequantize_blockwise(s, into, q.codes, q.scales, sh.block, kBits, /*accumulate=*/j > 0);
  }
}

TensorView words_view(const TensorView& buf, int64_t words) { return buf.slice1d(0, words); }

}  // namespace

int64_t QuantizedReduceShape::words() const { return code_words(slice) + quant::num_blocks(slice, block); }

QuantizedReduceSizes quantized_reduce_sizes(const QuantizedReduceShape& sh) {
  const int64_t n = static_cast<int64_t>(sh.local) * sh.nodes, w = sh.words();
  QuantizedReduceSizes z;
  if (sh.local > 1) z.send1 = z.recv1 = n * w;
  z.partial = sh.nodes * sh.slice;
  if (sh.nodes > 1) z.send2 = z.recv2 = sh.nodes * w;
  z.sum = sh.slice;
  return z;
}

QuantizedReduceScratch quantized_reduce_scratch(const TensorView& buffer, const QuantizedReduceShape& sh) {
  const QuantizedReduceSizes z = quantized_reduce_sizes(sh);
  ZT_CHECK(buffer.dtype == DType::F32 && buffer.numel() >= z.total(),
           "qgZ scratch of " + std::to_string(buffer.numel()) + " elements, " + std::to_string(z.total()) + " fp32 needed");
  QuantizedReduceScratch sc;
  int64_t at = 0;
  for (auto [view, n] : {std::pair{&sc.send1, z.send1}, {&sc.recv1, z.recv1}, {&sc.partial, z.partial},
                         {&sc.send2, z.send2}, {&sc.recv2, z.recv2}, {&sc.sum, z.sum}}) {
    *view = buffer.slice1d(at, n);
    at += n;
  }
  return sc;
}

void quantized_reduce_scatter(Communicator& comm, Stream& s, const QuantizedReduceShape& sh, const TensorView& full,
                              const TensorView& out, const QuantizedReduceScratch& scratch, int bucket) {
  const int L = sh.local, K = sh.nodes, r = comm.rank();
  const int64_t n = static_cast<int64_t>(L) * K, w = sh.words(), sl = sh.slice;
  ZT_CHECK(n == comm.world_size() && full.numel() == n * sl && out.numel() == sl,
           "qgZ reduce-scatter of " + std::to_string(full.numel()) + " elements over " + std::to_string(L) + " x " +
               std::to_string(K) + " ranks in slices of " + std::to_string(sl));
  const TensorView partial = scratch.partial.slice1d(0, K * sl);  // [k'] for rank k'·L + l
  auto slice_of = [&](const TensorView& v, int64_t d) { return v.slice1d(d * sl, sl); };
  using Kind = CollectiveLabel::Kind;
  if (L > 1) {
    // Hop 1: slice d = k'·L + j goes to local rank j, at [j][k'].
    for (int64_t d = 0; d < n; ++d) quantize(s, scratch.send1, (d % L) * K + d / L, slice_of(full, d), sh);
    comm.all_to_all(scratch.send1.data, scratch.recv1.data, static_cast<size_t>(K * w), DType::F32,
                    RankGroup::within(L), CollectiveLabel{Kind::QuantizedGradsIntra, bucket}.to_string());
    // recv1[i][k']: local rank i's slice for rank k'·L + l; the node's sum over i, in order.
    for (int k = 0; k < K; ++k) dequantize_sum(s, slice_of(partial, k), scratch.recv1, k, K, L, sh);
  } else {
    ops::cast(s, partial, full);  // one rank per node: its own slices are the node's sums
  }
  TensorView sum = slice_of(partial, r / L);
  if (K > 1) {
    // Hop 2: the partial sum for rank k''·L + l goes to node k''.
    for (int k = 0; k < K; ++k) quantize(s, scratch.send2, k, slice_of(partial, k), sh);
    comm.all_to_all(words_view(scratch.send2, K * w).data, words_view(scratch.recv2, K * w).data,
                    static_cast<size_t>(w), DType::F32, RankGroup::spanning(L),
                    CollectiveLabel{Kind::QuantizedGradsInter, bucket}.to_string());
    sum = scratch.sum.slice1d(0, sl);
    dequantize_sum(s, sum, scratch.recv2, 0, 1, K, sh);
  }
  ops::cast(s, out, sum);
}

}  // namespace zt
