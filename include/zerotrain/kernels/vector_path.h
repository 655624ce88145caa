// vector_path.h — the host-side choice between a CUDA kernel's 128-bit vector path and its
// scalar path, as pure functions of pointers and sizes (unit-tested on the CPU in
// tests/kernels/test_vector_path.cpp; used by csrc/kernels/cuda/map_kernel.cuh, layernorm.cu, adam.cu).
//
// A "group" is kVecGroup = 8 consecutive elements of every operand: one 16-byte access for a
// 2-byte dtype, two for fp32. A group may be loaded as vectors only when every operand's
// group start is 16-byte aligned; the choice is made at run time from the actual addresses,
// never assumed (views sliced at odd offsets exist).
//
// Also the multi-tensor AdamW's chunk list (AdamChunk): the runs of one rank's flat shard the
// optimizer updates, as element offsets into the master/moment, gradient and parameter buffers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zt {

constexpr int64_t kVecGroup = 8;    // elements per group
constexpr size_t kVecBytes = 16;    // one 128-bit access

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVecBytes == 0; }

// Elementwise over n elements of operands that advance together (operand k's element i is at
// ptr[k] + i * elem_bytes[k]; nullptr operands are ignored): [0, head) runs scalar, then
// `groups` vector groups, then [tail_begin(), n) scalar. When no head h < 8 aligns every operand
// at once (operands misaligned by different amounts), everything is scalar (head = n).
struct VecSplit {
  int64_t head = 0, groups = 0;
  int64_t tail_begin() const { return head + groups * kVecGroup; }
};
struct VecOperand {
  const void* ptr = nullptr;
  size_t elem_bytes = 4;
};
inline VecSplit vector_split(int64_t n, const VecOperand* ops, int count) {
  VecSplit s;
  for (int64_t h = 0; h < kVecGroup; ++h) {
    bool ok = true;
    for (int k = 0; k < count && ok; ++k) {
      if (ops[k].ptr == nullptr) continue;
      const uintptr_t a = reinterpret_cast<uintptr_t>(ops[k].ptr) + static_cast<uintptr_t>(h) * ops[k].elem_bytes;
      ok = a % kVecBytes == 0;
    }
    if (!ok) continue;
    if (h >= n) break;  // nothing left after the head
    s.head = h;
    s.groups = (n - h) / kVecGroup;
    return s;
  }
  s.head = n;  // scalar only
  return s;
}

// LayerNorm rows [N, C] through the warp-per-row register kernels: every row start must be a
// group start (C a multiple of 8), every operand 16-byte aligned, and the row must fit the
// registers: returns groups per lane (1..max_groups_per_lane) or 0 for the scalar kernel.
// Forward keeps x in registers (up to 64 floats a lane: C <= 2048); backward keeps x, dout and
// the dweight/dbias partial sums (up to 4 x 32 floats a lane: C <= 1024).
constexpr int kLnFwdMaxGroupsPerLane = 8;
constexpr int kLnBwdMaxGroupsPerLane = 4;
inline int layernorm_groups_per_lane(int64_t C, const void* const* ptrs, int count, int max_groups_per_lane) {
  if (C <= 0 || C % kVecGroup != 0) return 0;
  for (int k = 0; k < count; ++k)
    if (ptrs[k] != nullptr && !aligned16(ptrs[k])) return 0;
  const int64_t groups = C / kVecGroup;
  const int64_t per_lane = (groups + 31) / 32;
  return per_lane <= max_groups_per_lane ? static_cast<int>(per_lane) : 0;
}

// One run of the AdamW update: elements [p, p + n) of master/exp_avg/exp_avg_sq, [g, g + n) of
// the gradients and [out, out + n) of the compute-dtype parameters.
struct AdamChunk {
  int64_t p = 0, g = 0, out = 0, n = 0;
};
// Merges each chunk into the previous one when it continues it in all three index spaces
// (order kept, empty chunks dropped). Stage 0 and stage 3 shards collapse to one chunk.
inline std::vector<AdamChunk> coalesce_adam_chunks(const std::vector<AdamChunk>& in) {
  std::vector<AdamChunk> out;
  for (const AdamChunk& c : in) {
    if (c.n <= 0) continue;
    if (!out.empty()) {
      AdamChunk& b = out.back();
      if (b.p + b.n == c.p && b.g + b.n == c.g && b.out + b.n == c.out) {
        b.n += c.n;
        continue;
      }
    }
    out.push_back(c);
  }
  return out;
}

// The multi-tensor launches: consecutive chunks, at most max_chunks per launch (the kernel's
// argument table), as [first, first + count) index ranges into the coalesced list.
struct ChunkLaunch {
  int first = 0, count = 0;
};
inline std::vector<ChunkLaunch> chunk_launches(int64_t num_chunks, int max_chunks) {
  std::vector<ChunkLaunch> out;
  for (int64_t i = 0; i < num_chunks; i += max_chunks) {
    const int64_t c = num_chunks - i < max_chunks ? num_chunks - i : max_chunks;
    out.push_back({static_cast<int>(i), static_cast<int>(c)});
  }
  return out;
}

}  // namespace zt
