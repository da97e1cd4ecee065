// The gold's block program (compute_gold, and evaluate_reference in its tail):
// its instantiations by chunk shape, the FP64 tensor-core dot products of
// per-token gates (exact where they are), and the program itself.
#pragma once

#include "metrics/device_blocks_common.hpp"

namespace chunkinv::gpu::blocks {

// The gold's instantiations, one per shape of chunk: (tiles per thread,
// X by columns) = (1, no) up to C = 22, (2, no) at 23-32, (2, yes) at
// 33-46, (3, yes) at 47-56 and (4, yes) at 57-64; tensor: the dot
// products of per-token gates on tensor cores (gold_tensor_cores, from
// C = 17 on). Calls f.template operator()<tiles, columns, tensor>() with
// C's; false if C has none. The launch and the CPU tests both dispatch
// through it.
template <class F>
bool with_gold_shape(int C, F&& f) {
  const int tiles = tiles_per_thread(C);
  const bool columns = gold_columns(C);
  if (!columns && tiles == 1) {
    if (gold_tensor_cores(C)) return f.template operator()<1, false, true>(), true;
    return f.template operator()<1, false, false>(), true;
  }
  if (!columns && tiles == 2) return f.template operator()<2, false, true>(), true;
  if (columns && tiles == 2) return f.template operator()<2, true, true>(), true;
  if (columns && tiles == 3) return f.template operator()<3, true, true>(), true;
  if (columns && tiles == 4) return f.template operator()<4, true, true>(), true;
  return false;
}

// The gold's dot products of keys on FP64 tensor cores (per-token gates):
// the Gram matrix of the keys in 8 x 8 tiles on and below the diagonal, one
// mma.m8n8k4 per tile and 4 channels, tile q of the lower triangle of tiles
// (row by row) on warp q % W. The MMA adds its products in an order of its
// own, the CPU in channel order; both give the same bits where every
// partial sum is exact, which each pair's bound below shows: keys are BF16,
// so each product of keys i and j is a multiple of 2^(lo_i + lo_j) (lo_r:
// the exponent of the last significand bit of row r's smallest nonzero
// key) and every partial sum is below d 2^(hi_i + hi_j) (2^hi_r above
// |k_rc|), so it fits 53 bits when w_i + w_j + ceil(log2 d) <= 53, w_r =
// hi_r - lo_r. A pair without that bound, or with a sum of exactly zero,
// is summed again in channel order (exact_dot). The staged keys of a tile
// row are 8 rows; a channel of them is dmma_stride(C) doubles apart, = 4
// mod 16, so that a fragment's loads (4 channels of 8 rows) fall on
// distinct banks.
CHUNKINV_HD inline int dmma_row_blocks(int C) { return (C + 7) / 8; }
// Up to C = 16 (a warp a sample, three tiles) the tensor cores measured
// slower than the FP64 units (docs/notes/gpu-notes.md, run 65).
CHUNKINV_HD inline bool gold_tensor_cores(int C) { return C > 16; }
CHUNKINV_HD inline int dmma_tiles(int C) { return dmma_row_blocks(C) * (dmma_row_blocks(C) + 1) / 2; }
CHUNKINV_HD inline int dmma_tiles_per_warp(int C) {
  const int warps = block_threads(C) / 32;
  return (dmma_tiles(C) + warps - 1) / warps;
}
CHUNKINV_HD inline int dmma_stride(int C) {
  const int rows = 8 * dmma_row_blocks(C);
  return rows + ((4 - rows % 16) + 16) % 16;
}
// Tiles a warp holds, at most, for a shape of with_gold_shape.
CHUNKINV_HD constexpr int dmma_max_tiles(int tiles, bool columns) {
  return !columns ? 2 * tiles + 1 : tiles == 2 ? 6 : tiles == 3 ? 7 : 9;
}
// Tile q of the lower triangle of tiles, row by row: (I, J), J <= I.
CHUNKINV_HD inline void dmma_tile(int q, int& I, int& J) {
  I = 0;
  while ((I + 1) * (I + 2) / 2 <= q) ++I;
  J = q - I * (I + 1) / 2;
}
// A row's keys as the bound reads them: the largest magnitude bits (hi)
// and the smallest nonzero ones (lo), from hi = 0, lo = 0x7FFF.
struct RowBits {
  unsigned lo = 0x7FFF, hi = 0;
  CHUNKINV_HD void add(uint16_t b) {
    const unsigned m = b & 0x7FFFu;
    hi = m > hi ? m : hi;
    lo = m != 0 && m < lo ? m : lo;
  }
  // w_r: +1e9 where a key is not finite (its pairs are summed in order), 0
  // for a row of zeros. |k| < 2^(e - 126) for a biased exponent e (e = 0:
  // below 2^-126); the last significand bit is 2^(e - 134) or above (e = 0:
  // 2^-133).
  CHUNKINV_HD double width() const {
    if (hi >= 0x7F80u) return 1e9;
    if (hi == 0) return 0.0;
    return double((int(hi >> 7) - 126) - (int(lo >> 7) - 134));
  }
};
CHUNKINV_HD inline double dmma_row_width(const uint16_t* row, int d) {
  RowBits b;
  for (int c = 0; c < d; ++c) b.add(row[c]);
  return b.width();
}
CHUNKINV_HD inline int ceil_log2(int d) {
  int l = 0;
  while ((1 << l) < d) ++l;
  return l;
}
// Whether rows of widths wi and wj (RowBits::width) have only exact partial sums.
CHUNKINV_HD inline bool dmma_exact(double wi, double wj, int d) { return wi + wj + ceil_log2(d) <= 53; }
// Keys i and j's dot product in channel order, as compute_gold forms it.
CHUNKINV_HD inline double exact_dot(const uint16_t* ki, const uint16_t* kj, int d);

// c + a b where a b is exact (a and b BF16 values, widened: the product has
// at most 16 significant bits and neither overflows nor underflows FP64):
// then rounding a b first changes nothing, and the fused form, rounded once,
// is the CPU's c + (a * b) bit for bit, in one instruction instead of two
// (the gold's dot products of keys; the build keeps --fmad=false, so it is
// asked for here by name).
CHUNKINV_HD inline double add_exact_product(double a, double b, double c) { return fp64::fma_rn(a, b, c); }

CHUNKINV_HD inline double exact_dot(const uint16_t* ki, const uint16_t* kj, int d) {
  double dot = 0.0;
  for (int c = 0; c < d; ++c) dot = add_exact_product(fp64::bf16_value(ki[c]), fp64::bf16_value(kj[c]), dot);
  return dot;
}

// compute_gold for sample s. kMaxTiles >= tiles_per_thread(C); kChannel is
// gate_width != 1 (compute_gold's own test: per-channel gates with d = 1
// take the per-token formula there too). With a.reference, also
// evaluate_reference by the fast rules, from L and X in shared memory; a
// sample they do not cover (a non-finite L, or X not zero above its
// diagonal) gets slow[s] = 1 and is left to reference_program.
template <int kMaxTiles, bool kChannel, bool kColumns, bool kTensor, class Block>
CHUNKINV_HD void gold_program(const Block& blk, const GoldOnDevice& a, long s, double* sm, BlockFlags* fl,
                              int* slow) {
  const int C = a.chunk, d = a.dim, T = blk.threads;
  const int CP = 2 * tile_rows(C), tiles = pair_tiles(C);
  const size_t csq = size_t(C) * C;
  const GoldSmem m = gold_smem(sm, C, kChannel);
  const uint16_t* keys = a.keys + size_t(s) * C * d;
  struct Acc {
    double v[kMaxTiles][4];  // the tiles' pairs
    double dg;               // the diagonal tile's pair
  };
  // Per-token gates: the warp's 8 x 8 tiles of dot products, the lane's two
  // entries of each (dmma_m8n8k4).
  constexpr int kMaxDmma = dmma_max_tiles(kMaxTiles, kColumns);
  struct AccDmma {
    double v[kMaxDmma][2];
    RowBits row;  // of key row t, which thread t stages
  };
  // Per-token gates on tensor cores (kTensor = gold_tensor_cores(C)); the
  // FP64 units' 2 x 2 tiles otherwise.
  constexpr bool kTc = !kChannel && kTensor;
  auto acc = blk.template local<std::conditional_t<kTc, AccDmma, Acc>>();
  // The tensor cores' staged keys: channel-major, rows 0..KR-1 (C.. zero),
  // KS doubles a channel (the FP64 units' take CP rows, CP apart).
  const int KR = 8 * dmma_row_blocks(C), KS = dmma_stride(C);
  double* const width = m.terms;  // RowBits::width of each row, until the reference's tail uses the space
  // Thread t's diagonal pair is (2t + 1, 2t) where t < TR; a thread without
  // one, or without a q-th tile, forms the pairs of rows and columns 0 and
  // 1 instead (never read), so that the dot products' loop has no branch.
  const int TR = tile_rows(C);

  blk.each([&](int t) {
    if (t == 0) {
      fl->l_bad = fl->inv_bad = fl->upper = fl->s2_bad = 0;
      fl->max_bits = 0;
      if (!kChannel) {  // G cumulated in FP64, token order
        double c = 0.0;
        for (int i = 0; i < C; ++i) m.cum[i] = c += a.g[size_t(s) * C + i];
      }
    }
    for (int i = t; i < C; i += T) m.beta[i] = a.beta[size_t(s) * C + i];
    for (int e = t; e < packed_size(C); e += T) m.L[e] = 0.0;
    if constexpr (!kTc) {
      CHUNKINV_UNROLL
      for (int q = 0; q < kMaxTiles; ++q)
        for (int r = 0; r < 4; ++r) acc[t].v[q][r] = 0.0;
      acc[t].dg = 0.0;
    } else {
      CHUNKINV_UNROLL
      for (int q = 0; q < kMaxDmma; ++q) acc[t].v[q][0] = acc[t].v[q][1] = 0.0;
      acc[t].row = RowBits{};
    }
  });

  for (int k0 = 0; k0 < d; k0 += kKeyTile) {
    const int kn = d - k0 < kKeyTile ? d - k0 : kKeyTile;
    const int kn4 = (kn + 3) & ~3;  // the MMA's channels: kn and zeros to a multiple of 4
    blk.each([&](int t) {
      // Keys of channels k0..k0+kn-1 as doubles, channel-major; rows C..CP-1
      // (C..KR-1 on tensor cores) zero. Consecutive threads take
      // consecutive rows (stores to consecutive addresses); with whole
      // groups of 8 channels a thread reads 8 at once (16 bytes). On tensor
      // cores thread t takes row t (KR <= T), whose RowBits it keeps.
      if constexpr (kTc) {
        if (t >= KR) return;
        RowBits& rb = acc[t].row;
        if (d % 8 == 0 && kn % 8 == 0) {
          for (int k8 = 0; k8 < kn; k8 += 8) {
            uint16_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (t < C) load_8(keys + size_t(t) * d + k0 + k8, b);
            CHUNKINV_UNROLL
            for (int u = 0; u < 8; ++u) {
              rb.add(b[u]);
              m.keyt[(k8 + u) * KS + t] = t < C ? fp64::bf16_value(b[u]) : 0.0;
            }
          }
        } else {
          for (int kk = 0; kk < kn4; ++kk) {
            const uint16_t b = t < C && kk < kn ? keys[size_t(t) * d + k0 + kk] : uint16_t(0);
            rb.add(b);
            m.keyt[kk * KS + t] = t < C && kk < kn ? fp64::bf16_value(b) : 0.0;
          }
        }
        return;
      }
      if (d % 8 == 0 && kn % 8 == 0) {
        for (int e = t; e < CP * (kn / 8); e += T) {
          const int r = e % CP, k8 = 8 * (e / CP);
          uint16_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          if (r < C) load_8(keys + size_t(r) * d + k0 + k8, b);
          CHUNKINV_UNROLL
          for (int u = 0; u < 8; ++u) m.keyt[(k8 + u) * CP + r] = r < C ? fp64::bf16_value(b[u]) : 0.0;
        }
      } else {
        for (int e = t; e < CP * kn; e += T) {
          const int r = e % CP, kk = e / CP;
          m.keyt[kk * CP + r] = r < C ? fp64::bf16_value(keys[size_t(r) * d + k0 + kk]) : 0.0;
        }
      }
      if (kChannel)  // G cumulated per channel in FP64, token order
        for (int kk = t; kk < kn; kk += T) {
          double c = 0.0;
          for (int r = 0; r < C; ++r) m.cumt[kk * CP + r] = c += a.g[(size_t(s) * C + r) * d + k0 + kk];
          for (int r = C; r < CP; ++r) m.cumt[kk * CP + r] = 0.0;
        }
    });
    if constexpr (kTc) {
      blk.each([&](int t) {
        auto& A = acc[t];
        const int lane = t % 32, warp = t / 32, W = T / 32, nt = dmma_tiles(C);
        // Lane (g = lane / 4, h = lane % 4) loads row 8 I + g of channel h of
        // each step for A, row 8 J + g for B.
        const double* base = m.keyt + (lane % 4) * KS + lane / 4;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        int oi[kMaxDmma], oj[kMaxDmma];
        CHUNKINV_UNROLL
        for (int p = 0; p < kMaxDmma; ++p) {
          int I = 0, J = 0;
          if (warp + p * W < nt) dmma_tile(warp + p * W, I, J);
          oi[p] = 8 * I;
          oj[p] = 8 * J;
        }
        // Above C = 32, where the warp holds as many tiles q = warp, warp +
        // W, ... below nt as it can (at C = 64 9 of 36 on each of 4 warps),
        // the loop runs without the test a tile, which gave each MMA its own
        // branch, warp synchronisation and address arithmetic (about 14
        // instructions an MMA, 16.8% of the gold's instructions at C = 64):
        // the gold 154.6 -> 150.3 ns a sample at C = 64. At C = 32 (5 of 10
        // on 2 warps) it took the gold's registers 64 -> 72 and its time
        // 42.4 -> 44.0 ns, so the test stays there
        // (docs/notes/gpu-notes.md, "Eleventh lease").
        if (kColumns && (nt - warp + W - 1) / W == kMaxDmma) {
          for (int k = 0; k < kn4; k += 4) {
            const double* row = base + k * KS;
            CHUNKINV_UNROLL
            for (int p = 0; p < kMaxDmma; ++p) dmma_m8n8k4(A.v[p][0], A.v[p][1], row[oi[p]], row[oj[p]]);
          }
        } else {
          for (int k = 0; k < kn4; k += 4) {
            const double* row = base + k * KS;
            CHUNKINV_UNROLL
            for (int p = 0; p < kMaxDmma; ++p)
              if (warp + p * W < nt) dmma_m8n8k4(A.v[p][0], A.v[p][1], row[oi[p]], row[oj[p]]);
          }
        }
#else
        // The lane's entries summed in channel order: where the bound holds,
        // the MMA's bits (a CPU run of this program checks the layout).
        (void)base;
        for (int p = 0; p < kMaxDmma && warp + p * W < nt; ++p) {
          int I, J;
          dmma_tile(warp + p * W, I, J);
          const int i = 8 * I + lane / 4;
          for (int h = 0; h < 2; ++h) {
            const int j = 8 * J + 2 * (lane % 4) + h;
            for (int k = 0; k < kn4; ++k) A.v[p][h] = add_exact_product(m.keyt[k * KS + i], m.keyt[k * KS + j], A.v[p][h]);
          }
        }
#endif
      });
    } else {
      blk.each([&](int t) {
        Acc& A = acc[t];
        int i0[kMaxTiles], j0[kMaxTiles];
        bool ok[kMaxTiles];
        CHUNKINV_UNROLL
        for (int q = 0; q < kMaxTiles; ++q) {
          int ti = 0, tj = 0;
          ok[q] = t + q * T < tiles;
          if (ok[q]) tile_coords(t + q * T, ti, tj);
          i0[q] = 2 * ti;
          j0[q] = 2 * tj;
        }
        const int a = t < TR ? 2 * t : 0;
        const bool dg_ok = t < TR && 2 * t + 1 < C;
        // The tiles' rows of the staged keys, moved on by a channel (CP
        // doubles) at each step, rather than indexed anew at every load.
        const double* pi[kMaxTiles];
        const double* pj[kMaxTiles];
        CHUNKINV_UNROLL
        for (int q = 0; q < kMaxTiles; ++q) {
          pi[q] = m.keyt + i0[q];
          pj[q] = m.keyt + j0[q];
        }
        for (int kk = 0; kk < kn; ++kk) {
          const double* kr = m.keyt + kk * CP;
          const double* cr = m.cumt + kk * CP;
          CHUNKINV_UNROLL
          for (int q = 0; q < kMaxTiles; ++q) {
            double ki[2], kj[2];
            load_pair(pi[q], ki);
            load_pair(pj[q], kj);
            pi[q] += CP;
            pj[q] += CP;
            if (!kChannel) {
              // dot += k_i k_j; pairs in the zero row C (odd C) are formed too and never read.
              CHUNKINV_UNROLL
              for (int r = 0; r < 4; ++r) A.v[q][r] = add_exact_product(ki[r >> 1], kj[r & 1], A.v[q][r]);
            } else if (ok[q]) {
              // dot += k_i k_j exp(min(G_i - G_j, 0)), only where i < C (the exp is the cost).
              CHUNKINV_UNROLL
              for (int r = 0; r < 4; ++r) {
                const int i = i0[q] + (r >> 1), j = j0[q] + (r & 1);
                if (i < C) A.v[q][r] += ki[r >> 1] * kj[r & 1] * detmath::hd::exp(fp64::min0(cr[i] - cr[j]));
              }
            }
          }
          double kd[2];  // k_j, k_i of the diagonal pair (i, j) = (a + 1, a)
          load_pair(kr + a, kd);
          if (!kChannel) A.dg = add_exact_product(kd[1], kd[0], A.dg);
          else if (dg_ok) A.dg += kd[1] * kd[0] * detmath::hd::exp(fp64::min0(cr[a + 1] - cr[a]));
        }
      });
    }
  }

  // L_ij = beta_i dot exp(min(G_i - G_j, 0)) (per channel: beta_i dot).
  auto l_entry = [&](int i, int j, double dot) {
    return kChannel ? m.beta[i] * dot : m.beta[i] * dot * detmath::hd::exp(fp64::min0(m.cum[i] - m.cum[j]));
  };
  if constexpr (kTc) {
    // The dot products into L's strict lower part, then each made L_ij there.
    blk.each([&](int t) {
      const int lane = t % 32, warp = t / 32, W = T / 32, nt = dmma_tiles(C);
      CHUNKINV_UNROLL
      for (int p = 0; p < kMaxDmma; ++p) {
        if (warp + p * W >= nt) continue;
        int I, J;
        dmma_tile(warp + p * W, I, J);
        const int i = 8 * I + lane / 4;
        for (int h = 0; h < 2; ++h) {
          const int j = 8 * J + 2 * (lane % 4) + h;
          if (j < i && i < C) m.L[packed_at(i, j)] = acc[t].v[p][h];
        }
      }
      if (t < C) width[t] = acc[t].row.width();
    });
    blk.each([&](int t) {
      bool bad = false;
      slab_entries(0, packed_size(C), T, t, [&](int e, int i, int j) {
        if (j == i) return;
        double dot = m.L[e];
        if (!dmma_exact(width[i], width[j], d) || dot == 0.0) dot = exact_dot(keys + size_t(i) * d, keys + size_t(j) * d, d);
        const double v = l_entry(i, j, dot);
        m.L[e] = v;
        bad |= !std::isfinite(v);
      });
      if (bad) blk.set(&fl->l_bad);
    });
  }
  // The FP64 units' dot products, each made L_ij in L's strict lower part.
  if constexpr (!kTc) blk.each([&](int t) {
    bool bad = false;
    auto put = [&](int i, int j, double dot) {
      const double v = l_entry(i, j, dot);
      m.L[packed_at(i, j)] = v;
      bad |= !std::isfinite(v);
    };
    CHUNKINV_UNROLL
    for (int q = 0; q < kMaxTiles; ++q) {
      if (t + q * T >= tiles) continue;
      int ti, tj;
      tile_coords(t + q * T, ti, tj);
      CHUNKINV_UNROLL
      for (int r = 0; r < 4; ++r) {
        const int i = 2 * ti + (r >> 1), j = 2 * tj + (r & 1);  // j < i: the tile is below the diagonal
        if (i < C) put(i, j, acc[t].v[q][r]);
      }
    }
    if (t < TR && 2 * t + 1 < C) put(2 * t + 1, 2 * t, acc[t].dg);
    if (bad) blk.set(&fl->l_bad);
  });

  blk.each([&](int t) {
    matrix_entries(C, T, t, [&](int e, int i, int j) {
      const double v = j <= i ? m.L[packed_at(i, j)] : 0.0;
      a.gold_l[size_t(s) * csq + e] = v;
      if (a.gold_l_fp16) a.gold_l_fp16[size_t(s) * csq + e] = fp16_bits_rn(v);
    });
    if (fl->l_bad == 0) return;  // the panels below
    // Eigen's order from row 0 (inf and NaN can reach every row), one thread a column.
    auto l = [&](int i, int j) { return m.L[packed_at(i, j)]; };
    for (int c = t; c < C; c += T) {
      if constexpr (!kColumns) {
        fp64::unit_lower_solve_column(C, c, 0, l, [&](int i) -> double& { return m.X[size_t(i) * C + c]; });
      } else {  // straight into device memory
        double* col = a.gold_inv + size_t(s) * csq + c;
        fp64::unit_lower_solve_column(C, c, 0, l, [&](int i) -> double& { return col[size_t(i) * C]; });
      }
    }
  });
  if (fl->l_bad == 0) {
    // A finite L: each column from x_first(c), its panels shared by two
    // threads (c, h), t = h C + c (block_threads(C) >= 2C): thread h forms
    // the sums of rows 2h and 2h + 1 of a panel (fp64::panel_sums, the same
    // operations in the same order as one thread's), then thread (c, 0) the
    // panel's rows. One thread a column had left half the block's warps
    // waiting through the solve (docs/notes/gpu-notes.md, runs 63-64 and 70-72).
    double* const sums = m.terms;  // 4 C doubles, row r of a panel at r C
    auto l = [&](int i, int j) { return m.L[packed_at(i, j)]; };
    // Row i of column c (rows from kept(c) on) and its value (+0 above).
    // Row-major X (C <= 32, where x_first(c) = 0) keeps every row.
    auto kept = [](int c) { return kColumns ? x_kept(c) : 0; };
    auto column = [&](int c) {
      if constexpr (kColumns) {
        double* col = m.X + x_origin(C, c);
        return [col](int i) -> double& { return col[4 * i]; };
      } else {
        double* col = m.X + c;
        return [col, C](int i) -> double& { return col[size_t(i) * C]; };
      }
    };
    auto value = [&](int c) {
      return [x = column(c), k = kept(c)](int i) { return i >= k ? x(i) : 0.0; };
    };
    for (int p = 0; p < C; p += 4) {
      blk.each([&](int t) {
        const int c = t % C, h = t / C;
        if (h > 1 || p <= x_first(c) || p < kept(c)) return;
        double q[2];
        fp64::panel_sums(C, p, x_first(c), 2 * h, l, value(c), q);
        sums[(2 * h) * C + c] = q[0];
        sums[(2 * h + 1) * C + c] = q[1];
      });
      blk.each([&](int t) {
        if (t >= C || p < kept(t)) return;  // kept(t) >= x_first(t)
        const double q[4] = {sums[t], sums[C + t], sums[2 * C + t], sums[3 * C + t]};
        fp64::panel_rows(C, t, p, x_first(t), q, l, column(t));
      });
    }
  }

  blk.each([&](int t) {
    if (t < fp64::kSumClasses) m.acc[t] = 0.0;  // after the solve, whose sums share the space
    const bool finite = fl->l_bad == 0;
    bool inv_bad = false, upper = false;
    uint64_t max_bits = 0;  // of |entry|: max over non-negative doubles is the max of their bits
    matrix_entries(C, T, t, [&](int e, int i, int j) {
      double v;
      if (!kColumns) {
        v = m.X[e];
        a.gold_inv[size_t(s) * csq + e] = v;
      } else if (finite) {  // +0 above the rows column j keeps
        v = i >= x_kept(j) ? m.X[x_origin(C, j) + 4 * i] : 0.0;
        a.gold_inv[size_t(s) * csq + e] = v;
      } else {  // the solve's own writes, before this phase
        v = a.gold_inv[size_t(s) * csq + e];
      }
      if (!a.reference) return;
      if (!std::isfinite(v)) inv_bad = true;
      else if (const uint64_t b = hd::bits(std::fabs(v)); b > max_bits) max_bits = b;
      upper |= j > i && v != 0.0;
    });
    if (inv_bad) blk.set(&fl->inv_bad);
    if (upper) blk.set(&fl->upper);
    if (max_bits) blk.max(&fl->max_bits, max_bits);
  });
  if (!a.reference) return;
  if (fl->l_bad || fl->upper) {
    blk.each([&](int t) {
      if (t == 0) slow[s] = 1;
    });
    return;
  }
  auto l = [&](int i, int k) { return m.L[packed_at(i, k)]; };
  // A non-finite inverse makes inverse_residual +inf whatever its sums (write_reference_fast).
  if (fl->inv_bad == 0) {
    // X by rows, or by columns above C = 32 (every k >= j is a row the column keeps).
    auto x = [&](int k, int j) { return kColumns ? m.X[x_origin(C, j) + 4 * k] : m.X[size_t(k) * C + j]; };
    residual_pass(blk, C, l, x, m.terms, 2 * reference_slab_stride(C), m.acc, fl, 1);
  }
  blk.each([&](int t) {
    if (t != 0) return;
    slow[s] = 0;
    write_reference_fast(a.reference + size_t(s) * kReferenceMetricCount, C, fl, m.acc);
  });
}

}  // namespace chunkinv::gpu::blocks
