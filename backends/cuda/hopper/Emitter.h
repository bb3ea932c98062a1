#pragma once
// Internal: the state and methods of the sm_90a twin's emitter (kiln-lower-gemm-sm90), shared
// by its two halves: WgmmaGemm.cpp (parameters, the warp roles, the TMA ring and the wgmma
// main loop, the pass) and Epilogue.cpp (the kernel's epilogue on the accumulator fragments
// and the stores of C). Included only by those files.
#include "hopper/GemmMatch.h"
#include "hopper/LaunchPlan.h"
#include "hopper/TwinBuilder.h"
#include "hopper/Sm90Tiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <map>
#include <string>
#include <tuple>

namespace kiln::hopper::detail {

using namespace mlir;
using namespace kiln::tile;

constexpr int64_t kBK = kTileK;
/// Epilogue column groups evaluated together (4 elements per thread each): more would keep
/// too many values live beside a 128 x 256 tile's accumulators.
constexpr int64_t kChunk = 4;
constexpr int64_t kBoxBytes = 64 * 2 * 64; // one 64 x 64 box of 16-bit elements, 128 B rows
/// Column groups (2 columns per thread each) whose row-invariant epilogue inputs a 256-wide
/// tile loads before its main loop: 48 values per input and thread, three of its four
/// boxes (all 32 groups spill beside the 128 accumulators; 24 do not, and took 2048^3 +
/// bias + ReLU from 27.4 to 26.7 us on the H200 against 16).
constexpr int64_t kPreloadGroups = 24;

struct Config {
  int64_t bm = 128; ///< rows of C per tile: 64 per consumer warpgroup (but see pingpong(), rowParts())
  int64_t bn = 128; ///< columns of the product wgmma computes (C's, unless `dual`)
  int64_t stages = 4;
  bool persistent = true;
  std::string suffix = "__sm90"; ///< the twin's name: the kernel's + this
  /// CTAs per cluster (1, 2 or 4). In a cluster, its CTAs take horizontally adjacent tiles
  /// (the same rows of A): each loads its share of the A tile's rows and multicasts it to all.
  int64_t cluster = 1;
  /// With a cluster of 2: its CTAs take vertically adjacent tiles (the same columns of B)
  /// and each loads a share of the B tile's 64-column boxes, multicast to both, instead.
  bool clusterAlongM = false;
  /// The tile order's group: this many tile rows, column by column inside a group.
  int64_t rasterGroup = 8;
  /// Arrivals that free a ring slot: every thread of the consumers that read it (one CTA),
  /// or each such warp's lane 0 in both CTAs of a cluster (remote arrivals are costly).
  int64_t emptyArrivals() const { return cluster == 1 ? 128 * stageReaders() : 4 * stageReaders() * cluster; }
  /// The decode twin (Sm90Tiles.h): C^T's tile = W^T x X^T, so the weight's 64 columns fill
  /// wgmma's 64 rows and C's bm rows are its N.
  bool swapAB = false;
  /// Two products sharing A (GemmMatch::dual): the first half of the bn columns wgmma
  /// computes is A @ B, the second A @ B2, over the same bn / 2 columns of C: one
  /// m64nBNk16 wgmma computes both, and each thread holds a column of one product and the
  /// same column of the other (groups j and j + bn / 16).
  bool dual = false;
  /// C's columns per tile.
  int64_t outN() const { return dual ? bn / 2 : bn; }
  int64_t consumers() const { return hopper::consumers(bm, bn, swapAB); }
  /// 64-row parts per consumer warpgroup, each an m64 accumulator of its own (the tall tile: 2).
  int64_t rowParts() const { return swapAB ? 1 : hopper::rowParts(bm); }
  /// A swapped twin of 128 columns: two consumer warpgroups, each on 64 of them (its own
  /// B box) and every row; no K-clusters.
  bool wideSwap() const { return swapAB && bn > 64; }
  /// wgmma's N: C's columns per tile, or the decode twin's C rows.
  int64_t mmaN() const { return swapAB ? bm : bn; }
  /// Ping-pong (Sm90Tiles.h): the consumers take the CTA's tiles in turn, each whole.
  bool pingpong() const { return hopper::pingpong(bm, bn); }
  /// Consumer warpgroups that read each ring slot: one in ping-pong, else all.
  int64_t stageReaders() const { return pingpong() ? 1 : consumers(); }
  int64_t threads() const { return hopper::threads(bm, bn, swapAB); }
  int64_t aBytes() const { return bm * kBK * 2; }
  int64_t stageBytes() const { return hopper::stageBytes(bm, bn); }
  int64_t stagingOffset() const { return stages * stageBytes(); }
  int64_t barrierOffset() const { return stagingOffset() + stagingBytes(bm, bn, swapAB); }
  int64_t flagOffset() const { return barrierOffset() + 16 * stages; }
  int64_t smemBytes() const { return sharedBytes(bm, bn, stages, swapAB); }
};

/// One accumulator element in the epilogue: its index in the fragment struct, its global
/// row and column in C (clamped to C's last row/column on edge tiles), and the offsets
/// (h, c) of that row and column from the thread's first: two elements with the same h
/// are in the same row, with the same c in the same column.
struct Site {
  int64_t accIndex;
  Value row, col;
  int64_t h, c;
};
/// A loaded epilogue input element, keyed by (load, h or -1, c or -1): -1 where the input
/// does not vary along that axis.
using LoadCache = std::map<std::tuple<void*, int64_t, int64_t>, Value>;

class Emitter : TwinBuilder {
public:
  Emitter(GemmMatch& m, Config cfg, gpu::GPUModuleOp gm)
      : TwinBuilder(m.kernel), m_(m), cfg_(cfg), gm_(gm),
        aShared_(NvmmaSharedLayoutAttr::get(b_.getContext(), 128, "k")),
        bShared_(NvmmaSharedLayoutAttr::get(b_.getContext(), 128, "mn")),
        cShared_(NvmmaSharedLayoutAttr::get(b_.getContext(), 128, "mn")),
        acc_(WgmmaLayoutAttr::get(b_.getContext(), 64, cfg.bn)) {}

