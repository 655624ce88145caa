// attention_mma_layout.h — the index math of the tensor-core (mma.sync m16n8k16) attention kernels
// in kernels/attention_flash_*.cu, as host+device functions so the CPU tests
// (tests/kernels/test_attention_mma_layout.cpp) check it against the PTX ISA's documented fragment
// layouts and against a host emulation of ldmatrix + mma.
//
// Notation (PTX ISA, "Matrix Fragments for mma.m16n8k16" with .bf16/.f16 inputs, .f32 accumulators):
// lane = %laneid, g = lane / 4 ("groupID"), t = lane % 4 ("threadID_in_group").
//  A (16 x 16, row-major operand): 4 registers of 2 halves, element e = 0..7 (register e/2, half e%2):
//     row = g + 8·((e/2) % 2), col = 2t + e%2 + 8·(e/4).
//  B (16 x 8, k x n, "col" operand): 2 registers of 2 halves, element e = 0..3:
//     k = 2t + e%2 + 8·(e/2), n = g.
//  C/D (16 x 8, fp32): 4 floats, element e = 0..3: row = g + 8·(e/2), col = 2t + e%2.
// The low half of a register holds the element with the even index e (the lower column / k).
// ldmatrix.m8n8.x4.b16: lane l supplies the shared address of row l % 8 of matrix l / 8; register j
// receives from matrix j the elements (row g, cols 2t, 2t+1); with .trans, (rows 2t, 2t+1, col g).
//
// The kernels use three operand patterns, each an x4 ldmatrix whose four 8x8 matrices are the four
// registers named below (r, c = the row / column offset the lane addresses inside a 16 x 16 block):
//  A operand from a row-major [m][k] tile:       matrices (m0,k0) (m8,k0) (m0,k8) (m8,k8) = a0 a1 a2 a3
//  B operand from a row-major [n][k] tile (Kᵀ):  matrices (n0,k0) (n0,k8) (n8,k0) (n8,k8)
//                                                 = b0 b1 of n-tile 0, b0 b1 of n-tile 1 (no .trans)
//  B operand from a row-major [k][n] tile (V):   matrices (k0,n0) (k8,n0) (k0,n8) (k8,n8)
//                                                 = b0 b1 of n-tile 0, b0 b1 of n-tile 1 (.trans)
// and one register-only step: the C fragments of two adjacent n8 tiles of S (16 x 16 block of
// columns 16kk..16kk+15) are, packed to 16 bits, the A fragment of P for the k16 chunk kk.
#pragma once
#include <cstdint>

#include "zerotrain/core/dtype.h"

namespace zt::attn_mma {

// ---- PTX fragment layouts (element e of lane) ----
ZT_HD constexpr int frag_a_row(int lane, int e) { return lane / 4 + 8 * ((e / 2) % 2); }
ZT_HD constexpr int frag_a_col(int lane, int e) { return 2 * (lane % 4) + e % 2 + 8 * (e / 4); }
ZT_HD constexpr int frag_b_k(int lane, int e) { return 2 * (lane % 4) + e % 2 + 8 * (e / 2); }
ZT_HD constexpr int frag_b_n(int lane, int /*e*/) { return lane / 4; }
ZT_HD constexpr int frag_c_row(int lane, int e) { return lane / 4 + 8 * (e / 2); }
ZT_HD constexpr int frag_c_col(int lane, int e) { return 2 * (lane % 4) + e % 2; }

// ---- ldmatrix.x4 addressing: the (row, col) offset inside a 16 x 16 block lane l points at ----
// A from [m][k] and B from [k][n] (.trans): matrix l/8 = (row half (l/8)%2, column half l/16).
ZT_HD constexpr int ldsm_a_row(int lane) { return lane % 8 + 8 * ((lane / 8) % 2); }
ZT_HD constexpr int ldsm_a_col(int lane) { return 8 * (lane / 16); }
// B from [n][k] (no .trans): matrix l/8 = (row half l/16, column half (l/8)%2).
ZT_HD constexpr int ldsm_bt_row(int lane) { return lane % 8 + 8 * (lane / 16); }
ZT_HD constexpr int ldsm_bt_col(int lane) { return 8 * ((lane / 8) % 2); }
// B from [k][n] with .trans: the same addressing as A.
ZT_HD constexpr int ldsm_bk_row(int lane) { return ldsm_a_row(lane); }
ZT_HD constexpr int ldsm_bk_col(int lane) { return ldsm_a_col(lane); }

// ---- tile configuration (shared by the three kernels and the host launchers) ----
// A head of hs <= 128 columns is computed padded with zeros to head_dim(hs) ∈ {32, 64, 96, 128}.
ZT_HD constexpr int head_dim(int64_t hs) { return hs <= 32 ? 32 : hs <= 64 ? 64 : hs <= 96 ? 96 : 128; }
// Shared-memory row stride (elements) of a [rows][D] 16-bit tile: D + 8 shifts consecutive rows by
// 16 bytes mod 128, so the 8 rows an ldmatrix 8x8 matrix reads hit 8 distinct 16-byte bank groups
// (conflict-free), and every row start stays 16-byte aligned for cp.async.
ZT_HD constexpr int smem_stride(int D) { return D + 8; }
constexpr int kWarps = 4;       // per block, every kernel
constexpr int kWarpRows = 16;   // rows of the block tile each warp owns (one m16 fragment row block)
constexpr int kBlockRows = kWarps * kWarpRows;  // 64: query rows (forward, dQ) or key rows (dK/dV)
constexpr int kBlockCols = 64;  // keys per tile (forward, dQ) or queries per tile (dK/dV)

// ---- masks (causal: key <= query; both < T) ----
// Score (query row, key) is dropped: a later key, or a key / row past the end of the sequence.
ZT_HD constexpr bool score_masked(int64_t row, int64_t key, int64_t T) { return key > row || key >= T || row >= T; }
// Whether any score of the tile (queries [r0, r0+rows), keys [c0, c0+cols)) can be masked: the
// tile crosses the diagonal (the first query precedes the last key) or runs past T. Tiles where
// this is false run with no per-element test.
ZT_HD constexpr bool tile_needs_mask(int64_t r0, int rows, int64_t c0, int cols, int64_t T) {
  return r0 < c0 + cols - 1 || r0 + rows > T || c0 + cols > T;
}

// 16-byte (8 element) chunks are used for the global -> shared copies only when every row start is
// 16-byte aligned: hs and the row strides multiples of 8 elements and the base pointer aligned.
ZT_HD constexpr bool vector_loads_ok(int64_t hs, int64_t row_stride, uintptr_t base) {
  return hs % 8 == 0 && row_stride % 8 == 0 && base % 16 == 0;
}

}  // namespace zt::attn_mma
