// quantized_reduce.h — ZeRO++ qgZ's gradient reduce-scatter: two all_to_all hops of block-wise
// int4 (csrc/zero/quantized_reduce.cpp).
//
// N = L·K ranks on K nodes of L, placed blocked (rank = node·L + local rank); a bucket of N
// slices of s elements (slice d for rank d). Rank r = k·L + l:
//  1. quantises every slice d of its bucket (int4, one fp32 scale per `block` elements) into the
//     send buffer, slices for local rank j grouped: [j][k'] holds slice k'·L + j;
//  2. all_to_all within its node (RankGroup::within(L)): from each local rank i it receives the K
//     slices destined for the ranks of local rank l on every node;
//  3. dequantises and sums them in fp32 in the order i = 0..L−1: the node's partial sum for each
//     of those K ranks;
//  4. quantises the K partial sums, all_to_all across nodes (RankGroup::spanning(L): the ranks of
//     local rank l), and sums the K arrivals for its own slice in fp32, nodes in order 0..K−1;
//  5. writes that sum into `out` (its slice, in the bucket's dtype).
// A hop over one rank is left out: L = 1 sums the bucket's own slices unquantised in step 3, K = 1
// (one node) takes step 3's sum as the result. Every rank gets the same function of the inputs
// whatever the timing (fixed orders), bitwise across runs. Error per element: at most
// Σ_i scale_i/2 from the first hop plus Σ_k' scale_k'/2 from the second (quant::quantize rounds
// to nearest; scale = block absmax / 7).
//
// Bytes each rank sends: (L−1)·K·w words within its node and (K−1)·w across nodes, w =
// ZeroPlan::quantized_grad_words(s) ≈ s/8 + s/block words — against a plain reduce-scatter's
// (N−1)·s elements, of which (N−L)·s cross nodes.
#pragma once
#include <cstdint>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/tensor.h"

namespace zt {

struct QuantizedReduceShape {
  int local = 1;        // L: ranks per node (the first hop's group)
  int nodes = 1;        // K
  int64_t slice = 0;    // s: elements per rank's slice
  int64_t block = 0;    // elements per int4 block (one fp32 scale each)
  int64_t words() const;  // fp32 words of one quantised slice: int4 codes padded to a word, then the scales
};

// Scratch of one reduction, sized for the widest slice (elements / fp32 words; the caller owns
// them and uses them on one stream, which serialises the reductions sharing them).
struct QuantizedReduceScratch {
  TensorView send1, recv1;  // first hop: N·w words each (unused when L = 1)
  TensorView partial;       // K·s fp32: the node's partial sums
  TensorView send2, recv2;  // second hop: K·w words each (unused when K = 1)
  TensorView sum;           // s fp32: the rank's reduced slice before the cast into `out`
};
// Elements of each scratch buffer for `shape` (fp32 each), in the order of the struct.
struct QuantizedReduceSizes {
  int64_t send1 = 0, recv1 = 0, partial = 0, send2 = 0, recv2 = 0, sum = 0;
  int64_t total() const { return send1 + recv1 + partial + send2 + recv2 + sum; }
};
QuantizedReduceSizes quantized_reduce_sizes(const QuantizedReduceShape& shape);
// The scratch views, one after another in `buffer` (fp32, at least quantized_reduce_sizes(shape).total()).
QuantizedReduceScratch quantized_reduce_scratch(const TensorView& buffer, const QuantizedReduceShape& shape);

// The reduce-scatter of `full` (N·s elements; its dtype is the wire dtype) into `out` (s
// elements, this rank's slice — it may be the slice of `full` itself), issued on the
// communicator's stream `s`: quantisation kernels on `s`, the hops as comm collectives labelled
// "b<bucket> int4 intra" / "b<bucket> int4 inter" (CollectiveLabel). comm's blocks of L ranks must
// be prepared (Communicator::prepare_block).
void quantized_reduce_scatter(Communicator& comm, Stream& s, const QuantizedReduceShape& shape, const TensorView& full,
                              const TensorView& out, const QuantizedReduceScratch& scratch, int bucket);

}  // namespace zt