  void run();

private:
  Value sharedPtr(Value off) { return byteAt(smem_, off); }
  template <class F, class G> Value ifValue(Type t, Value cond, F&& then, G&& otherwise) {
    auto op = b_.create<scf::IfOp>(loc_, TypeRange{t}, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(op.thenBlock());
    b_.create<scf::YieldOp>(loc_, then());
    b_.setInsertionPointToStart(op.elseBlock());
    b_.create<scf::YieldOp>(loc_, otherwise());
    return op.getResult(0);
  }
  /// The consumer's accumulators: one m64nN fragment (N / 2 f32 a thread) per row part,
  /// part p's elements at p x N / 2 on.
  LLVM::LLVMStructType accType() { return fragmentType(cfg_.mmaN() / 2 * cfg_.rowParts()); }
  LLVM::LLVMStructType fragmentType(int64_t elements) {
    return LLVM::LLVMStructType::getLiteral(b_.getContext(), SmallVector<Type>(elements, b_.getF32Type()));
  }
  /// Elements of one row part's fragment in accType().
  int64_t partElements() const { return cfg_.mmaN() / 2; }

  void declareParams();
  /// `body` once per work item of this CTA; with `inTurn` in a ping-pong twin, only the
  /// items of this consumer warpgroup (every other one, from its index).
  template <class F> void forEachTile(F&& body, bool inTurn = false);
  /// Which 64 rows of the tile this consumer warpgroup computes first: its index times its
  /// row parts, or 0 in ping-pong (each computes a whole 64-row tile) and in swapped twins
  /// (every consumer takes all of the tile's rows; a wide one splits its columns: colBlock()).
  Value rowBlock() {
    if (cfg_.pingpong() || cfg_.swapAB) return i32(0);
    Value c = sub(wg_, i32(1));
    return cfg_.rowParts() > 1 ? mul(c, i32(cfg_.rowParts())) : c;
  }
  /// A swapped twin's 64 columns of the tile this consumer warpgroup computes (0 with one).
  Value colBlock() { return cfg_.wideSwap() ? sub(wg_, i32(1)) : i32(0); }
  /// Ping-pong: the consumers' main loops run one at a time, in the CTA's item order, so
  /// each waits on a ring slot only once the slot's previous fill has been waited on (the
  /// parity of an mbarrier phase tells only adjacent phases apart), and one's epilogue runs
  /// beside the other's main loop. Waits for this consumer's turn, or (`arrive`) passes it
  /// on.
  void takeTurn(bool arrive);
  /// barrier.cluster.wait: every thread of both CTAs, once, after the relaxed arrive that
  /// follows the barriers' initialisation.
  void clusterWait();
  /// Ring slot and phase bit of k-iteration `it` (counted across this CTA's tiles).
  std::pair<Value, Value> slotOf(Value it) {
    return {remu(it, i32(cfg_.stages)), b_.create<arith::AndIOp>(loc_, divu(it, i32(cfg_.stages)), i32(1))};
  }
  Value fullBarrier(Value s) { return sharedPtr(add(mul(s, i32(8)), i32(cfg_.barrierOffset()))); }
  Value emptyBarrier(Value s) { return sharedPtr(add(mul(s, i32(8)), i32(cfg_.barrierOffset() + 8 * cfg_.stages))); }
  void producer();
  Value consumerMainloop();
  /// The wgmma group of the `j`-th k-step of the current work item (ring slot base_ + j).
  Value kTile(Value j, Value acc, bool first);
  /// Sets m0_, n0_ for work unit `t` of C, in `columns` unit columns, in the kernel's order
  /// (groups of 8 M-tiles, column by column inside a group, so CTAs running at once share A
  /// and B tiles in L2). A unit is a tile, or a cluster's adjacent tiles.
  void setTile(Value t, Value rows, Value columns);
  /// Split-K: a warpgroup's share of a tile split along K. Adds its partial sums to the
  /// workspace; the warpgroup that arrives last sums every part in k order. Returns the
  /// tile's accumulator (valid where the flag is set) and whether this warpgroup stores it.
  std::pair<Value, Value> splitKFixup(Value acc);
  /// The fix-ups' frame: an scf.if on `cond` yielding (accumulator, stores-it) whose else
  /// yields (`acc`, true); leaves the builder at the start of its then-block (the caller
  /// holds an InsertionGuard).
  scf::IfOp fixupIf(Value cond, Value acc);
  /// `r` with the 4-float vectors `parts` added to its elements from 4 x q0 on, in order.
  Value addParts(Value r, ArrayRef<Value> parts, int64_t q0);
  /// K-clusters: the peers' partial sums into rank 0's shared memory; rank 0 adds them to
  /// its own in rank order. Returns the tile's accumulator (valid where the flag is set:
  /// rank 0, or every CTA when the launch has no cluster) and whether this CTA stores it.
  std::pair<Value, Value> clusterFixup(Value acc);
  /// mbarrier.try_wait.parity with acquire at cluster scope, until phase `parity` completes:
  /// the arrivals it waits for come from other CTAs, releasing their writes to this one.
  void waitFromCluster(Value bar, Value parity);
  Value sumsBarrier() { return sharedPtr(i32(cfg_.flagOffset())); }
  Value freeBarrier() { return sharedPtr(i32(cfg_.flagOffset() + 8)); }
  void release(Value it) {
    Value bar = emptyBarrier(slotOf(it).first);
    if (cfg_.cluster == 1) {
      b_.create<NVVM::MBarrierArriveOp>(loc_, Type(), bar, Value());
      return;
    }
    // In a cluster, only the frees a producer waits on are made: of the CTA's last `stages`
    // k-steps none is (both CTAs run the same number). So every arrival a CTA makes on its
    // peer's barriers is one the peer waits for before it can finish, and none is in flight
    // when the peer leaves: no cluster barrier is needed at the end.
    ifThen(ult(add(it, i32(cfg_.stages)), totalIters_), [&] { releaseInCluster(bar); });
  }
  void releaseInCluster(Value bar) {
    // The slot is free for a producer once every consumer warp of the cluster is done with
    // it (wgmma.wait_group is warp-wide): lane 0 arrives on that slot's barrier in each CTA.
    // Release at CTA scope, as for the local arrive: the stage was only read (by wgmma), and
    // the refill that follows is ordered by the barrier itself. Cluster scope made every
    // arrive a full memory fence (ERRBAR + CGAERRBAR in SASS): the twin ran 2-3x slower.
    ifThen(eq(remu(tid_, i32(32)), i32(0)), [&] {
      auto clusterPtr = LLVM::LLVMPointerType::get(b_.getContext(), 7);
      for (int64_t r = 0; r < cfg_.cluster; ++r) {
        Value there = b_.create<NVVM::MapaOp>(loc_, clusterPtr, bar, i32(r));
        b_.create<NVVM::MBarrierArriveOp>(loc_, Type(), there, Value(), NVVM::MemScopeKind::CTA);
      }
    });
  }
  void epilogue(Value acc);
  /// The sites of column groups [j0, j1) of this thread's fragment (4 per group).
  SmallVector<Site> chunkSites(int64_t j0, int64_t j1, Value row0, Value col0, bool masked);
  /// f32 C: element by element from registers, masked on edge tiles; on those only rows from
  /// m0_ and columns from n0_ on (a tile moved inside A or B, aM0_ < m0_ or bN0_ < n0_: the
  /// rows above and the columns left are another tile's).
  void epilogueStores(Value acc, Value row0, Value col0, bool masked);
  /// A staged 64 x 64 box of a 16-bit C whose corner is (boxRow, boxCol): its part from row
  /// m0_ and column n0_ on, inside C, by the warpgroup's 16-byte stores (for a tile moved
  /// inside A or B, where a TMA store would write the box's every row and column).
  void copyBox(Value buf, Value boxRow, Value boxCol);
  /// Whether this tile was moved inside A or B (aM0_ < m0_ or bN0_ < n0_).
  Value moved();
  /// 16-bit C: 64 x 64 boxes through shared memory, stored by TMA (which clips edge tiles).
  void epilogueTma(Value acc, Value row0, Value col0, bool masked);
  /// The decode twin: C^T's fragment stored element by element, masked.
  void epilogueSwapped(Value acc);
  /// The decode twin: this thread's first C column in the tile's fragment (its second is 8 on).
  Value swappedCol0();
  /// One element `v` of C at (row, col), by pointer; with `masked`, only inside C's M x N
  /// (all i64), and with `rowMin` / `colMin` only from that row / column on.
  void storeC(Value v, Value row, Value col, Value M, Value N, bool masked, Value rowMin = {}, Value colMin = {});
  /// Column groups [j0, j0 + kChunk) into the staging box `buf` whose first group is `jBox`.
  void stageChunk(Value acc, int64_t j0, Value row0, Value col0, bool masked, Value buf, int64_t jBox);
  /// Emits the epilogue's loads for `site` into `loaded` (as f32), once per distinct element
  /// (a bias is loaded once per column, not once per row); preloaded ones are taken as they are.
  void loadInputs(const Site& site, LoadCache& loaded);
  /// loadInputs for a chunk's sites; with `pairs`, each input that varies along C's columns is
  /// read two adjacent columns (a site with e = 0 and the next) by one vector load.
  void loadChunkInputs(ArrayRef<Site> sites, LoadCache& loaded, bool pairs);
  /// Whether every epilogue input can be read in pairs of columns: its base aligned to two
  /// elements, unit stride along C's columns and an even one along its rows (true: none).
  Value pairsAligned();
  /// One load of epilogue input `v` at `site`, in its element type; with count 2, the element
  /// and the next along C's columns as one vector<2> load (aligned to both: pairsAligned()).
  Value loadInput(Value v, const Site& site, int64_t count = 1);
  /// The pointer and strides of the kernel argument epilogue load `v` reads.
  std::pair<Value, SmallVector<Value, 2>>& inputOf(Value v);
  /// Before a tile's main loop: this thread's values of the epilogue inputs that do not vary
  /// along rows (a bias), for the whole tile, into preloaded_. Loaded in the epilogue they
  /// cost one round trip to L2 per chunk of columns (a chunk's loads cannot move above the
  /// previous chunk's stores: C may alias an input as far as the compiler knows); loaded
  /// here, the main loop hides them.
  void preloadColumnInputs();
  /// Epilogue value `v` at `site`; its loads come from `loaded`.
  Value evalElement(Value v, Value acc, const Site& site, LoadCache& loaded, DenseMap<Value, Value>& memo);

  GemmMatch& m_;
  Config cfg_;
  gpu::GPUModuleOp gm_;
  gpu::GPUFuncOp func_;
  // The twin's layouts (recorded on its gpu.func as `kiln.layouts`): A's and B's ring
  // stages, C's staging boxes, the accumulator fragments.
  NvmmaSharedLayoutAttr aShared_, bShared_, cShared_;
  WgmmaLayoutAttr acc_;
  LaunchPlan plan_;
  // Function arguments.
  Value tmA_, tmB_, tmB2_, M_, N_, K_;
  Value tmC_;            // 16-bit C: stored by TMA from shared memory
  Value cPtr_, cStride_; // C by pointer: f32 C's stores; a 16-bit C's moved tile (copyBox)
  DenseMap<unsigned, std::pair<Value, SmallVector<Value, 2>>> inputs_; // arg -> (ptr, strides)
  SmallVector<Value> epilogueLoads_; // the epilogue's tile.load results, each once
  LoadCache preloaded_;              // per tile: preloadColumnInputs()'s loads, unextended
  // Per-CTA values.
  Value tid_, wg_, kTiles_, smem_, sbase_;
  Value tilesM_, tilesN_, numTiles_; // C's tiles, walked by the persistent loop
  Value rank_;                        // this CTA's rank in its cluster (0 when no cluster)
  Value ws_, skTiles_, kSplits_;       // split-K: workspace, split tiles, chunks per tile (null without)
  // Per work item (set inside forEachTile): the tile's corner, the ring position of its
  // first k-step, its k-steps [kBegin_, kEnd_), and for split-K whether the item is a chunk
  // of a split tile (partial_), the chunk's unit index and its tile's index among the split
  // tiles.
  Value m0_, n0_, base_, kBegin_, kEnd_;
  /// The first of A's rows the tile loads, and the accumulator's first row: m0_, but for a
  /// tile that would run past C's last row, C's last tileM rows (its box inside A: setTile()).
  /// Such a tile stores only its rows from m0_ on.
  Value aM0_;
  /// The first of B's columns the tile loads, and the accumulator's first column: n0_, but
  /// for a tile that would run past C's last column, C's last tileN columns (setTile()). Such
  /// a tile stores only its columns from n0_ on.
  Value bN0_;
  /// The epilogue's row part (the tall tile's second: partElements()): added to every site's
  /// accumulator index (chunkSites). 0 outside the part loops (enterPart()).
  int64_t accBase_ = 0;
  /// Starts the epilogue's row part p: its accumulator elements (accBase_) and its first row,
  /// 64p below `row0` (the part 0's).
  Value enterPart(int64_t p, Value row0) {
    accBase_ = p * partElements();
    return p ? add(row0, i32(64 * p)) : row0;
  }
  // Ping-pong, per item of this consumer: the item, the end of the items and the loop's
  // step (two of the CTA's), from which takeTurn's conditions are computed where used.
  struct {
    Value item, units, loopStep;
  } turn_;
  // Clusters (whole tiles): the k-steps of all the CTA's items (set by forEachTile).
  Value totalIters_;
  Value partial_, skUnit_, skTile_;
  // K-clusters (the decode twin; Sm90Tiles.h): the launch's cluster size s and this CTA's
  // rank (per CTA); per item, its index among the CTA's items and whether another follows.
  Value kSize_, kRank_, itemIndex_, hasNext_;
};

} // namespace kiln::hopper::detail
