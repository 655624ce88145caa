// plan.h — the static ZeRO schedule: flat parameter space, buckets, shards.
//
// Layout (Megatron's distributed-optimizer layout, design.md §4):
//  * Parameters are laid out in forward (unit) order in one flat space.
//  * The flat space is cut into buckets. A bucket never spans two units and never splits a
//    parameter; within a unit a new bucket starts when adding the next parameter would exceed
//    `bucket_elems` (so a bucket smaller than every parameter gives one bucket per parameter).
//    At stage 3, parameters with numel <= persistence_threshold are grouped into their unit's
//    own "persistent" bucket (gathered once after each step, never released).
//  * Each bucket is padded to a multiple of the world size N and split into N equal slices;
//    rank r owns slice r of every bucket. Rank r's shard is its slices of all buckets, in bucket
//    order, contiguous. One in-place reduce-scatter / all-gather per bucket, no staging copies.
//
// Padded flat offsets ("flat") address the full padded buffer; shard offsets address a rank's
// shard buffer. Padding elements are zero in params and grads and are excluded from the norm.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/model/model.h"

namespace zt {

struct PlanBucket {
  int id = 0;
  int unit = 0;
  bool persistent = false;     // stage-3 small-parameter bucket
  int64_t flat_begin = 0;      // padded flat offset of the bucket's first element
  int64_t numel = 0;           // real (unpadded) elements
  int64_t padded = 0;          // numel rounded up to a multiple of N
  int64_t slice = 0;           // padded / N: elements each rank owns
  int64_t shard_begin = 0;     // offset of this bucket's slice inside every rank's shard
  std::vector<int> params;     // parameter indices, in layout order
};

struct PlanParam {
  int index = 0;               // index into Model::params()
  int bucket = 0;
  int64_t flat_begin = 0;      // padded flat offset
  int64_t numel = 0;
};

struct ZeroPlan {
  int world = 1;
  int64_t bucket_elems = 0;
  int64_t persistence_threshold = -1;  // < 0: no persistent buckets
  std::vector<PlanBucket> buckets;
  std::vector<PlanParam> params;       // indexed like Model::params()
  std::vector<std::vector<int>> unit_buckets;  // buckets holding the params of each unit
  int64_t numel = 0;                   // Σ parameter elements
  int64_t padded_numel = 0;            // Σ bucket.padded
  int64_t shard_numel = 0;             // padded_numel / N

  // The slice of bucket b owned by `rank`, as [flat_begin, flat_begin + slice).
  int64_t owned_flat_begin(int b, int rank) const { return buckets[b].flat_begin + rank * buckets[b].slice; }
  // Elements of rank's shard that hold real parameters (not padding), as (shard offset, count) runs.
  std::vector<std::pair<int64_t, int64_t>> real_shard_runs(int rank) const;
  // Stable hash of everything every rank must agree on (compared across ranks at start-up).
  uint64_t hash() const;
  std::string describe() const;  // human-readable table: bucket, unit, elements, padding, slice
};

// persistence_threshold < 0 disables persistent buckets (stages 0-2).
ZeroPlan make_zero_plan(const std::vector<ParamSpec>& params, int num_units, int world, int64_t bucket_elems,
                        int64_t persistence_threshold);

}  // namespace zt
