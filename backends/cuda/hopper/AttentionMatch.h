#pragma once
// Internal: recognising a tile kernel that is attention in FlashAttention's form, so the
// sm_90a path can give it TMA loads, wgmma and warp specialisation (AttentionSm90.cpp).
// The DSL program is the one users write for every backend (catalogue::attention, or their
// own of the same shape); nothing marks it.
//
// The shape recognised, in tile IR (bf16 or f16 Q, K, V, O of rank 4, head dim D = 64 or 128):
//
//   tile.grid (%i, %h, %b) in (ceildiv(S, 64), H, B) {       // any order of the three
//     %q = tile.load (tile.view %Q[%b, %h, %i, 0]) : <64xD>
//     %r:N = tile.loop %j to <index expression> carry(<rank-1 [64] or [64 x n] f32 tiles>) {
//       %k = tile.load (tile.view %K[x, y, %j, 0]) : <KVxD>    // x, y: not of %i, nor of %j
//         (K's and V's views may be windowed to their first n keys: window(0, n) along 2)
//       %s = tile.dot %q, (tile.transpose %k), (tile.full 0)   // <64xKV> f32
//       ... elementwise ops, iota, splats of indices, row broadcasts and row reductions ...
//       %v = tile.load (tile.view %V[x', y', %j, 0]) : <KVxD>
//       %o = tile.dot (tile.cast %p to bf16|f16), %v, %accIn    // <64xD> f32, yielded
//       tile.yield ...
//     }
//     ... elementwise ops on the loop's results ...
//     tile.store %out, (tile.view %O[%b, %h, %i, 0])
//     tile.store %row, (tile.view %L[%b, %h, %i])     // optional: a [64] f32 row value
//   }
//
// Sequences packed end to end take rank 3 (Q, O [H, T, D], K, V [G, T, D]): views at
// (%h, %i, 0) and (y, %j, 0), every view windowed along dim 1 to the program's sequence
// (index expressions of %b, which indexes no view), and a grid of (ceildiv(T, 64), H, N - c)
// with N a dim of any argument.
//
// Every tile in the loop is 64 rows: one warpgroup's wgmma accumulator holds it (each
// thread two rows), so every op the loop may hold is evaluated where its elements live
// (row reductions by quad shuffles). Anything else keeps the portable lowering.
#include <optional>
#include <string>

#include "Dialect/Tile/TileDialect.h"

#include "llvm/ADT/SmallVector.h"

namespace kiln::hopper {

struct AttentionMatch {
  tile::KernelOp kernel;
  tile::GridOp grid;
  tile::LoopOp loop;
  tile::StoreOp store;
  tile::LoadOp q, k, v;
  tile::DotOp scores, pv; ///< S = Q K^T; the accumulator's update P V
  unsigned qArg = 0, kArg = 0, vArg = 0, oArg = 0;
  /// A second store, of one f32 value per query row (the log-sum-exp, say) through a view of
  /// a 3-D output L [B, H, T] (O's first three dims) at (%b, %h, %i); null when O is the
  /// only store.
  tile::StoreOp rowStore;
  unsigned rowArg = 0;
  int64_t rows = 64; ///< query rows per program (one consumer warpgroup)
  /// Q's sequence dim is K's (self-attention over a whole sequence: as many query tiles as
  /// key tiles); false over a K/V cache (Q [B, H, T, D] beside K [B, G, S, D]), where a
  /// decode step has one query tile per head.
  bool queriesAreKeys = false;
  int64_t kv = 0;    ///< keys per loop step
  /// K's and V's views narrowed to keys [keyStart, keyStart + keyLen) of their sequence dim
  /// (Tensor::window, the same for both: a padded sequence's first keyLen keys, keyStart
  /// null for 0; or a packed sequence's keys); null keyLen when they are whole. Keys past
  /// the window are padding or another sequence's: the program's masks must drop their
  /// scores (K may hold anything there), and the twin zeroes both tiles' rows there before
  /// the products read them (0 x NaN).
  mlir::Value keyStart, keyLen;
  /// Q's and O's views narrowed, the same for both, to rows [qStart, qStart + qLen) of
  /// their sequence dim (a packed sequence's queries); null when whole. The twin reads Q's
  /// whole tiles (rows past the window: another sequence's queries, computed and dropped)
  /// and stores only the window's rows of O.
  mlir::Value qStart, qLen;
  /// The rank of Q, K, V and O: 4 ([B, H, S, D], K/V [B, G, S, D]: the grid's indices are
  /// Q's and O's (b, h, i)) or 3 ([H, T, D], K/V [G, T, D]: sequences packed end to end,
  /// the grid's third index b is not a view index but reaches the windows through
  /// index expressions). The sequence dim is rank - 2, the head dim rank - 3.
  int64_t rank = 4;
  /// The grid's size along b: argument bArg's dim bDim less bLess (O's dim 0 at rank 4; at
  /// rank 3 a dim of the offsets' argument, say B + 1 less 1).
  unsigned bArg = 0, bDim = 0;
  int64_t bLess = 0;
  /// Rank 3 with Q's window a function of the sequence index b alone (not of the head): the
  /// twin's CTAs then go to the query groups that hold a sequence's rows only, found from
  /// the windows at run time, instead of ceildiv(T, 64) groups for every sequence.
  bool sequenceGrid = false;
  /// The kernel arguments whose elements index expressions read (tile.read of an i32 input:
  /// a sequence's length), in order of first use.
  llvm::SmallVector<unsigned, 2> reads;
  int64_t d = 0;     ///< head dim
  mlir::Type inElt;  ///< bf16 or f16
  /// The grid's indices: the query tile (along Q's sequence dim), the head (Q's dim
  /// rank - 3) and the batch or sequence (Q's dim 0 at rank 4), as block arguments of the
  /// grid body.
  mlir::Value iIv, hIv, bIv;
  /// The loop as an online softmax whose keys may be cut into parts, each run from the
  /// loop's initial state and merged after (key splits). Set when the loop carries exactly
  /// a running max m (yield max(m, x), from -inf), a running sum l (yield l a + y, from 0)
  /// and the accumulator acc (the second dot's, on acc a, from 0), where a is
  /// exp2(m - m') or exp(m - m') (`base2`), m' the yielded max; and every select in the
  /// loop has a mask of index comparisons (which the twin can check on a part's first
  /// key step: a part must not start on keys all masked for some row, where a program
  /// that starts from -inf takes exp(-inf - -inf)). Parts merge as
  /// M = max m_p, l = sum l_p base^(m_p - M), acc = sum acc_p base^(m_p - M).
  struct SoftmaxState {
    unsigned m = 0, l = 0, acc = 0; ///< indices into the loop's carried values
    bool base2 = true;
  };
  std::optional<SoftmaxState> softmax;
  std::string noSplitWhy; ///< why `softmax` is empty
  /// Grouped-query attention whose query heads may share a program (head folding): K's and
  /// V's head is one index, h / (H / G) as the DSL writes it (floordiv(h, max(floordiv(H,
  /// max(G, 1)), 1))), H O's dim 1 and G K's, and h is used nowhere else but Q's and O's
  /// views (so nothing of the program but the rows it reads and writes depends on its
  /// head, the loop's count included). Then heads f c .. f c + f - 1, f dividing
  /// max(H / G, 1), read the same K and V, and f of them with few query rows (decode) can
  /// be one program of f T rows.
  bool foldHeads = false;
};

/// Fills `out` when `kernel` has the shape above; otherwise returns false with `why` saying
/// which rule failed.
bool matchAttention(tile::KernelOp kernel, AttentionMatch& out, std::string& why);

} // namespace kiln::hopper
