// kiln-lower-attention-sm90: attention on Hopper. A tile kernel that AttentionMatch
// recognises gets a second kernel, `<name>__sm90_attn`, beside the portable one; the runtime
// launches it whenever its TMA preconditions hold (hopper/Sm90Launch.h).
//
// One CTA takes C of the program's query tiles (C x 64 rows) of one (batch, head), C the
// consumers (2; 3 at head dim 64):
//   warpgroup 0 (producer): one thread loads the C Q tiles by TMA (once), then for each key
//     step j the K and V tiles into a ring of `stages` 128B-swizzled stages; full[s] counts
//     the bytes in, empty[s] the consumers' releases. It gives its registers away (setmaxnreg).
//   warpgroups 1..C (consumers): each is one instance of the DSL program (query tile
//     i = C x group + w). Per key step: S = Q K^T by wgmma (both from shared memory), the
//     program's own loop body evaluated on S's accumulator fragments where they live (row
//     reductions by quad shuffles; index tiles from each thread's coordinates), then
//     acc' = P V by wgmma with P from registers (the fragments of S are the A operand's), and
//     the stage released. Where the loop allows it (Pipeline: the accumulator is read only
//     by its own update), FA3's intra-warpgroup overlap: step j's burst issues S_{j+1} and
//     then P_j V_j, and S_{j+1}'s softmax runs while P_j V_j does (wait_group 1, then 0
//     before P_{j+1} is packed into registers P_j V_j reads); otherwise each step's softmax
//     follows both of its products. The consumers may run different step counts (a causal loop): one
//     with fewer waits for and releases the rest, so the ring stays in step. Then the
//     program's epilogue, stored from registers (rows past S masked).
// Every value of the loop is a [64] or [64 x n] tile: thread t of the warpgroup (warp
// w = t / 32, lane l) holds rows 16w + l/4 + 8h (h = 0, 1) and, of a [64 x n] tile,
// element 4c + 2h + x at column 8c + 2(l % 4) + x: wgmma's accumulator layout.
// Shared memory (1024-B aligned): Q (C x D/64 boxes of 64 rows x 128 B), the ring (per
// stage K then V, each D/64 boxes of KV rows x 128 B), then the mbarriers.
//
// Head folding (GQA, AttentionMatch::foldHeads; the launch's HeadFold parameter f > 1):
// a CTA's programs hold f query heads that share a K/V head, T rows each (f T <= 64): Q's
// map reads T rows of f heads into one 64-row tile, row r being head h + r / T's query
// r mod T; the program's row indices (iota along dim 0) are r mod T; O's rows go back to
// their heads. The CTAs are ceildiv(H, f) per batch instead of H: the K/V cache is read once
// per group, not once per query head.
//
// Padded sequences (AttentionMatch::keyLen, reads): index expressions may read i32 inputs (a
// sequence's length, loaded where an expression needs it), and K and V may be windowed to
// their first n keys. TMA reads whole key tiles, so a tile holding the window's end lands on
// `landed`; the producer zeroes its rows past n (zeroPastWindow), then completes `full`.
//
// Packed sequences (AttentionMatch::rank 3, qStart/qLen): Q and O are windowed too; TMA reads
// 3-D boxes from the windows' starts, O's rows are stored inside the window only. With the
// windows a function of the sequence alone (sequenceGrid), the CTAs are "sequence units":
// (ceildiv(T, C x 64) + sequences) per head, each finding (warp 0, findUnit) the sequence and
// query group it takes among the groups that hold rows; both roles loop over the CTA's units
// (one unless the windows overlap), two CTA barriers a unit, the mbarriers made anew for each.
//
// Key splits (a loop AttentionMatch recognises as an online softmax, when the grid alone
// would leave SMs idle: decode): a launch in clusters of s CTAs (2..kKeySplitMax, a launch
// attribute) gives every CTA of a cluster the same programs, rank r their key steps
// [r p, (r + 1) p), p = ceil(steps / s), each run from the loop's initial state. After the
// loops each peer's consumers write their state (m, l, acc per thread) into their own ring;
// a cluster barrier; rank 0 reads them through distributed shared memory and merges them in
// rank order (the same bits whichever CTA finishes first); a second cluster barrier keeps
// the peers alive until it has; rank 0 runs the epilogue. A part must not start on a key
// step whose first key some row masks (the program, from m = -inf, would take
// exp(-inf - -inf) = NaN there): every CTA checks each boundary from the masks' index
// bounds, and where one fails the cluster runs unsplit (rank 0 takes every step).
#include "hopper/AttentionMatch.h"
#include "hopper/LaunchPlan.h"
#include "hopper/TwinBuilder.h"
#include "hopper/Sm90Tiles.h"
#include "Transforms/Passes.h"
#include "Transforms/ScalarMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <map>
#include <optional>
#include <string>

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERATTENTIONSM90
#include "Transforms/Passes.h.inc"
} // namespace kiln

namespace kiln::hopper {

using namespace mlir;
using namespace kiln::tile;

namespace {

constexpr int64_t kRows = 64; ///< query rows per consumer warpgroup
constexpr int64_t kBox = 64;  ///< 16-bit elements per 128-byte swizzled row

/// The producer warpgroup's registers per thread after setmaxnreg: its TMA loop and the
/// program's index expressions (a causal step count, GQA's head) fit in 32 without spills.
constexpr int32_t kProducerRegs = 32;

/// The attention twin's shared-memory geometry for head dim `d`, `kv` keys per step,
/// `consumers` programs per CTA.
struct AttnGeometry {
  int64_t d, kv, stages, consumers;
  /// K and V windowed (AttentionMatch::keyLen): one more mbarrier, `landed`, after the ring's.
  bool windowed = false;
  /// Sequence units (AttentionMatch::sequenceGrid): 16 bytes after the mbarriers for the
  /// unit a CTA's first warp finds (found, sequence, query group).
  bool units = false;
  int64_t qBytes() const { return consumers * kRows * d * 2; }
  int64_t kBytes() const { return kv * d * 2; }
  int64_t stageBytes() const { return 2 * kBytes(); }
  int64_t barrierOffset() const { return qBytes() + stages * stageBytes(); }
  int64_t recordOffset() const { return barrierOffset() + 8 * (1 + 2 * stages + (windowed ? 1 : 0)); }
  int64_t sharedBytes() const { return recordOffset() + (units ? 16 : 0) + 1024; }
  static int64_t deepest(int64_t d, int64_t kv, int64_t consumers, bool windowed, bool units) {
    int64_t s = 2;
    while (s < 4 && AttnGeometry{d, kv, s + 1, consumers, windowed, units}.sharedBytes() <= kMaxSharedBytes) ++s;
    return s;
  }
  /// 3 at head dim 64 over a whole sequence (its products are half of D = 128's, its
  /// softmax the same: a third program keeps the tensor cores fed; H200, B4 H32 S4096 D64
  /// bf16, 128 keys a step: 515 TFLOP/s against 456 with three at 64 keys), else 2: over a
  /// K/V cache a decode step has one query tile per head, and fewer programs a CTA keep
  /// more CTAs streaming the cache.
  static int64_t consumersFor(const AttentionMatch& m, int64_t asked) {
    return asked ? asked : m.d == 64 && m.queriesAreKeys ? 3 : 2;
  }
  int64_t threads() const { return 128 * (1 + consumers); }
  /// The producer's registers a thread after setmaxnreg: 40 for sequence units with two
  /// consumers (its unit search keeps more live; at 32 ptxas spilled a value of the shared
  /// prologue; two consumers keep 232 either way, three would drop from 160 to 152, too few
  /// for 128 keys), else kProducerRegs.
  int32_t producerRegs() const { return units && consumers == 2 ? 40 : kProducerRegs; }
  /// The consumers' registers a thread (consumerRegisters: 232 for two, 160 for three).
  int64_t consumerRegs() const { return consumerRegisters(threads(), producerRegs()); }
  /// Key splits: a consumer thread's loop state (`values` f32) for each consumer, in the ring
  /// (free once every consumer has left its loop).
  int64_t exchangeBytes(int64_t values) const { return consumers * 128 * values * 4; }
  bool exchangeFits(int64_t values) const { return exchangeBytes(values) <= stages * stageBytes(); }
};

/// The most CTAs a cluster cuts a program's keys into (the portable cluster size).
constexpr int64_t kKeySplitMax = 8;

/// A tile's values in this thread: n / 2 of a [64 x n] tile, 2 of a [64] one (by row h),
/// or one value standing for every element (uniform).
using Vals = SmallVector<Value, 8>;

class AttnEmitter : TwinBuilder {
public:
  AttnEmitter(AttentionMatch& m, gpu::GPUModuleOp gm, int64_t stages, int64_t consumers)
      : TwinBuilder(m.kernel), m_(m), gm_(gm),
        g_{m.d, m.kv, stages ? stages : AttnGeometry::deepest(m.d, m.kv, consumers, bool(m.keyLen), m.sequenceGrid),
           consumers, bool(m.keyLen), m.sequenceGrid},
        qShared_(NvmmaSharedLayoutAttr::get(b_.getContext(), 128, "k")),
        vShared_(NvmmaSharedLayoutAttr::get(b_.getContext(), 128, "mn")) {
    // The state exchanged per consumer thread: 2 values of each [64] tile, n / 2 of [64 x n].
    int64_t values = 0;
    for (Value init : m.loop.getInits()) values += count(init);
    splits_ = m.softmax.has_value() && g_.exchangeFits(values) && !m.qLen;
  }

  void run();

private:
  /// The CTA's work once it has any: barriers, then the producer and the consumers.
  void body();
  /// The function's return and attributes (the launch plan, the layouts).
  void finish();
  /// Sequence units: each role loops over the units the CTA takes (see sequenceUnits in
  /// LaunchPlan), barriers made anew for each.
  void unitLoops(Value bid);
  /// Warp 0: the query group `unit` of head-less numbering falls in (the sequences' groups
  /// that hold rows, in order; a sequence's own in reverse, its longest first), written to
  /// the unit record as (found, sequence, group). Every lane takes part.
  /// Also (the record's fourth word) whether unit + `stride` is one too: another round.
  Value findUnit(Value unit, Value stride);
  void initBarriers();
  void producerWork();
  void consumerWork();
  /// Q's, K's, V's and O's sequence dim (their heads' is the one before).
  unsigned seqDim() const { return unsigned(m_.rank - 2); }
  /// A window bound of AttentionMatch (an index expression of the CTA's indices, the same
  /// for its programs) as an i32, for query tile `i`; 0 for a null one (a window from 0).
  Value windowOf(Value bound, Value i) {
    if (!bound) return i32(0);
    IRMapping map = programIndices(i);
    return fromIndex(index(bound, map));
  }
  /// A window [start, start + len) along a dim of `extent` as the portable lowering clips it
  /// (ViewBase's windowDim): empty unless 0 <= start < extent and len > 0, else cut at the
  /// extent. The start and length the twin reads and stores through (start 0 when empty).
  std::pair<Value, Value> clipWindow(Value start, Value len, Value extent) {
    Value inside = b_.create<arith::AndIOp>(loc_, ult(start, extent), cmp(arith::CmpIPredicate::sgt, len, i32(0)));
    Value kept = b_.create<arith::MinSIOp>(loc_, len, sub(extent, start));
    return {b_.create<arith::SelectOp>(loc_, inside, start, i32(0)), b_.create<arith::SelectOp>(loc_, inside, kept, i32(0))};
  }
  /// Q's and O's window for query tile `i` (their whole sequence dim when not windowed).
  std::pair<Value, Value> queryWindow(Value i) {
    Value extent = dimOf(m_.oArg, seqDim());
    if (!m_.qLen) return {i32(0), extent};
    return clipWindow(windowOf(m_.qStart, i), windowOf(m_.qLen, i), extent);
  }
  Value f32(float v) { return b_.create<arith::ConstantOp>(loc_, b_.getF32FloatAttr(v)); }
  Value toIndex(Value v) { return b_.create<arith::IndexCastOp>(loc_, b_.getIndexType(), v); }
  Value fromIndex(Value v) { return b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), v); }
  Value sharedPtr(Value off) { return byteAt(smem_, off); }
  LLVM::LLVMStructType accType(int64_t n) {
    return LLVM::LLVMStructType::getLiteral(b_.getContext(), SmallVector<Type>(n / 2, b_.getF32Type()));
  }

  void declareParams();
  /// The kernel's dim `symbol` (or constant) as an i32.
  Value dimOf(unsigned arg, unsigned d);
  /// Index value `v` of the tile IR (an expression of grid indices, the loop index, dims),
  /// re-emitted here with `map`'s values for the indices.
  Value index(Value v, IRMapping& map);
  /// The grid indices of the program of query tile `i` (this CTA's head and batch).
  IRMapping programIndices(Value i);
  /// The step count of the program of query tile `i`: its loop's, 0 when there is no such
  /// program (i past S's last tile) or the count is not positive.
  Value stepsOf(Value i);
  /// The most steps of the CTA's programs (query tiles i0 .. i0 + consumers - 1).
  Value mostSteps(Value i0) {
    Value most = stepsOf(i0);
    for (int64_t w = 1; w < g_.consumers; ++w) most = b_.create<arith::MaxUIOp>(loc_, most, stepsOf(add(i0, i32(w))));
    return most;
  }
  void producer();
  /// Producer, windowed K/V: step j's tile (at `stage`) has keys past the window's `len`
  /// from row `inWindow` on; zeroes them once the tile has landed, then completes `full`.
  void zeroPastWindow(Value j, Value stage, Value len, Value inWindow, Value full);
  void consumer();
  /// Named barrier 1 + w: consumer w's turn to issue. Waits for it, or (`pass`) hands the
  /// next turn to consumer w + 1 (round robin).
  void turn(bool pass) {
    Value w = sub(wg_, i32(1));
    Value id = add(i32(1), pass ? remu(add(w, i32(1)), i32(g_.consumers)) : w);
    if (pass) b_.create<NVVM::BarrierArriveOp>(loc_, id, i32(256));
    else b_.create<NVVM::BarrierOp>(loc_, Type(), id, i32(256), NVVM::BarrierReductionAttr(), Value());
  }
  void waitFull(Value j) {
    b_.create<NVVM::MBarrierTryWaitParityOp>(loc_, fullBarrier(remu(ring(j), i32(g_.stages))), phaseOf(j), i32(10000000));
  }
  void release(Value j) {
    b_.create<NVVM::MBarrierArriveOp>(loc_, Type(), emptyBarrier(remu(ring(j), i32(g_.stages))), Value());
  }
  Value phaseOf(Value j) { return b_.create<arith::AndIOp>(loc_, divu(ring(j), i32(g_.stages)), i32(1)); }
  Value qBarrier() { return sharedPtr(i32(g_.barrierOffset())); }
  Value fullBarrier(Value s) { return sharedPtr(add(mul(s, i32(8)), i32(g_.barrierOffset() + 8))); }
  Value emptyBarrier(Value s) { return sharedPtr(add(mul(s, i32(8)), i32(g_.barrierOffset() + 8 + 8 * g_.stages))); }
  /// Windowed K/V (AttnGeometry::windowed): where TMA completes a tile some of whose rows lie
  /// past the window, for the producer to zero them before it completes the stage's full.
  Value landedBarrier() { return sharedPtr(i32(g_.barrierOffset() + 8 + 16 * g_.stages)); }
  Value stageOffset(Value j) { return add(i32(g_.qBytes()), mul(remu(ring(j), i32(g_.stages)), i32(g_.stageBytes()))); }
  /// Key step j's place in the ring: its steps counted from the CTA's first (lo_).
  Value ring(Value j) { return sub(j, lo_); }
  /// Key splits: the CTA's key steps [lo_, hi_) of every program (`all` the most steps of
  /// its programs): rank r's part of them, or all of them for rank 0 (none for the rest)
  /// where a part would start on a step with a key masked for some row.
  void splitKeys(Value i0, Value all);
  /// Whether every row of query tile `i`'s program keeps the first key of step `j` in every
  /// select of the loop (from the masks' index bounds).
  Value firstKeyKept(Value i, Value j);
  /// firstKeyKept where the program runs step `j`, else true (its bounds may not exist).
  Value keptWhereRun(Value i, Value j);
  /// The online softmax's merge of two states over disjoint keys (flat, `sizes` per
  /// carried tile): m the greater, l and acc each scaled by base^(its m - m) and summed.
  Vals combine(Vals cur, const Vals& part, ArrayRef<int64_t> sizes);
  /// Key splits, after the consumer's loop: rank 0's state merged with its peers' (the
  /// peers' own, unchanged); `state` flat, `sizes` per carried tile.
  Vals mergeParts(const Vals& state, ArrayRef<int64_t> sizes);
  /// The loop's results in env_ from their values flat (`sizes` per carried tile).
  void setLoopResults(const Vals& flat, ArrayRef<int64_t> sizes) {
    size_t k = 0;
    for (auto [c, r] : llvm::enumerate(m_.loop.getResults())) {
      env_[r] = Vals(flat.begin() + k, flat.begin() + k + sizes[c]);
      k += size_t(sizes[c]);
    }
  }
  /// The cluster's barrier, arrive (release) then wait (acquire): every thread of every CTA.
  void clusterSync() {
    b_.create<NVVM::ClusterArriveOp>(loc_, UnitAttr());
    b_.create<NVVM::ClusterWaitOp>(loc_, UnitAttr());
  }
  /// 2^x by one MUFU.EX2 (results below 2^-126 flush to zero).
  Value ex2(Value x) {
    return b_.create<LLVM::CallIntrinsicOp>(loc_, b_.getF32Type(), b_.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"),
                                            ValueRange{x})
        .getResult(0);
  }

  /// Whether value `v` of the loop's body is computed from `x` (or is `x`).
  bool reads(Value v, Value x);
  /// FA3's intra-warpgroup overlap, where the loop allows it: the step's softmax (all of
  /// the body but the accumulator's update) on step j + 1's scores runs while step j's
  /// P V is in flight, and the update (acc a) while the scores' product is. It holds when
  /// the carried accumulator is read only on the way to the second product's acc, and no
  /// yield but the product itself needs the product. `frontier`: the tiles the update
  /// reads that do not need the accumulator (made by the softmax, carried to the update).
  struct Pipeline {
    unsigned acc = 0;
    SmallVector<Value> frontier;
  };
  /// The loop's Pipeline, or nothing with `why` saying which condition fails.
  std::optional<Pipeline> pipeline(std::string& why);
  /// Whether every mask of index comparisons that the loop's selects use holds on the whole
  /// tile of key step `j` (uniform); null when the loop has none. The overlapped loop is
  /// versioned on it (pipelinedLoop): ptxas waits for an in-flight wgmma where two paths
  /// join, so a branch of where()'s own between the two waits would end the overlap there.
  Value masksHold(Value j);
  /// Whether the loop's selects have any mask of index comparisons (masksHold is not null);
  /// emits nothing.
  bool hasIndexMasks() {
    bool any = false;
    m_.loop.getBody().front().walk([&](SelectOp sel) { any = any || bounded(sel.getMask()); });
    return any;
  }
  /// wgmma.wait_group `pending` with the accumulator struct `acc` passed through it.
  Value waitGroup(int64_t pending, Value acc);
  /// The pipelined loop (see Pipeline) over the program's steps [lo_, mine): the flat yields.
  Vals pipelinedLoop(const Pipeline& pl, Value mine, const SmallVector<Value>& inits, ArrayRef<int64_t> sizes);

  /// Issues S = Q K^T for key step j as one wgmma group (the caller has waited for its
  /// stage and fenced): the accumulator struct, valid after a wgmma wait.
  Value issueScores(Value j);
  /// P's values before their cast to the input type (the second product's lhs is
  /// cast(P)): packP rounds them once, where evaluating the cast would round each to the
  /// type and back to f32 first (a conversion pair per value that LLVM does not always
  /// fold into the pack).
  Vals pValues() {
    auto c = m_.pv.getLhs().getDefiningOp<CastOp>();
    return expand(evalF(c ? c.getInput() : m_.pv.getLhs()), m_.kv / 2);
  }
  /// P's values as the second product's A fragments (k16 step t: 4 t .. 4 t + 3), rounded
  /// to the input type in pairs.
  SmallVector<Value> packP(const Vals& p);
  /// Issues acc' = P V + acc for key step j (a fence, then one wgmma group), P as packP's
  /// fragments.
  Value issuePV(Value j, ArrayRef<Value> frags, const Vals& acc);
  /// An accumulator struct's values (after the wgmma wait that completes it).
  Vals extract(Value acc);
  /// Tile value `v` in this thread (its loop-carried and dot values set in env_). Index
  /// tiles (iota, splats of indices and their sums, differences, products) of f32 tiles
  /// are i32 values, exact; masks (comparisons and their products) i1; the rest f32.
  Vals eval(Value v);
  /// eval, every value as an f32.
  Vals evalF(Value v);
  Value toF32(Value x);
  /// select(mask != 0, a, c) on values of eval.
  Value select(Value mask, Value a, Value c);
  /// where(mask, a, c) on values of eval (n of them): when the mask is `bounded`, a branch
  /// on `allTrue` that selects per element only when the tile is not all true.
  Vals where(Value mask, const Vals& a, const Vals& c, int64_t n);
  /// Tile `v` as x c: x's values and a positive constant c (a scale of the scores, and
  /// where(mask, x c, -inf)); nothing when it is not one.
  struct Scaled {
    Vals raw;
    float c;
  };
  std::optional<Scaled> scaledOf(Value v);
  /// What eval has computed in the current scope (a loop step, a branch): dropped on leaving.
  struct Scope {
    DenseMap<Value, Vals> env;
    DenseMap<Value, Scaled> scaled;
    IRMapping idx;
  };
  Scope scope() { return Scope{env_, scaled_, idx_}; }
  void restore(Scope s) {
    env_ = std::move(s.env);
    scaled_ = std::move(s.scaled);
    idx_ = std::move(s.idx);
  }
  /// The least and greatest element of an index tile over the program's whole tile
  /// (uniform scalars); nothing when `v` is not an index tile. With `emit` false, only
  /// whether it has them (no IR made).
  struct Range {
    Value lo, hi;
  };
  std::optional<Range> range(Value v, bool emit);
  /// Whether mask `cond` is comparisons of index tiles (<, <=, >, >=) and products of them,
  /// so that `allTrue` can say from their ranges that it holds on the whole tile.
  bool bounded(Value cond);
  Value allTrue(Value cond);
  Value at(const Vals& x, int64_t e) { return x.size() == 1 ? x[0] : x[size_t(e)]; }
  /// Values per thread of `v`'s type (1 for a rank-1 tile's two rows: h; else n / 2).
  int64_t count(Value v) {
    auto t = cast<TileType>(v.getType());
    return t.getRank() == 1 ? 2 : t.getShape()[1] / 2;
  }
  int64_t rowHalf(Value v, int64_t e) { return cast<TileType>(v.getType()).getRank() == 1 ? e : (e / 2) % 2; }
  Vals expand(const Vals& x, int64_t n) { return x.size() == 1 ? Vals(size_t(n), x[0]) : x; }
  Value packPair(Value lo, Value hi);
  /// A 4 x 4 transpose of 32-bit values within each quad (4 adjacent lanes), for each block
  /// of four: thread q's x[4 m + k] becomes thread k's ... so that afterwards thread q holds,
  /// for block m, lane k's x[4 m + q] at position 4 m + k (k = 0 .. 3). Every lane takes part.
  SmallVector<Value> quadTranspose(ArrayRef<Value> x);
  void epilogue();

  AttentionMatch& m_;
  gpu::GPUModuleOp gm_;
  AttnGeometry g_;
  NvmmaSharedLayoutAttr qShared_, vShared_;
  gpu::GPUFuncOp func_;
  LaunchPlan plan_;
  Value tmQ_, tmK_, tmV_, oPtr_;
  SmallVector<Value, 3> oStrides_;
  Value lPtr_; // the row values' L (AttentionMatch::rowStore), f32
  SmallVector<Value, 3> lStrides_;
  // The i32 inputs index expressions read (AttentionMatch::reads): argument -> pointer, strides.
  std::map<unsigned, std::pair<Value, SmallVector<Value, 4>>> reads_;
  std::map<std::string, Value> dims_; // symbol -> i32 parameter
  Value tid_, wg_, smem_, sbase_, group_, h_, b_idx_; // group_: the CTA's query tiles / consumers
  Value fold_; // query heads per program (the HeadFold parameter; 1 without head folding)
  Value qTiles_; // the program's query tiles: ceildiv(S, 64); one past the last is no program
  // Key splits: whether the twin has them, the launch's cluster size and this CTA's rank
  // (1 and 0 without), the CTA's key steps [lo_, hi_) (0 and the most steps without).
  bool splits_ = false;
  Value kSize_, kRank_, lo_, hi_;
  bool firstKey_ = false; // range(): an iota along the columns as its first column only
  // Per consumer: its query tile, its row of the tile per h (as the program sees it: mod T
  // with head folding) and as the tile holds it, its first column.
  Value i_, row_[2], tileRow_[2], col0_;
  IRMapping idx_;                   // the consumer's index values (grid and loop indices)
  DenseMap<Value, Vals> env_;       // tile values computed so far (current scope)
  DenseMap<Value, Scaled> scaled_;  // tiles seen as x c so far (current scope)
  std::optional<Pipeline> pipeline_; // where the loop allows the overlap (plan_.noOverlap says why not)
  // Set while the overlapped softmax is evaluated: where() takes every mask of index
  // comparisons as holding on the whole tile (true) or selects per element (false), without
  // a branch of its own (see masksHold).
  std::optional<bool> tileMasks_;
};

void AttnEmitter::declareParams() {
  MLIRContext* ctx = b_.getContext();
  auto generic = LLVM::LLVMPointerType::get(ctx);
  auto global = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> types;
  auto param = [&](LaunchParam p, Type t) {
    plan_.params.push_back(p);
    types.push_back(t);
  };
  // Boxes of 64 columns (128 B) by the tile's rows, one head (and batch) deep.
  auto box = [&](int64_t rows) { return m_.rank == 4 ? std::vector<int64_t>{kBox, rows, 1, 1} : std::vector<int64_t>{kBox, rows, 1}; };
  param({LaunchParam::TensorMap, int(m_.qArg), 0, box(kRows)}, generic);
  param({LaunchParam::TensorMap, int(m_.kArg), 0, box(m_.kv)}, generic);
  param({LaunchParam::TensorMap, int(m_.vArg), 0, box(m_.kv)}, generic);
  param({LaunchParam::Pointer, int(m_.oArg), 0, {}}, global);
  for (int d = 0; d + 1 < m_.rank; ++d) param({LaunchParam::Stride, int(m_.oArg), d, {}}, b_.getI64Type());
  if (m_.rowStore) {
    param({LaunchParam::Pointer, int(m_.rowArg), 0, {}}, global);
    for (int d = 0; d < 3; ++d) param({LaunchParam::Stride, int(m_.rowArg), d, {}}, b_.getI64Type());
  }
  if (m_.foldHeads) param({LaunchParam::HeadFold, int(m_.kArg), 1, {}}, b_.getI32Type());
  for (unsigned a : m_.reads) {
    param({LaunchParam::Pointer, int(a), 0, {}}, global);
    for (int d = 0; d < m_.kernel.getArgType(a).getRank(); ++d) param({LaunchParam::Stride, int(a), d, {}}, b_.getI64Type());
  }
  // Every symbolic dim, from the first argument that has it.
  std::vector<std::string> symbols;
  for (unsigned a = 0; a < m_.kernel.getNumArguments(); ++a) {
    TensorArgType t = m_.kernel.getArgType(a);
    for (unsigned d = 0; d < unsigned(t.getRank()); ++d) {
      std::string s = t.getDimSymbol(d).str();
      if (s.empty() || llvm::is_contained(symbols, s)) continue;
      symbols.push_back(s);
      param({LaunchParam::Dim, int(a), int(d), {}}, b_.getI32Type());
    }
  }
  b_.setInsertionPointToEnd(gm_.getBody());
  std::string name = m_.kernel.getSymName().str() + "__sm90_attn";
  func_ = b_.create<gpu::GPUFuncOp>(loc_, name, b_.getFunctionType(types, {}));
  func_->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
  func_.setKnownBlockSizeAttr(b_.getDenseI32ArrayAttr({int32_t(g_.threads()), 1, 1}));
  func_->setAttr("nvvm.minctasm", b_.getI32IntegerAttr(1));
  Block& entry = func_.getBody().front();
  unsigned i = 0;
  tmQ_ = entry.getArgument(i++);
  tmK_ = entry.getArgument(i++);
  tmV_ = entry.getArgument(i++);
  oPtr_ = entry.getArgument(i++);
  for (int d = 0; d + 1 < m_.rank; ++d) oStrides_.push_back(entry.getArgument(i++));
  if (m_.rowStore) {
    lPtr_ = entry.getArgument(i++);
    for (int d = 0; d < 3; ++d) lStrides_.push_back(entry.getArgument(i++));
  }
  fold_ = m_.foldHeads ? entry.getArgument(i++) : Value();
  for (unsigned a : m_.reads) {
    auto& [ptr, strides] = reads_[a];
    ptr = entry.getArgument(i++);
    for (int d = 0; d < m_.kernel.getArgType(a).getRank(); ++d) strides.push_back(entry.getArgument(i++));
  }
  for (const std::string& s : symbols) dims_[s] = entry.getArgument(i++);

  plan_.kind = LaunchPlan::Attention;
  plan_.entry = name;
  plan_.threads = g_.threads();
  plan_.sharedBytes = g_.sharedBytes();
  plan_.tileM = g_.consumers * kRows;
  plan_.tileN = m_.kv;
  plan_.tileK = m_.d;
  plan_.stages = g_.stages;
  plan_.output = int(m_.oArg);
  plan_.persistent = false;
  plan_.sequenceUnits = m_.sequenceGrid;
  auto dimName = [&](unsigned a, unsigned d) {
    TensorArgType t = m_.kernel.getArgType(a);
    return t.getDimSymbol(d).empty() ? std::to_string(t.getDimConstant(d)) : t.getDimSymbol(d).str();
  };
  // Query tiles along O's sequence dim, heads, then batches (or sequences).
  const unsigned seq = seqDim();
  plan_.gridDims = {{int(m_.oArg), int(seq), g_.consumers * kRows, dimName(m_.oArg, seq)},
                    {int(m_.oArg), int(seq) - 1, 1, dimName(m_.oArg, seq - 1)},
                    {int(m_.bArg), int(m_.bDim), 1, dimName(m_.bArg, m_.bDim), m_.bLess}};
  if (splits_) { // the keys: K's sequence dim, in steps of kv
    plan_.reduction = {int(m_.kArg), int(seq), m_.kv, dimName(m_.kArg, seq)};
    plan_.kCluster = kKeySplitMax;
  } else {
    plan_.noKeySplits = m_.qLen       ? "its queries are windowed (packed sequences: the grid alone fills the GPU)"
                        : m_.softmax ? "its loop's state does not fit in the K/V ring"
                                     : m_.noSplitWhy;
  }
  std::string why;
  pipeline_ = pipeline(why);
  plan_.noOverlap = why;
}

Value AttnEmitter::dimOf(unsigned arg, unsigned d) {
  TensorArgType t = m_.kernel.getArgType(arg);
  return t.getDimSymbol(d).empty() ? i32(t.getDimConstant(d)) : dims_.at(t.getDimSymbol(d).str());
}

Value AttnEmitter::index(Value v, IRMapping& map) {
  if (Value known = map.lookupOrNull(v)) return known;
  Operation* def = v.getDefiningOp();
  Value out;
  if (auto d = dyn_cast<DimOp>(def)) {
    out = toIndex(dims_.at(d.getSymbol().str()));
  } else if (auto r = dyn_cast<ReadOp>(def)) {
    // tile.read: the element, or 0 where an index is past its dim (nothing read there).
    const unsigned arg = cast<BlockArgument>(r.getTensor()).getArgNumber();
    const auto& [ptr, strides] = reads_.at(arg);
    Value inside = b_.create<arith::ConstantIntOp>(loc_, 1, 1), at = i64(0);
    for (auto [d, x] : llvm::enumerate(r.getIndices())) {
      Value e = fromIndex(index(x, map));
      inside = b_.create<arith::AndIOp>(loc_, inside, ult(e, dimOf(arg, unsigned(d)))); // unsigned: negatives too
      at = b_.create<arith::AddIOp>(loc_, at, b_.create<arith::MulIOp>(loc_, ext64(e), strides[d]));
    }
    auto load = b_.create<scf::IfOp>(loc_, TypeRange{b_.getI32Type()}, inside, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard g(b_);
      b_.setInsertionPointToStart(load.thenBlock());
      auto global = LLVM::LLVMPointerType::get(b_.getContext(), 1);
      Value p = b_.create<LLVM::GEPOp>(loc_, global, b_.getI32Type(), ptr, ValueRange{at});
      b_.create<scf::YieldOp>(loc_, ValueRange{b_.create<LLVM::LoadOp>(loc_, b_.getI32Type(), p, /*alignment=*/4).getResult()});
      b_.setInsertionPointToStart(load.elseBlock());
      b_.create<scf::YieldOp>(loc_, ValueRange{i32(0)});
    }
    out = toIndex(load.getResult(0));
  } else {
    for (Value x : def->getOperands()) index(x, map);
    out = b_.clone(*def, map)->getResult(0);
  }
  map.map(v, out);
  return out;
}

IRMapping AttnEmitter::programIndices(Value i) {
  IRMapping map;
  map.map(m_.iIv, toIndex(i));
  map.map(m_.hIv, toIndex(h_));
  map.map(m_.bIv, toIndex(b_idx_));
  return map;
}

Value AttnEmitter::stepsOf(Value i) {
  IRMapping map = programIndices(i);
  Value steps = fromIndex(index(m_.loop.getCount(), map));
  Value zero = i32(0);
  Value positive = cmp(arith::CmpIPredicate::sgt, steps, zero);
  return b_.create<arith::SelectOp>(loc_, b_.create<arith::AndIOp>(loc_, ult(i, qTiles_), positive), steps, zero);
}

void AttnEmitter::run() {
  declareParams();
  MLIRContext* ctx = b_.getContext();
  b_.setInsertionPointToStart(gm_.getBody());
  if (!gm_.lookupSymbol("kiln_sm90_smem"))
    b_.create<LLVM::GlobalOp>(loc_, LLVM::LLVMArrayType::get(b_.getI8Type(), 0), /*isConstant=*/false,
                              LLVM::Linkage::External, "kiln_sm90_smem", Attribute(), /*alignment=*/1024,
                              /*addrSpace=*/3);
  b_.setInsertionPointToStart(&func_.getBody().front());
  tid_ = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::ThreadIdOp>(loc_, gpu::Dimension::x));
  // The warpgroup index through a shuffle from lane 0: ptxas then knows it is the same
  // across the warp, so the consumers' loops (whose counts depend on it) are not divergent
  // paths, where it would serialise every wgmma.
  wg_ = b_.create<gpu::ShuffleOp>(loc_, divu(tid_, i32(128)), i32(0), i32(32), gpu::ShuffleMode::IDX).getShuffleResult();
  auto shared = LLVM::LLVMPointerType::get(ctx, 3);
  Value raw = b_.create<LLVM::AddressOfOp>(loc_, shared, "kiln_sm90_smem");
  Value rawAddr = b_.create<LLVM::PtrToIntOp>(loc_, b_.getI32Type(), raw);
  sbase_ = b_.create<arith::AndIOp>(loc_, add(rawAddr, i32(1023)), i32(-1024));
  smem_ = b_.create<LLVM::GEPOp>(loc_, raw.getType(), b_.getI8Type(), raw, ValueRange{sub(sbase_, rawAddr)});

  // The CTA's group of query tiles (one per consumer), head and batch; groups in reverse so
  // that a causal grid's longest programs start first.
  Value bid = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::BlockIdOp>(loc_, gpu::Dimension::x));
  // Key splits: a cluster's CTAs (adjacent along x) share their programs.
  if (splits_) {
    kSize_ = b_.create<NVVM::ClusterDim>(loc_, b_.getI32Type());
    kRank_ = b_.create<NVVM::ClusterId>(loc_, b_.getI32Type());
    bid = divu(bid, kSize_);
  } else {
    kSize_ = i32(1);
    kRank_ = i32(0);
  }
  qTiles_ = divu(add(dimOf(m_.oArg, seqDim()), i32(kRows - 1)), i32(kRows));
  if (m_.sequenceGrid) {
    unitLoops(bid);
    finish();
    return;
  }
  Value groups = divu(add(qTiles_, i32(g_.consumers - 1)), i32(g_.consumers));
  if (!fold_) fold_ = i32(1);
  // Programs per batch along the heads: one per head, or per f heads folded.
  Value heads = divu(add(dimOf(m_.oArg, seqDim() - 1), sub(fold_, i32(1))), fold_);
  group_ = sub(sub(groups, i32(1)), remu(bid, groups));
  Value rest = divu(bid, groups);
  h_ = mul(remu(rest, heads), fold_); // the program's first head
  b_idx_ = divu(rest, heads);
  Value i0 = mul(group_, i32(g_.consumers));
  lo_ = i32(0);
  hi_ = mostSteps(i0);
  if (splits_) splitKeys(i0, hi_);

  // Queries windowed (packed sequences): a CTA whose query tiles all lie past its window
  // stores nothing, so it leaves at once (the grid counts every sequence's tiles as the
  // longest one's). Uniform across the CTA: no barrier has been used yet.
  Value live = m_.qLen ? cmp(arith::CmpIPredicate::slt, mul(i0, i32(kRows)), queryWindow(i0).second)
                       : b_.create<arith::ConstantIntOp>(loc_, 1, 1).getResult();
  ifThen(live, [&] { body(); });
  finish();
}

void AttnEmitter::finish() {
  MLIRContext* ctx = b_.getContext();
  b_.create<gpu::ReturnOp>(loc_);
  func_->setAttr(kLaunchPlanAttr, StringAttr::get(ctx, plan_.toJson().dump()));
  func_->setAttr("kiln.layouts", b_.getDictionaryAttr({b_.getNamedAttr("q", qShared_), b_.getNamedAttr("k", qShared_),
                                                        b_.getNamedAttr("v", vShared_),
                                                        b_.getNamedAttr("acc", WgmmaLayoutAttr::get(b_.getContext(), 64, m_.d)),
                                                        b_.getNamedAttr("s", WgmmaLayoutAttr::get(b_.getContext(), 64, m_.kv))}));
}

void AttnEmitter::body() {
  ifThen(eq(tid_, i32(0)), [&] { initBarriers(); });
  b_.create<gpu::BarrierOp>(loc_);
  ifThenElse(eq(wg_, i32(0)), [&] { producer(); }, [&] { consumer(); });
}

/// Every mbarrier (one thread): Q's, each stage's full and empty, `landed`.
void AttnEmitter::initBarriers() {
  b_.create<NVVM::MBarrierInitOp>(loc_, qBarrier(), i32(1), Value());
  for (int64_t s = 0; s < g_.stages; ++s) {
    b_.create<NVVM::MBarrierInitOp>(loc_, fullBarrier(i32(s)), i32(1), Value());
    b_.create<NVVM::MBarrierInitOp>(loc_, emptyBarrier(i32(s)), i32(128 * g_.consumers), Value());
  }
  if (g_.windowed) b_.create<NVVM::MBarrierInitOp>(loc_, landedBarrier(), i32(1), Value());
  b_.create<NVVM::FenceMbarrierInitOp>(loc_);
}

void AttnEmitter::unitLoops(Value bid) {
  // CTA bid takes head bid / R and units u0, u0 + R, u0 + 2R, ... (u0 = bid mod R, R the
  // grid's CTAs per head): one unit where the sequences do not overlap (R >= the units).
  // Units along a head first: CTAs running side by side read the same K/V head (heads first
  // ran 2.6% slower at B4 H32 D128, H200, 2026-12-04).
  Value heads = dimOf(m_.oArg, seqDim() - 1);
  Value gridX = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::GridDimOp>(loc_, gpu::Dimension::x));
  Value round = divu(gridX, heads);
  Value head = divu(bid, round), u0 = remu(bid, round);
  auto record = [&](int64_t k) {
    return b_.create<LLVM::LoadOp>(loc_, b_.getI32Type(), sharedPtr(i32(g_.recordOffset() + 4 * k)), /*alignment=*/4)
        .getResult();
  };
  // Both roles run the same rounds, meeting at the same CTA barriers in each: after the
  // first (none in round 0), the last unit's work is done (its TMA loads consumed, its
  // barriers idle); warp 0 finds the next unit and thread 0 makes its barriers anew; after
  // the second, every thread reads the unit, and whether a round follows it. Barrier 0 with a thread count, not gpu.barrier: the consumers' two would
  // be back to back, and canonicalisation folds adjacent gpu.barriers into one (the roles
  // then count different barriers, and the CTA hangs; H200, 2026-12-04).
  auto ctaBarrier = [&] {
    b_.create<NVVM::BarrierOp>(loc_, Type(), i32(0), i32(g_.threads()), NVVM::BarrierReductionAttr(), Value());
  };
  auto loops = [&](bool producer) {
    // Carried: the round k and whether the CTA has a unit in it (found in the round before:
    // the last round leaves without barriers or a search, so the next CTA on the SM starts
    // at once; H200, 2026-12-04, D64 B4: the search after the last unit cost ~6%).
    Type i1 = b_.getI1Type();
    auto loop = b_.create<scf::WhileOp>(loc_, TypeRange{b_.getI32Type(), i1},
                                        ValueRange{i32(0), b_.create<arith::ConstantIntOp>(loc_, 1, 1).getResult()});
    OpBuilder::InsertionGuard outside(b_); // createBlock moves the insertion point into the block
    {
      Block* before = b_.createBlock(&loop.getBefore(), {}, {b_.getI32Type(), i1}, {loc_, loc_});
      b_.setInsertionPointToStart(before);
      Value k = before->getArgument(0);
      auto search = b_.create<scf::IfOp>(loc_, TypeRange{i1}, before->getArgument(1), /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard g(b_);
        b_.setInsertionPointToStart(search.thenBlock());
        ifThen(ne(k, i32(0)), [&] { ctaBarrier(); }); // round 0: nothing to wait for yet
        if (producer)
          ifThen(ult(tid_, i32(32)), [&] {
            Value found = findUnit(add(u0, mul(k, round)), round);
            ifThen(b_.create<arith::AndIOp>(loc_, eq(tid_, i32(0)), found), [&] {
              ifThen(ne(k, i32(0)), [&] { // made for the last unit: invalidated before made anew
                b_.create<NVVM::MBarrierInvalOp>(loc_, qBarrier());
                for (int64_t s = 0; s < g_.stages; ++s) {
                  b_.create<NVVM::MBarrierInvalOp>(loc_, fullBarrier(i32(s)));
                  b_.create<NVVM::MBarrierInvalOp>(loc_, emptyBarrier(i32(s)));
                }
                if (g_.windowed) b_.create<NVVM::MBarrierInvalOp>(loc_, landedBarrier());
              });
              initBarriers();
            });
          });
        ctaBarrier();
        b_.create<scf::YieldOp>(loc_, ValueRange{ne(record(0), i32(0))});
        b_.setInsertionPointToStart(search.elseBlock());
        b_.create<scf::YieldOp>(loc_, ValueRange{b_.create<arith::ConstantIntOp>(loc_, 0, 1).getResult()});
      }
      b_.create<scf::ConditionOp>(loc_, search.getResult(0), ValueRange{k, search.getResult(0)});
    }
    Block* after = b_.createBlock(&loop.getAfter(), {}, {b_.getI32Type(), i1}, {loc_, loc_});
    b_.setInsertionPointToStart(after);
    h_ = head;
    b_idx_ = record(1);
    group_ = record(2);
    lo_ = i32(0);
    hi_ = mostSteps(mul(group_, i32(g_.consumers)));
    if (producer) producerWork();
    else consumerWork();
    // Read after the work (no register held through it: the producer has few): the next
    // round's search writes the record only after its first barrier, which every thread
    // reaches after this read.
    Value more = ne(record(3), i32(0));
    b_.create<scf::YieldOp>(loc_, ValueRange{add(after->getArgument(0), i32(1)), more});
  };
  ifThenElse(
      eq(wg_, i32(0)),
      [&] {
        b_.create<NVVM::SetMaxRegisterOp>(loc_, g_.producerRegs(), NVVM::SetMaxRegisterAction::decrease);
        loops(true);
      },
      [&] {
        b_.create<NVVM::SetMaxRegisterOp>(loc_, int32_t(g_.consumerRegs()), NVVM::SetMaxRegisterAction::increase);
        loops(false);
      });
}

Value AttnEmitter::findUnit(Value unit, Value stride) {
  Value lane = b_.create<arith::AndIOp>(loc_, tid_, i32(31));
  auto shuffle = [&](Value x, Value offset, gpu::ShuffleMode mode) {
    return b_.create<gpu::ShuffleOp>(loc_, x, offset, i32(32), mode);
  };
  Value T = dimOf(m_.oArg, seqDim());
  Value seqs = sub(dimOf(m_.bArg, m_.bDim), i32(m_.bLess));
  const int64_t rows = kRows * g_.consumers;
  Value chunks = divu(add(b_.create<arith::MaxSIOp>(loc_, seqs, i32(0)), i32(31)), i32(32));
  // Per chunk of 32 sequences (a lane each): the groups each has (its rows within the
  // window and the tensor, counted from the window's start), their running sum across the
  // lanes, and the lane whose groups hold `unit`; at most one lane does.
  Value zero = i32(0);
  auto loop = b_.create<scf::ForOp>(loc_, zero, chunks, i32(1), ValueRange{zero, zero, zero, zero});
  {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(loop.getBody()); // iter args: no terminator yet
    Value before = loop.getRegionIterArgs()[0];
    Value n = add(mul(loop.getInductionVar(), i32(32)), lane);
    auto groupsOf = b_.create<scf::IfOp>(loc_, TypeRange{b_.getI32Type()}, cmp(arith::CmpIPredicate::slt, n, seqs), true);
    {
      OpBuilder::InsertionGuard g2(b_);
      b_.setInsertionPointToStart(groupsOf.thenBlock());
      IRMapping map;
      map.map(m_.bIv, toIndex(n));
      Value start = m_.qStart ? fromIndex(index(m_.qStart, map)) : i32(0);
      Value inside = clipWindow(start, fromIndex(index(m_.qLen, map)), T).second;
      Value groups = divu(add(b_.create<arith::MaxSIOp>(loc_, inside, zero), i32(rows - 1)), i32(rows));
      b_.create<scf::YieldOp>(loc_, ValueRange{groups});
      b_.setInsertionPointToStart(groupsOf.elseBlock());
      b_.create<scf::YieldOp>(loc_, ValueRange{zero});
    }
    Value mine = groupsOf.getResult(0);
    Value upto = mine; // inclusive running sum over the lanes
    for (int64_t d = 1; d < 32; d *= 2) {
      auto up = shuffle(upto, i32(d), gpu::ShuffleMode::UP);
      upto = b_.create<arith::SelectOp>(loc_, up.getValid(), add(upto, up.getShuffleResult()), upto);
    }
    Value first = add(before, sub(upto, mine));
    Value owns = b_.create<arith::AndIOp>(loc_, ule(first, unit), ult(unit, add(before, upto)));
    // The sequence's groups in reverse (its last, with the most keys under a causal mask, first).
    Value group = sub(sub(mine, i32(1)), sub(unit, first));
    SmallVector<Value> picked = {b_.create<arith::SelectOp>(loc_, owns, i32(1), zero),
                                 b_.create<arith::SelectOp>(loc_, owns, n, zero),
                                 b_.create<arith::SelectOp>(loc_, owns, group, zero)};
    for (Value& x : picked)
      for (int64_t d = 16; d >= 1; d /= 2) x = add(x, shuffle(x, i32(d), gpu::ShuffleMode::XOR).getShuffleResult());
    Value total = add(before, shuffle(upto, i32(31), gpu::ShuffleMode::IDX).getShuffleResult());
    SmallVector<Value> out = {total};
    for (int64_t k = 0; k < 3; ++k) out.push_back(add(loop.getRegionIterArgs()[size_t(k + 1)], picked[size_t(k)]));
    b_.create<scf::YieldOp>(loc_, out);
  }
  Value more = b_.create<arith::ExtUIOp>(loc_, b_.getI32Type(), ult(add(unit, stride), loop.getResult(0)));
  ifThen(eq(lane, zero), [&] {
    for (int64_t k = 0; k < 3; ++k)
      b_.create<LLVM::StoreOp>(loc_, loop.getResult(unsigned(k + 1)), sharedPtr(i32(g_.recordOffset() + 4 * k)), /*alignment=*/4);
    b_.create<LLVM::StoreOp>(loc_, more, sharedPtr(i32(g_.recordOffset() + 12)), /*alignment=*/4);
  });
  return ne(loop.getResult(1), zero);
}

void AttnEmitter::producer() {
  b_.create<NVVM::SetMaxRegisterOp>(loc_, kProducerRegs, NVVM::SetMaxRegisterAction::decrease);
  producerWork();
}

void AttnEmitter::producerWork() {
  ifThen(eq(tid_, i32(0)), [&] {
    auto cluster = LLVM::LLVMPointerType::get(b_.getContext(), 7);
    auto tma = [&](Value dstOff, Value map, SmallVector<Value> coords, Value bar) {
      Value dst = b_.create<LLVM::AddrSpaceCastOp>(loc_, cluster, sharedPtr(dstOff));
      b_.create<NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp>(loc_, dst, map, coords, bar, ValueRange{}, Value(),
                                                                Value(), NVVM::TMALoadMode::TILE, false,
                                                                NVVM::CTAGroupKindAttr(), Value());
    };
    const int64_t boxes = m_.d / kBox;
    // Every program's Q tile (a program past S reads zeros: TMA fills them).
    // Folded heads: boxes of T rows of f heads (f T of the tile's 64 rows); TMA counts a
    // box's bytes whole, past the tensor's end too.
    Value qBytes = i32(g_.qBytes());
    if (m_.foldHeads)
      qBytes = b_.create<arith::SelectOp>(loc_, ult(i32(1), fold_),
                                          mul(mul(fold_, dimOf(m_.oArg, 2)), i32(g_.consumers * (m_.d / kBox) * 128)),
                                          qBytes);
    b_.create<NVVM::MBarrierArriveExpectTxOp>(loc_, Type(), qBarrier(), qBytes, NVVM::MemScopeKind::CTA, false,
                                              Value());
    Value i0 = mul(group_, i32(g_.consumers));
    // TMA coordinates, innermost first: column, row along the sequence, head (, batch).
    auto at = [&](Value col, Value row, Value head, Value batch) {
      return m_.rank == 4 ? SmallVector<Value>{col, row, head, batch} : SmallVector<Value>{col, row, head};
    };
    Value qStart = queryWindow(i0).first;
    for (int64_t w = 0; w < g_.consumers; ++w)
      for (int64_t c = 0; c < boxes; ++c)
        tma(i32((w * boxes + c) * kRows * 128), tmQ_,
            at(i32(c * kBox), add(qStart, mul(add(i0, i32(w)), i32(kRows))), h_, b_idx_), qBarrier());
    // K's and V's heads: the same for every program of the CTA (AttentionMatch checks).
    IRMapping map = programIndices(i0);
    auto viewAt = [&](LoadOp ld, int k) {
      if (k < 0) return Value(); // no batch dim
      return fromIndex(index(ld.getView().getDefiningOp<ViewOp>().getIndices()[k], map));
    };
    const int head = m_.rank == 4 ? 1 : 0, batch = m_.rank == 4 ? 0 : -1;
    Value kb = viewAt(m_.k, batch), kh = viewAt(m_.k, head), vb = viewAt(m_.v, batch), vh = viewAt(m_.v, head);
    // K's and V's window: keys [kStart, kStart + len) (the same for the CTA's programs).
    Value len = m_.keyLen ? fromIndex(index(m_.keyLen, map)) : Value();
    Value kStart = m_.keyStart ? fromIndex(index(m_.keyStart, map)) : i32(0);
    if (len) std::tie(kStart, len) = clipWindow(kStart, len, dimOf(m_.kArg, seqDim()));
    auto loop = b_.create<scf::ForOp>(loc_, lo_, hi_, i32(1));
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    Value j = loop.getInductionVar();
    Value s = remu(ring(j), i32(g_.stages));
    // The ring's first pass waits on the phase before the barrier's first: complete.
    b_.create<NVVM::MBarrierTryWaitParityOp>(loc_, emptyBarrier(s), b_.create<arith::XOrIOp>(loc_, phaseOf(j), i32(1)),
                                             i32(10000000));
    Value full = fullBarrier(s);
    Value stage = stageOffset(j);
    Value key0 = mul(j, i32(m_.kv));
    // A tile with rows past the window lands on `landed` instead; see zeroPastWindow.
    Value inWindow, partial, bar = full;
    if (len) {
      inWindow = sub(len, key0);
      partial = cmp(arith::CmpIPredicate::slt, inWindow, i32(m_.kv));
      bar = b_.create<arith::SelectOp>(loc_, partial, landedBarrier(), full);
    }
    b_.create<NVVM::MBarrierArriveExpectTxOp>(loc_, Type(), bar, i32(g_.stageBytes()), NVVM::MemScopeKind::CTA, false,
                                              Value());
    for (int64_t c = 0; c < boxes; ++c) {
      tma(add(stage, i32(c * m_.kv * 128)), tmK_, at(i32(c * kBox), add(kStart, key0), kh, kb), bar);
      tma(add(stage, i32(g_.kBytes() + c * m_.kv * 128)), tmV_, at(i32(c * kBox), add(kStart, key0), vh, vb), bar);
    }
    if (len) ifThen(partial, [&] { zeroPastWindow(j, stage, len, inWindow, full); });
  });
  // Key splits: the producer's threads take part in the consumers' two cluster barriers.
  if (splits_)
    ifThen(ult(i32(1), kSize_), [&] {
      clusterSync();
      clusterSync();
    });
}

void AttnEmitter::zeroPastWindow(Value j, Value stage, Value len, Value inWindow, Value full) {
  // The window reads zeros past its end (as the portable kernel's loads do), but TMA has
  // read the tensor's rows there: padding that may hold anything, NaN included, and P V
  // would take 0 x NaN. So once the tile has landed, its K and V rows from `inWindow` on are
  // zeroed (whole 128-byte rows: the swizzle only permutes 16-byte chunks within a row),
  // made visible to wgmma (the async proxy), and only then is the stage's full barrier
  // completed. The tiles that land here are this CTA's steps from max(lo_, len / kv) on,
  // one at a time, so the n-th of them waits on `landed`'s parity n mod 2.
  Value first = b_.create<arith::MaxSIOp>(loc_, lo_, b_.create<arith::DivSIOp>(loc_, len, i32(m_.kv)));
  Value parity = b_.create<arith::AndIOp>(loc_, sub(j, first), i32(1));
  b_.create<NVVM::MBarrierTryWaitParityOp>(loc_, landedBarrier(), parity, i32(10000000));
  Value from = b_.create<arith::MaxSIOp>(loc_, inWindow, i32(0));
  Value zero = b_.create<LLVM::ZeroOp>(loc_, VectorType::get({4}, b_.getI32Type()));
  auto rows = b_.create<scf::ForOp>(loc_, from, i32(m_.kv), i32(1));
  {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(rows.getBody()->getTerminator());
    Value row = mul(rows.getInductionVar(), i32(128));
    for (int64_t part : {int64_t(0), g_.kBytes()})
      for (int64_t c = 0; c < m_.d / kBox; ++c)
        for (int64_t chunk = 0; chunk < 8; ++chunk)
          b_.create<LLVM::StoreOp>(loc_, zero, sharedPtr(add(add(stage, row), i32(part + c * m_.kv * 128 + chunk * 16))),
                                   /*alignment=*/16);
  }
  b_.create<NVVM::FenceProxyOp>(loc_, NVVM::ProxyKind::async_shared,
                                NVVM::SharedSpaceAttr::get(b_.getContext(), NVVM::SharedSpace::shared_cta));
  b_.create<NVVM::MBarrierArriveOp>(loc_, Type(), full, Value());
}

Value AttnEmitter::packPair(Value lo, Value hi) {
  auto v2 = VectorType::get({2}, b_.getF32Type());
  Value v = b_.create<LLVM::UndefOp>(loc_, v2);
  v = b_.create<LLVM::InsertElementOp>(loc_, v, lo, i32(0));
  v = b_.create<LLVM::InsertElementOp>(loc_, v, hi, i32(1));
  Value n = b_.create<arith::TruncFOp>(loc_, VectorType::get({2}, m_.inElt), v);
  return b_.create<LLVM::BitcastOp>(loc_, b_.getI32Type(), n);
}

Value AttnEmitter::issueScores(Value j) {
  auto field = [&](Value addr) {
    return ext64(b_.create<arith::AndIOp>(loc_, b_.create<arith::ShRUIOp>(loc_, addr, i32(4)), i32(0x3FFF)));
  };
  Value w = sub(wg_, i32(1));
  Value qAddr = add(sbase_, mul(w, i32(m_.d / kBox * kRows * 128)));
  Value kAddr = add(sbase_, stageOffset(j));
  auto type = m_.inElt.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  auto shape = NVVM::MMAShapeAttr::get(b_.getContext(), 64, int(m_.kv), 16);
  Value descQ = b_.create<arith::OrIOp>(loc_, i64(qShared_.descriptorBits(0)), field(qAddr));
  Value descK = b_.create<arith::OrIOp>(loc_, i64(qShared_.descriptorBits(0)), field(kAddr));
  Value acc = b_.create<LLVM::UndefOp>(loc_, accType(m_.kv));
  for (int64_t t = 0; t < m_.d / 16; ++t) {
    // k16 step t: box t / 4 (64 rows of Q, kv rows of K, 128 B each), 32 B into its rows.
    int64_t q = (t / 4) * kRows * 128 + (t % 4) * 32, k = (t / 4) * m_.kv * 128 + (t % 4) * 32;
    acc = b_.create<NVVM::WgmmaMmaAsyncOp>(
        loc_, accType(m_.kv), acc, add(descQ, i64(q >> 4)), add(descK, i64(k >> 4)), shape, type, type,
        NVVM::WGMMATypes::f32, t == 0 ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one, NVVM::WGMMAScaleIn::one,
        NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row, NVVM::MMALayout::col, NVVM::MMAIntOverflowAttr());
  }
  b_.create<NVVM::WgmmaGroupSyncAlignedOp>(loc_);
  return acc;
}

Vals AttnEmitter::extract(Value acc) {
  Vals v;
  const int64_t n = int64_t(cast<LLVM::LLVMStructType>(acc.getType()).getBody().size());
  for (int64_t e = 0; e < n; ++e) v.push_back(b_.create<LLVM::ExtractValueOp>(loc_, acc, ArrayRef<int64_t>{e}));
  return v;
}

SmallVector<Value> AttnEmitter::packP(const Vals& p) {
  // P's fragments of k16 step t are S's accumulator elements of column groups 2t and
  // 2t + 1, as pairs of the input type.
  SmallVector<Value> frags;
  for (int64_t c = 0; c < m_.kv / 8; ++c)
    for (int64_t h = 0; h < 2; ++h) frags.push_back(packPair(at(p, 4 * c + 2 * h), at(p, 4 * c + 2 * h + 1)));
  return frags;
}

Value AttnEmitter::issuePV(Value j, ArrayRef<Value> frags, const Vals& accIn) {
  const int64_t n = m_.d / 2;
  Value acc = b_.create<LLVM::UndefOp>(loc_, accType(m_.d));
  for (int64_t e = 0; e < n; ++e) acc = b_.create<LLVM::InsertValueOp>(loc_, acc, at(accIn, e), ArrayRef<int64_t>{e});
  Value vAddr = add(sbase_, add(stageOffset(j), i32(g_.kBytes())));
  Value descV = b_.create<arith::OrIOp>(
      loc_, i64(vShared_.descriptorBits(m_.kv * 128)),
      ext64(b_.create<arith::AndIOp>(loc_, b_.create<arith::ShRUIOp>(loc_, vAddr, i32(4)), i32(0x3FFF))));
  // wgmma with A from registers (no upstream op).
  std::string ty = m_.inElt.isBF16() ? "bf16" : "f16";
  std::string asmText = "{\n.reg .pred p;\nsetp.ne.b32 p, $" + std::to_string(n + 5) + ", 0;\nwgmma.mma_async.sync.aligned.m64n" +
                        std::to_string(m_.d) + "k16.f32." + ty + "." + ty + " {";
  for (int64_t e = 0; e < n; ++e) asmText += (e ? ", $" : "$") + std::to_string(e);
  asmText += "}, {$" + std::to_string(n) + ", $" + std::to_string(n + 1) + ", $" + std::to_string(n + 2) + ", $" +
             std::to_string(n + 3) + "}, $" + std::to_string(n + 4) + ", p, 1, 1, 1;\n}";
  std::string constraints;
  for (int64_t e = 0; e < n; ++e) constraints += "=f,";
  constraints += "r,r,r,r,l,r";
  for (int64_t e = 0; e < n; ++e) constraints += "," + std::to_string(e);
  // Every A fragment made before the fence (packP): a register written between two wgmmas
  // makes ptxas put a warpgroup.arrive there.
  b_.create<NVVM::WgmmaFenceAlignedOp>(loc_);
  for (int64_t t = 0; t < m_.kv / 16; ++t) {
    SmallVector<Value> ops(frags.begin() + 4 * t, frags.begin() + 4 * t + 4);
    ops.push_back(add(descV, i64((t * 16 * 128) >> 4)));
    ops.push_back(i32(1));
    for (int64_t e = 0; e < n; ++e) ops.push_back(b_.create<LLVM::ExtractValueOp>(loc_, acc, ArrayRef<int64_t>{e}));
    acc = b_.create<LLVM::InlineAsmOp>(loc_, accType(m_.d), ops, asmText, constraints, /*has_side_effects=*/true,
                                       /*is_align_stack=*/false, LLVM::TailCallKind::None,
                                       LLVM::AsmDialectAttr::get(b_.getContext(), LLVM::AsmDialect::AD_ATT), ArrayAttr())
              .getResult(0);
  }
  b_.create<NVVM::WgmmaGroupSyncAlignedOp>(loc_);
  return acc;
}

Value AttnEmitter::toF32(Value x) {
  if (x.getType().isInteger(1)) return b_.create<arith::SelectOp>(loc_, x, f32(1.0f), f32(0.0f));
  if (x.getType().isInteger(32)) return b_.create<arith::SIToFPOp>(loc_, b_.getF32Type(), x);
  return x;
}

Vals AttnEmitter::evalF(Value v) {
  Vals out = eval(v);
  for (Value& x : out) x = toF32(x);
  return out;
}

std::optional<AttnEmitter::Range> AttnEmitter::range(Value v, bool emit) {
  Operation* op = v.getDefiningOp();
  if (!op || !cast<TileType>(v.getType()).getElementType().isF32()) return std::nullopt;
  if (auto io = dyn_cast<IotaOp>(op)) {
    auto t = cast<TileType>(v.getType());
    const bool firstOnly = firstKey_ && t.getRank() == 2 && io.getDim() == 1;
    return emit ? Range{i32(0), i32(firstOnly ? 0 : t.getShape()[size_t(io.getDim())] - 1)} : Range{};
  }
  if (auto s = dyn_cast<SplatOp>(op); s && s.getScalar().getType().isIndex()) {
    if (!emit) return Range{};
    Value x = fromIndex(index(s.getScalar(), idx_));
    return Range{x, x};
  }
  if (auto bc = dyn_cast<BroadcastOp>(op)) return range(bc.getInput(), emit);
  if (isa<AddOp, SubOp>(op)) {
    auto a = range(op->getOperand(0), emit), c = range(op->getOperand(1), emit);
    if (!a || !c) return std::nullopt;
    if (!emit) return Range{};
    if (isa<AddOp>(op)) return Range{add(a->lo, c->lo), add(a->hi, c->hi)};
    return Range{sub(a->lo, c->hi), sub(a->hi, c->lo)};
  }
  return std::nullopt;
}

bool AttnEmitter::bounded(Value cond) {
  Operation* op = cond.getDefiningOp();
  if (!op) return false;
  if (auto bc = dyn_cast<BroadcastOp>(op)) return bounded(bc.getInput());
  if (isa<MulOp>(op)) return bounded(op->getOperand(0)) && bounded(op->getOperand(1));
  auto c = dyn_cast<CmpOp>(op);
  return c && llvm::is_contained({"lt", "le", "gt", "ge"}, c.getPredicate()) && range(c.getLhs(), false) &&
         range(c.getRhs(), false);
}

Value AttnEmitter::allTrue(Value cond) {
  Operation* op = cond.getDefiningOp();
  if (auto bc = dyn_cast<BroadcastOp>(op)) return allTrue(bc.getInput());
  if (isa<MulOp>(op)) return b_.create<arith::AndIOp>(loc_, allTrue(op->getOperand(0)), allTrue(op->getOperand(1)));
  auto c = cast<CmpOp>(op);
  auto a = range(c.getLhs(), true), r = range(c.getRhs(), true);
  StringRef p = c.getPredicate();
  // Holds on the whole tile when it holds between the bounds that are the hardest for it.
  if (p == "lt" || p == "le") return cmp(cmpIPredicate(p), a->hi, r->lo);
  return cmp(cmpIPredicate(p), a->lo, r->hi);
}

Vals AttnEmitter::eval(Value v) {
  if (auto it = env_.find(v); it != env_.end()) return it->second;
  Operation* op = v.getDefiningOp();
  assert(op && "block arguments are set by the loop");
  Type elt = cast<TileType>(v.getType()).getElementType();
  auto round = [&](Value x) {
    if (elt.isF32() || !x.getType().isF32()) return x;
    return Value(b_.create<arith::ExtFOp>(loc_, b_.getF32Type(), b_.create<arith::TruncFOp>(loc_, elt, x).getResult()));
  };
  auto isInt = [](Value x) { return x.getType().isInteger(32); };
  auto isBool = [](Value x) { return x.getType().isInteger(1); };
  const int64_t n = count(v);
  Vals out;
  if (auto f = dyn_cast<FullOp>(op)) {
    out.push_back(round(f32(float(f.getValue().convertToDouble()))));
  } else if (auto s = dyn_cast<SplatOp>(op)) {
    Value x = fromIndex(index(s.getScalar(), idx_));
    out.push_back(elt.isF32() ? x : round(toF32(x)));
  } else if (auto io = dyn_cast<IotaOp>(op)) {
    for (int64_t e = 0; e < n; ++e) {
      Value c = io.getDim() == 0 ? row_[rowHalf(v, e)] : add(col0_, i32(8 * (e / 4) + e % 2));
      out.push_back(elt.isF32() ? c : round(toF32(c)));
    }
  } else if (auto bc = dyn_cast<BroadcastOp>(op)) {
    Vals in = eval(bc.getInput());
    if (in.size() == 1) out = in;
    else
      for (int64_t e = 0; e < n; ++e) out.push_back(in[size_t(rowHalf(v, e))]);
  } else if (isa<ReduceMaxOp, ReduceSumOp>(op)) {
    const bool isMax = isa<ReduceMaxOp>(op);
    Value in = op->getOperand(0);
    // The maximum of x c is c times the maximum of x (x -> fl(x c) is monotone for c > 0):
    // taken on x, two products instead of one per element.
    std::optional<Scaled> sc = isMax ? scaledOf(in) : std::nullopt;
    Vals x = expand(sc ? sc->raw : evalF(in), count(in));
    auto combine = [&](Value a, Value c) {
      return isMax ? Value(b_.create<arith::MaximumFOp>(loc_, a, c)) : Value(b_.create<arith::AddFOp>(loc_, a, c));
    };
    for (int64_t h = 0; h < 2; ++h) {
      // Pairwise (a tree, log2 deep): one warp per scheduler computes the softmax while the
      // other consumer's products run, so the chain's latency is what the step waits for.
      SmallVector<Value> level;
      for (int64_t e = 0; e < int64_t(x.size()); ++e)
        if ((e / 2) % 2 == h) level.push_back(x[size_t(e)]);
      while (level.size() > 1) {
        SmallVector<Value> next;
        for (size_t k = 0; k + 1 < level.size(); k += 2) next.push_back(combine(level[k], level[k + 1]));
        if (level.size() % 2) next.push_back(level.back());
        level = std::move(next);
      }
      Value r = level.front();
      // The row's other columns are in the three other lanes of the quad.
      for (int64_t off : {1, 2}) {
        auto sh = b_.create<gpu::ShuffleOp>(loc_, r, i32(off), i32(32), gpu::ShuffleMode::XOR);
        r = combine(r, sh.getShuffleResult());
      }
      if (sc) r = b_.create<arith::MulFOp>(loc_, r, f32(sc->c));
      out.push_back(round(r));
    }
  } else if (auto sel = dyn_cast<SelectOp>(op); sel && bounded(sel.getMask())) {
    out = where(sel.getMask(), evalF(sel.getA()), evalF(sel.getB()), n);
  } else if (auto sc = isa<SubOp>(op) ? scaledOf(op->getOperand(0)) : std::nullopt) {
    // (x c) - m as one fma(x, c, -m): the rounding of x c is skipped (a contraction, as
    // nvcc makes by default), and x c itself is never computed when nothing else needs it.
    Vals y = evalF(op->getOperand(1));
    for (int64_t e = 0; e < n; ++e)
      out.push_back(b_.create<math::FmaOp>(loc_, at(sc->raw, e), f32(sc->c), b_.create<arith::NegFOp>(loc_, at(y, e))));
  } else if (isScalarMathOp(op)) {
    SmallVector<Vals> ins;
    bool uniform = true;
    for (Value x : op->getOperands()) {
      ins.push_back(eval(x));
      uniform &= ins.back().size() == 1;
    }
    for (int64_t e = 0; e < (uniform ? 1 : n); ++e) {
      SmallVector<Value> xs;
      for (const Vals& in : ins) xs.push_back(at(in, e));
      const bool ints = llvm::all_of(xs, isInt), bools = llvm::all_of(xs, isBool);
      Value r;
      if (isa<AddOp, SubOp, MulOp>(op) && ints && elt.isF32()) {
        // Index arithmetic, exact in i32 (f32 holds these integers exactly below 2^24).
        if (isa<AddOp>(op)) r = add(xs[0], xs[1]);
        else if (isa<SubOp>(op)) r = sub(xs[0], xs[1]);
        else r = mul(xs[0], xs[1]);
      } else if (isa<MulOp>(op) && bools) {
        r = b_.create<arith::AndIOp>(loc_, xs[0], xs[1]); // a product of masks
      } else if (auto c = dyn_cast<CmpOp>(op)) {
        // A mask stays an i1 (0 and 1 are exact in every element type).
        if (ints) r = cmp(cmpIPredicate(c.getPredicate()), xs[0], xs[1]);
        else r = b_.create<arith::CmpFOp>(loc_, cmpFPredicate(c.getPredicate()), toF32(xs[0]), toF32(xs[1]));
      } else if (isa<SelectOp>(op)) {
        r = select(xs[0], xs[1], xs[2]);
      } else if (isa<CastOp>(op) && (isBool(xs[0]) || (isInt(xs[0]) && elt.isF32()))) {
        r = xs[0];
      } else if (isa<Exp2Op>(op)) {
        // ex2.approx.ftz: one MUFU.EX2 (without ftz, ptxas wraps it in a rescale for
        // subnormal results). Results below 2^-126 flush to zero.
        r = round(ex2(toF32(xs[0])));
      } else {
        for (Value& x : xs) x = toF32(x);
        r = round(emitScalar(b_, loc_, op, xs));
      }
      out.push_back(r);
    }
  } else {
    llvm_unreachable("AttentionMatch admits no other op");
  }
  env_[v] = out;
  return out;
}

Value AttnEmitter::select(Value mask, Value a, Value c) {
  if (!mask.getType().isInteger(1))
    mask = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::UNE, toF32(mask), f32(0.0f));
  if (a.getType() != c.getType() || a.getType().isInteger(1)) {
    a = toF32(a);
    c = toF32(c);
  }
  return b_.create<arith::SelectOp>(loc_, mask, a, c);
}

Vals AttnEmitter::where(Value mask, const Vals& a, const Vals& c, int64_t n) {
  if (bounded(mask) && tileMasks_ && *tileMasks_) return expand(a, n);
  if (!bounded(mask) || tileMasks_) {
    Vals m = expand(eval(mask), n), out;
    for (int64_t e = 0; e < n; ++e) out.push_back(select(m[size_t(e)], at(a, e), at(c, e)));
    return out;
  }
  // A mask made of index comparisons is often true on the whole tile (every key step but
  // the last, or but the diagonal one of a causal mask): then the branch skips it. The
  // test is on tile-wide bounds, the same for the warpgroup, so no warp diverges.
  Value all = allTrue(mask);
  SmallVector<Type> types(size_t(n), b_.getF32Type());
  auto branch = b_.create<scf::IfOp>(loc_, types, all, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPointToStart(branch.thenBlock());
  b_.create<scf::YieldOp>(loc_, ValueRange(expand(a, n)));
  b_.setInsertionPointToStart(branch.elseBlock());
  // The mask's values exist only in this branch: whatever is evaluated here is forgotten
  // after it.
  Scope outer = scope();
  Vals m = expand(eval(mask), n), slow;
  for (int64_t e = 0; e < n; ++e) slow.push_back(select(m[size_t(e)], at(a, e), at(c, e)));
  b_.create<scf::YieldOp>(loc_, ValueRange(slow));
  restore(std::move(outer));
  return Vals(branch.getResults().begin(), branch.getResults().end());
}

std::optional<AttnEmitter::Scaled> AttnEmitter::scaledOf(Value v) {
  if (auto it = scaled_.find(v); it != scaled_.end()) return it->second;
  Operation* op = v.getDefiningOp();
  if (!op || !cast<TileType>(v.getType()).getElementType().isF32()) return std::nullopt;
  auto positive = [](Value x) -> std::optional<double> {
    auto f = x.getDefiningOp<FullOp>();
    double c = f ? f.getValue().convertToDouble() : 0;
    if (!f || !(c > 0) || std::isinf(c)) return std::nullopt;
    return c;
  };
  std::optional<Scaled> out;
  if (auto sc = dyn_cast<ScaleOp>(op)) {
    double c = sc.getFactor().convertToDouble();
    if (c > 0 && !std::isinf(c)) out = Scaled{evalF(sc.getInput()), float(c)};
  } else if (isa<MulOp>(op)) {
    for (unsigned k = 0; k < 2 && !out; ++k)
      if (auto c = positive(op->getOperand(k))) out = Scaled{evalF(op->getOperand(1 - k)), float(*c)};
  } else if (auto sel = dyn_cast<SelectOp>(op)) {
    // where(mask, x c, -inf) = where(mask, x, -inf) c.
    auto f = sel.getB().getDefiningOp<FullOp>();
    if (f && f.getValue().isInfinity() && f.getValue().isNegative())
      if (auto a = scaledOf(sel.getA())) {
        const int64_t n = count(v);
        out = Scaled{where(sel.getMask(), expand(a->raw, n), Vals{f32(-INFINITY)}, n), a->c};
      }
  }
  if (out) scaled_[v] = *out;
  return out;
}


void AttnEmitter::consumer() {
  b_.create<NVVM::SetMaxRegisterOp>(loc_, int32_t(g_.consumerRegs()), NVVM::SetMaxRegisterAction::increase);
  consumerWork();
}

void AttnEmitter::consumerWork() {
  Value w = sub(wg_, i32(1));
  Value i0 = mul(group_, i32(g_.consumers));
  i_ = add(i0, w);
  // The program's own steps of the CTA's [lo_, hi_): [lo_, mine).
  Value mine = b_.create<arith::MinUIOp>(loc_, hi_, b_.create<arith::MaxUIOp>(loc_, stepsOf(i_), lo_));
  Value t = remu(tid_, i32(128));
  Value lane = remu(t, i32(32));
  Value rowBase = add(mul(divu(t, i32(32)), i32(16)), divu(lane, i32(4)));
  // Rows and columns inside the program's tiles (iota counts from the tile's corner). With
  // heads folded, row r of the tile is query r mod T of head h + r / T. (Without, or with a
  // launch's f of 1, r mod T is r for every row that is stored: r < T.)
  tileRow_[0] = rowBase;
  tileRow_[1] = add(rowBase, i32(8));
  for (int64_t h = 0; h < 2; ++h) row_[h] = m_.foldHeads ? remu(tileRow_[h], dimOf(m_.oArg, 2)) : tileRow_[h];
  col0_ = mul(remu(lane, i32(4)), i32(2));
  idx_ = programIndices(i_);
  // The program's reads outside its loop (a sequence's length), loaded once here rather than
  // wherever an expression uses them (the loop's condition, each step's masks).
  m_.grid.getBody().front().walk([&](ReadOp r) {
    if (!m_.loop->isAncestor(r)) index(r.getResult(), idx_);
  });
  b_.create<NVVM::MBarrierTryWaitParityOp>(loc_, qBarrier(), i32(0), i32(10000000));
  // Ping-pong (FA3): the consumers issue their tensor-core bursts in turn, round robin from
  // consumer 0, so one's burst runs while the others compute their softmax. Each takes
  // hi_ - lo_ turns (a shorter program idles through the rest in its drain loop); the last
  // consumer hands the first turn over now, consumer 0 takes the last one back at the end.
  ifThen(eq(w, i32(g_.consumers - 1)), [&] { turn(/*pass=*/true); });

  // The carried tiles as flat lists of values (uniform ones widened).
  SmallVector<Value> inits;
  SmallVector<int64_t> sizes;
  for (Value init : m_.loop.getInits()) {
    Vals x = expand(evalF(init), count(init));
    sizes.push_back(int64_t(x.size()));
    llvm::append_range(inits, x);
  }
  // The program's step j on its scores `sValues`, the carried tiles `carried`: evaluates the
  // body up to the second product and issues it; `before` runs before the issue (the next
  // stage's wait: no branch between the step's wgmmas, where ptxas would put a
  // warpgroup.arrive), `then` between the issue and the wait (the next scores' issue).
  // Returns the yielded tiles, flat.
  auto step = [&](ValueRange carried, Value j, const Vals& sValues, function_ref<void()> before,
                  function_ref<void()> then) {
    Scope outer = scope();
    idx_.map(m_.loop.getInductionVar(), toIndex(j));
    size_t k = 0;
    for (auto [c, arg] : llvm::enumerate(m_.loop.getCarried())) {
      env_[arg] = Vals(carried.begin() + k, carried.begin() + k + sizes[c]);
      k += size_t(sizes[c]);
    }
    env_[m_.scores.getResult()] = sValues;
    Vals p = pValues();
    Vals accIn = evalF(m_.pv.getAcc());
    before();
    turn(/*pass=*/false);
    Value pv = issuePV(j, packP(p), accIn);
    then();
    turn(/*pass=*/true);
    b_.create<NVVM::WgmmaWaitGroupSyncOp>(loc_, 0);
    env_[m_.pv.getResult()] = extract(pv);
    release(j);
    SmallVector<Value> next;
    for (auto [c, y] : llvm::enumerate(m_.loop.getBody().front().getTerminator()->getOperands()))
      llvm::append_range(next, expand(evalF(y), sizes[c]));
    restore(std::move(outer));
    return next;
  };
  // Issue-ahead: step j issues its product P_j V_j and, right behind it, step j + 1's
  // scores Q K_{j+1}^T, then waits for both. Each consumer's tensor-core work comes in one
  // burst per step, and the two consumers' bursts interleave with each other's softmax.
  // The scores of step 0 before the loop; the last step (no scores after it) after it.
  SmallVector<Type> types;
  for (Value v : inits) types.push_back(v.getType());
  auto some = b_.create<scf::IfOp>(loc_, types, ult(lo_, mine), /*withElseRegion=*/true);
  if (pipeline_) {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(some.elseBlock());
    b_.create<scf::YieldOp>(loc_, inits);
    b_.setInsertionPointToStart(some.thenBlock());
    b_.create<scf::YieldOp>(loc_, ValueRange(pipelinedLoop(*pipeline_, mine, inits, sizes)));
  } else {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(some.elseBlock());
    b_.create<scf::YieldOp>(loc_, inits);
    b_.setInsertionPointToStart(some.thenBlock());
    waitFull(lo_);
    b_.create<NVVM::WgmmaFenceAlignedOp>(loc_);
    Value s0 = issueScores(lo_);
    b_.create<NVVM::WgmmaWaitGroupSyncOp>(loc_, 0);
    SmallVector<Value> loopInits(inits);
    llvm::append_range(loopInits, extract(s0));
    Value last = sub(mine, i32(1));
    auto loop = b_.create<scf::ForOp>(loc_, lo_, last, i32(1), loopInits);
    {
      OpBuilder::InsertionGuard g2(b_);
      b_.setInsertionPointToStart(loop.getBody());
      Value j = loop.getInductionVar();
      auto args = loop.getRegionIterArgs();
      Value next;
      Value j1 = add(j, i32(1));
      SmallVector<Value> out = step(
          args.take_front(inits.size()), j, Vals(args.begin() + inits.size(), args.end()), [&] { waitFull(j1); },
          [&] { next = issueScores(j1); });
      llvm::append_range(out, extract(next));
      b_.create<scf::YieldOp>(loc_, out);
    }
    auto results = loop.getResults();
    SmallVector<Value> out = step(results.take_front(inits.size()), last,
                                  Vals(results.begin() + inits.size(), results.end()), [] {}, [] {});
    b_.create<scf::YieldOp>(loc_, out);
  }
  setLoopResults(Vals(some.getResults().begin(), some.getResults().end()), sizes);
  // The other program's remaining steps: waited for, their turns taken and handed on, and
  // released, so the ring and the turns stay in step.
  {
    auto drain = b_.create<scf::ForOp>(loc_, mine, hi_, i32(1));
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(drain.getBody()->getTerminator());
    waitFull(drain.getInductionVar());
    turn(/*pass=*/false);
    turn(/*pass=*/true);
    release(drain.getInductionVar());
  }
  ifThen(eq(w, i32(0)), [&] { turn(/*pass=*/false); });
  if (splits_) {
    Vals state;
    for (Value r : m_.loop.getResults()) llvm::append_range(state, env_[r]);
    setLoopResults(mergeParts(state, sizes), sizes);
  }
  ifThen(b_.create<arith::AndIOp>(loc_, ult(i_, qTiles_), eq(kRank_, i32(0))), [&] { epilogue(); });
}

bool AttnEmitter::reads(Value v, Value x) {
  SmallVector<Value> work{v};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value u = work.pop_back_val();
    if (u == x) return true;
    if (!seen.insert(u).second) continue;
    Operation* op = u.getDefiningOp();
    if (op && m_.loop->isProperAncestor(op)) llvm::append_range(work, op->getOperands());
  }
  return false;
}

std::optional<AttnEmitter::Pipeline> AttnEmitter::pipeline(std::string& why) {
  auto yields = m_.loop.getBody().front().getTerminator()->getOperands();
  Value pv = m_.pv.getResult();
  std::optional<unsigned> acc;
  for (auto [k, y] : llvm::enumerate(yields)) {
    if ((y == pv && acc) || (y != pv && reads(y, pv))) {
      why = "the loop yields a value computed from the second product other than the product itself";
      return std::nullopt;
    }
    if (y == pv) acc = unsigned(k);
  }
  assert(acc && "AttentionMatch checks that the loop carries the second product");
  Value a = m_.loop.getCarried()[*acc];
  bool elsewhere = reads(m_.pv.getLhs(), a);
  for (auto [k, y] : llvm::enumerate(yields)) elsewhere |= k != *acc && reads(y, a);
  if (elsewhere) {
    why = "the carried accumulator is read other than by the second product's acc operand";
    return std::nullopt;
  }
  // The frontier: where the update's operands stop reading the accumulator. A broadcast's
  // input is carried instead of the broadcast (two values per thread for a row tile).
  Pipeline pl;
  pl.acc = *acc;
  llvm::SetVector<Value> front;
  SmallVector<Value> work{m_.pv.getAcc()};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (v == a || !seen.insert(v).second) continue;
    if (reads(v, a)) {
      llvm::append_range(work, v.getDefiningOp()->getOperands());
      continue;
    }
    while (auto bc = v.getDefiningOp<BroadcastOp>()) v = bc.getInput();
    front.insert(v);
  }
  pl.frontier.assign(front.begin(), front.end());
  return pl;
}

Value AttnEmitter::masksHold(Value j) {
  Scope outer = scope();
  idx_.map(m_.loop.getInductionVar(), toIndex(j));
  Value all;
  m_.loop.getBody().front().walk([&](SelectOp sel) {
    if (!bounded(sel.getMask())) return;
    Value holds = allTrue(sel.getMask());
    all = all ? b_.create<arith::AndIOp>(loc_, all, holds).getResult() : holds;
  });
  restore(std::move(outer));
  return all;
}

Value AttnEmitter::waitGroup(int64_t pending, Value acc) {
  // The wait ties the accumulator's values (in and out), so nothing reads them before it.
  auto st = cast<LLVM::LLVMStructType>(acc.getType());
  const int64_t n = int64_t(st.getBody().size());
  std::string constraints;
  for (int64_t e = 0; e < n; ++e) constraints += "=f,";
  for (int64_t e = 0; e < n; ++e) constraints += (e ? "," : "") + std::to_string(e);
  SmallVector<Value> ops;
  for (int64_t e = 0; e < n; ++e) ops.push_back(b_.create<LLVM::ExtractValueOp>(loc_, acc, ArrayRef<int64_t>{e}));
  return b_.create<LLVM::InlineAsmOp>(loc_, st, ops, "wgmma.wait_group.sync.aligned " + std::to_string(pending) + ";",
                                      constraints, /*has_side_effects=*/true, /*is_align_stack=*/false,
                                      LLVM::TailCallKind::None,
                                      LLVM::AsmDialectAttr::get(b_.getContext(), LLVM::AsmDialect::AD_ATT), ArrayAttr())
      .getResult(0);
}

Vals AttnEmitter::pipelinedLoop(const Pipeline& pl, Value mine, const SmallVector<Value>& inits,
                                ArrayRef<int64_t> sizes) {
  auto carried = m_.loop.getCarried();
  Operation* yield = m_.loop.getBody().front().getTerminator();
  const unsigned nc = unsigned(carried.size());
  SmallVector<size_t> at(nc + 1, 0); // each carried tile's place in the flat lists
  for (unsigned c = 0; c < nc; ++c) at[c + 1] = at[c] + size_t(sizes[c]);
  const int64_t nAcc = sizes[pl.acc];
  // The softmax's results, flat: P's values (f32: packed into fragments only after the
  // product before has completed, as its A operand holds the fragments' registers until
  // then), the yields but the accumulator's (in the carried order), the frontier's values
  // (their counts in fsizes, set by the first call). The loop carries P packed.
  const size_t nP = size_t(m_.kv / 2), nFrags = size_t(m_.kv / 4), nState = at[nc] - size_t(nAcc);
  SmallVector<size_t> fsizes;
  auto softmax = [&](ArrayRef<Value> state, Value j, const Vals& sValues) {
    Scope outer = scope();
    idx_.map(m_.loop.getInductionVar(), toIndex(j));
    size_t k = 0;
    for (unsigned c = 0; c < nc; ++c)
      if (c != pl.acc) {
        env_[carried[c]] = Vals(state.begin() + k, state.begin() + k + sizes[c]);
        k += size_t(sizes[c]);
      }
    env_[m_.scores.getResult()] = sValues;
    SmallVector<Value> out = pValues();
    for (unsigned c = 0; c < nc; ++c)
      if (c != pl.acc) llvm::append_range(out, expand(evalF(yield->getOperand(c)), sizes[c]));
    const bool first = fsizes.empty();
    for (Value f : pl.frontier) {
      Vals v = eval(f);
      if (first) fsizes.push_back(v.size());
      llvm::append_range(out, v);
    }
    restore(std::move(outer));
    return out;
  };
  // The accumulator's update for step j (the second product's acc operand).
  auto update = [&](ArrayRef<Value> acc, ArrayRef<Value> front, Value j) {
    Scope outer = scope();
    idx_.map(m_.loop.getInductionVar(), toIndex(j));
    env_[carried[pl.acc]] = Vals(acc.begin(), acc.end());
    size_t k = 0;
    for (auto [f, n] : llvm::zip(pl.frontier, fsizes)) {
      env_[f] = Vals(front.begin() + k, front.begin() + k + n);
      k += n;
    }
    Vals out = evalF(m_.pv.getAcc());
    restore(std::move(outer));
    return out;
  };
  auto frags = [&](ArrayRef<Value> st) { return st.take_front(nFrags); };
  auto state = [&](ArrayRef<Value> st) { return st.slice(nFrags, nState); };
  auto frontier = [&](ArrayRef<Value> st) { return st.drop_front(nFrags + nState); };
  // The softmax's results with P packed.
  auto packed = [&](ArrayRef<Value> st) {
    SmallVector<Value> out = packP(Vals(st.begin(), st.begin() + nP));
    llvm::append_range(out, st.drop_front(nP));
    return out;
  };
  // Step lo_'s scores and softmax before the loop.
  waitFull(lo_);
  b_.create<NVVM::WgmmaFenceAlignedOp>(loc_);
  Vals s0 = extract(waitGroup(0, issueScores(lo_)));
  SmallVector<Value> state0;
  for (unsigned c = 0; c < nc; ++c)
    if (c != pl.acc) state0.append(inits.begin() + at[c], inits.begin() + at[c + 1]);
  SmallVector<Value> loopInits(inits.begin() + at[pl.acc], inits.begin() + at[pl.acc + 1]);
  llvm::append_range(loopInits, packed(softmax(state0, lo_, s0)));
  // Step j: one burst of S_{j+1} = Q K_{j+1}^T, the update of acc (while S's product
  // runs), P_j V_j; S_{j+1}'s softmax while P_j V_j runs; then P_j V_j's result.
  Value last = sub(mine, i32(1));
  // One step j on the loop's values `args` (acc, then the softmax's packed results): its
  // next values. `masks`: where() without a branch of its own (see tileMasks_).
  auto body = [&](Value j, ArrayRef<Value> args, std::optional<bool> masks) {
    Value j1 = add(j, i32(1));
    ArrayRef<Value> acc = args.take_front(size_t(nAcc)), st = args.drop_front(size_t(nAcc));
    waitFull(j1);
    turn(/*pass=*/false);
    b_.create<NVVM::WgmmaFenceAlignedOp>(loc_);
    Value next = issueScores(j1);
    Vals accIn = update(acc, frontier(st), j);
    Value pv = issuePV(j, frags(st), accIn);
    turn(/*pass=*/true);
    Vals s = extract(waitGroup(1, next));
    tileMasks_ = masks;
    SmallVector<Value> soft = softmax(state(st), j1, s);
    tileMasks_.reset();
    SmallVector<Value> out = extract(waitGroup(0, pv));
    release(j);
    llvm::append_range(out, packed(soft));
    return out;
  };
  // Loop versioning: while every index mask holds on step j + 1's whole tile, steps with no
  // mask at all (no branch, so no join between the two waits, where ptxas waits for the
  // product); the rest (the last key tile, a causal diagonal) with per-element selects.
  SmallVector<Value> results;
  Value from = lo_;
  SmallVector<Value> values(loopInits);
  {
    const bool masked = hasIndexMasks();
    if (masked) {
      SmallVector<Type> types{b_.getI32Type()};
      for (Value v : values) types.push_back(v.getType());
      SmallVector<Value> init{lo_};
      llvm::append_range(init, values);
      auto loop = b_.create<scf::WhileOp>(loc_, types, init);
      {
        OpBuilder::InsertionGuard g(b_);
        Block* before = b_.createBlock(&loop.getBefore(), {}, types, SmallVector<Location>(types.size(), loc_));
        Value j = before->getArgument(0);
        Value go = b_.create<arith::AndIOp>(loc_, ult(j, last), masksHold(add(j, i32(1))));
        b_.create<scf::ConditionOp>(loc_, go, before->getArguments());
        Block* after = b_.createBlock(&loop.getAfter(), {}, types, SmallVector<Location>(types.size(), loc_));
        SmallVector<Value> args(after->getArguments().begin() + 1, after->getArguments().end());
        SmallVector<Value> out{add(after->getArgument(0), i32(1))};
        llvm::append_range(out, body(after->getArgument(0), args, true));
        b_.create<scf::YieldOp>(loc_, out);
      }
      from = loop.getResult(0);
      values.assign(loop.getResults().begin() + 1, loop.getResults().end());
    }
    auto loop = b_.create<scf::ForOp>(loc_, from, last, i32(1), values);
    {
      OpBuilder::InsertionGuard g(b_);
      b_.setInsertionPointToStart(loop.getBody());
      SmallVector<Value> args(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
      b_.create<scf::YieldOp>(loc_, ValueRange(body(loop.getInductionVar(), args,
                                                    masked ? std::optional<bool>(false) : std::nullopt)));
    }
    results.assign(loop.getResults().begin(), loop.getResults().end());
  }
  ArrayRef<Value> acc = ArrayRef<Value>(results).take_front(size_t(nAcc)),
                  st = ArrayRef<Value>(results).drop_front(size_t(nAcc));
  turn(/*pass=*/false);
  Vals accIn = update(acc, frontier(st), last);
  Value pv = issuePV(last, frags(st), accIn);
  turn(/*pass=*/true);
  Vals accOut = extract(waitGroup(0, pv));
  release(last);
  Vals flat;
  ArrayRef<Value> others = state(st);
  size_t k = 0;
  for (unsigned c = 0; c < nc; ++c) {
    if (c == pl.acc) {
      llvm::append_range(flat, accOut);
    } else {
      flat.append(others.begin() + k, others.begin() + k + sizes[c]);
      k += size_t(sizes[c]);
    }
  }
  return flat;
}

void AttnEmitter::splitKeys(Value i0, Value all) {
  Value per = divu(add(all, sub(kSize_, i32(1))), kSize_);
  // Every boundary r p (0 < r < s) that some program of the CTA runs: its first key kept
  // by every row of that program.
  auto check = b_.create<scf::ForOp>(loc_, i32(1), kSize_, i32(1), ValueRange{b_.create<arith::ConstantIntOp>(loc_, 1, 1)});
  {
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(check.getBody());
    Value ok = check.getRegionIterArgs()[0];
    Value at = mul(check.getInductionVar(), per);
    for (int64_t w = 0; w < g_.consumers; ++w)
      ok = b_.create<arith::AndIOp>(loc_, ok, keptWhereRun(add(i0, i32(w)), at));
    b_.create<scf::YieldOp>(loc_, ok);
  }
  per = b_.create<arith::SelectOp>(loc_, check.getResult(0), per, all);
  lo_ = b_.create<arith::MinUIOp>(loc_, mul(kRank_, per), all);
  hi_ = b_.create<arith::MinUIOp>(loc_, add(lo_, per), all);
}

Value AttnEmitter::keptWhereRun(Value i, Value j) {
  auto when = b_.create<scf::IfOp>(loc_, TypeRange{b_.getI1Type()}, ult(j, stepsOf(i)), /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPointToStart(when.thenBlock());
  b_.create<scf::YieldOp>(loc_, firstKeyKept(i, j));
  b_.setInsertionPointToStart(when.elseBlock());
  b_.create<scf::YieldOp>(loc_, ValueRange{b_.create<arith::ConstantIntOp>(loc_, 1, 1)});
  return when.getResult(0);
}

Value AttnEmitter::firstKeyKept(Value i, Value j) {
  Scope outer = scope();
  idx_ = programIndices(i);
  idx_.map(m_.loop.getInductionVar(), toIndex(j));
  firstKey_ = true;
  Value ok = b_.create<arith::ConstantIntOp>(loc_, 1, 1);
  for (SelectOp sel : m_.loop.getBody().front().getOps<SelectOp>()) ok = b_.create<arith::AndIOp>(loc_, ok, allTrue(sel.getMask()));
  firstKey_ = false;
  restore(std::move(outer));
  return ok;
}

Vals AttnEmitter::combine(Vals cur, const Vals& part, ArrayRef<int64_t> sizes) {
  const AttentionMatch::SoftmaxState& st = *m_.softmax;
  // Offsets of m, l and acc in the flat state.
  SmallVector<int64_t> offset(sizes.size(), 0);
  for (size_t c = 1; c < sizes.size(); ++c) offset[c] = offset[c - 1] + sizes[c - 1];
  const float log2e = 1.4426950408889634f;
  Value negInf = f32(-INFINITY), zero = f32(0.0f);
  Value a[2], c[2];
  for (int64_t h = 0; h < 2; ++h) {
    Value m = cur[size_t(offset[st.m] + h)], pm = part[size_t(offset[st.m] + h)];
    Value top = b_.create<arith::MaximumFOp>(loc_, m, pm);
    // base^(x - top), 0 for a part with no keys (x = -inf: also where top is -inf).
    auto weight = [&](Value x) {
      Value d = b_.create<arith::SubFOp>(loc_, x, top);
      if (!st.base2) d = b_.create<arith::MulFOp>(loc_, d, f32(log2e));
      Value none = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::OEQ, x, negInf);
      return b_.create<arith::SelectOp>(loc_, none, zero, ex2(d)).getResult();
    };
    a[h] = weight(m);
    c[h] = weight(pm);
    cur[size_t(offset[st.m] + h)] = top;
  }
  auto mix = [&](int64_t e, int64_t h) {
    Value x = b_.create<arith::MulFOp>(loc_, cur[size_t(e)], a[h]);
    cur[size_t(e)] = b_.create<math::FmaOp>(loc_, part[size_t(e)], c[h], x);
  };
  for (int64_t h = 0; h < 2; ++h) mix(offset[st.l] + h, h);
  for (int64_t e = 0; e < sizes[st.acc]; ++e) mix(offset[st.acc] + e, (e / 2) % 2);
  return cur;
}

Vals AttnEmitter::mergeParts(const Vals& state, ArrayRef<int64_t> sizes) {
  const int64_t values = int64_t(state.size());
  SmallVector<Type> types(state.size(), b_.getF32Type());
  auto split = b_.create<scf::IfOp>(loc_, types, ult(i32(1), kSize_), /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPointToStart(split.elseBlock());
  b_.create<scf::YieldOp>(loc_, ValueRange(state));
  b_.setInsertionPointToStart(split.thenBlock());
  // Every consumer has left its loop: the ring is free (each waited for every stage the
  // producer filled). Value v of consumer w's thread t at ((w values + v) 128 + t) x 4.
  b_.create<NVVM::BarrierOp>(loc_, Type(), i32(1 + g_.consumers), i32(128 * g_.consumers), NVVM::BarrierReductionAttr(),
                             Value());
  Value t = remu(tid_, i32(128));
  Value w = sub(wg_, i32(1));
  Value mineAt = add(i32(g_.qBytes()), mul(add(mul(w, i32(values * 128)), t), i32(4)));
  ifThen(ult(i32(0), kRank_), [&] {
    for (int64_t v = 0; v < values; ++v)
      b_.create<LLVM::StoreOp>(loc_, state[size_t(v)], sharedPtr(add(mineAt, i32(v * 512))), /*alignment=*/4);
  });
  clusterSync();
  // Rank 0: the peers' states in rank order.
  auto lead = b_.create<scf::IfOp>(loc_, types, eq(kRank_, i32(0)), /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard lg(b_);
    b_.setInsertionPointToStart(lead.elseBlock());
    b_.create<scf::YieldOp>(loc_, ValueRange(state));
    b_.setInsertionPointToStart(lead.thenBlock());
    auto peers = b_.create<scf::ForOp>(loc_, i32(1), kSize_, i32(1), ValueRange(state));
    {
      OpBuilder::InsertionGuard pg(b_);
      b_.setInsertionPointToStart(peers.getBody());
      auto clusterPtr = LLVM::LLVMPointerType::get(b_.getContext(), 7);
      Value there = b_.create<NVVM::MapaOp>(loc_, clusterPtr, sharedPtr(mineAt), peers.getInductionVar());
      Vals cur(peers.getRegionIterArgs().begin(), peers.getRegionIterArgs().end()), part;
      for (int64_t v = 0; v < values; ++v)
        part.push_back(b_.create<LLVM::LoadOp>(loc_, b_.getF32Type(), byteAt(there, i32(v * 512)), /*alignment=*/4));
      cur = combine(cur, part, sizes);
      b_.create<scf::YieldOp>(loc_, ValueRange(cur));
    }
    b_.create<scf::YieldOp>(loc_, peers.getResults());
  }
  // The peers stay until rank 0 has read them.
  clusterSync();
  b_.create<scf::YieldOp>(loc_, lead.getResults());
  return Vals(split.getResults().begin(), split.getResults().end());
}

SmallVector<Value> AttnEmitter::quadTranspose(ArrayRef<Value> x) {
  Value lane = b_.create<arith::AndIOp>(loc_, tid_, i32(31));
  Value q = b_.create<arith::AndIOp>(loc_, lane, i32(3)), quad = sub(lane, q);
  auto pick = [&](ArrayRef<Value> four, Value k) { // four[k], k uniform only per thread
    Value v = four[0];
    for (int64_t i = 1; i < 4; ++i) v = b_.create<arith::SelectOp>(loc_, eq(k, i32(int32_t(i))), four[size_t(i)], v);
    return v;
  };
  SmallVector<Value> out;
  for (size_t m = 0; m + 3 < x.size(); m += 4) {
    ArrayRef<Value> four = x.slice(m, 4);
    // Step s: each thread sends its value for lane (q + s) mod 4 and receives, from lane
    // (q - s) mod 4, that lane's value for q.
    Value got[4];
    for (int64_t s = 0; s < 4; ++s) {
      Value send = pick(four, b_.create<arith::AndIOp>(loc_, add(q, i32(int32_t(s))), i32(3)));
      Value from = add(quad, b_.create<arith::AndIOp>(loc_, sub(add(q, i32(4)), i32(int32_t(s))), i32(3)));
      got[s] = b_.create<gpu::ShuffleOp>(loc_, send, from, i32(32), gpu::ShuffleMode::IDX).getShuffleResult();
    }
    // Lane k's value arrived at step (q - k) mod 4.
    for (int64_t k = 0; k < 4; ++k)
      out.push_back(pick(got, b_.create<arith::AndIOp>(loc_, sub(add(q, i32(4)), i32(int32_t(k))), i32(3))));
  }
  return out;
}

void AttnEmitter::epilogue() {
  // O[b, h, i x 64 + row, col] (rank 3: O[h, start + i x 64 + row, col]): element pairs
  // (x = 0, 1) in one 4-byte store, rows past S (and past the window) skipped. The row values L[b, h, i x 64 + row]: a row's four threads (a quad) hold the
  // same value; its first stores it.
  Vals o = expand(evalF(m_.store.getValue()), m_.d / 2);
  Vals rowValues = m_.rowStore ? evalF(m_.rowStore.getValue()) : Vals();
  Value quadFirst = m_.rowStore ? eq(b_.create<arith::AndIOp>(loc_, tid_, i32(3)), i32(0)) : Value();
  auto global = LLVM::LLVMPointerType::get(b_.getContext(), 1);
  Value S = dimOf(m_.oArg, seqDim());
  // O's window (packed sequences): rows [start, start + len) of the sequence dim, clipped as
  // the portable kernel clips it (clipWindow).
  Value start = i32(0), len;
  if (m_.qLen)
    std::tie(start, len) = clipWindow(m_.qStart ? fromIndex(index(m_.qStart, idx_)) : i32(0),
                                      fromIndex(index(m_.qLen, idx_)), S);
  const int64_t headAt = m_.rank - 3, rowAt = m_.rank - 2;
  // 16-byte stores where O allows them (its base and strides at 8-element multiples, uniform
  // across the CTA), else pairs as before.
  const bool wide16 = m_.d % 32 == 0;
  Value wide16Ok;
  if (wide16) {
    Value addr = b_.create<LLVM::PtrToIntOp>(loc_, b_.getI64Type(), oPtr_);
    Value misaligned = b_.create<arith::AndIOp>(loc_, addr, i64(15));
    for (int64_t d = 0; d + 1 < m_.rank; ++d)
      misaligned = b_.create<arith::OrIOp>(loc_, misaligned, b_.create<arith::AndIOp>(loc_, oStrides_[size_t(d)], i64(7)));
    wide16Ok = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, misaligned, i64(0));
  }
  for (int64_t h = 0; h < 2; ++h) {
    Value row = add(mul(i_, i32(kRows)), tileRow_[h]);
    Value stored = ult(row, S);
    if (len) { // signed: a window of no rows (or fewer than none) stores nothing
      stored = cmp(arith::CmpIPredicate::slt, row, len);
      row = add(start, row);
      stored = b_.create<arith::AndIOp>(loc_, stored, ult(row, S));
    }
    Value head = h_;
    if (m_.foldHeads) { // f > 1: tile row r is query r mod T of head h + r / T (if one of O's)
      Value folded = ult(i32(1), fold_);
      Value off = b_.create<arith::SelectOp>(loc_, folded, divu(tileRow_[h], S), i32(0));
      row = b_.create<arith::SelectOp>(loc_, folded, row_[h], row);
      head = add(h_, off);
      stored = b_.create<arith::AndIOp>(
          loc_, ult(row, S), b_.create<arith::AndIOp>(loc_, ult(off, fold_), ult(head, dimOf(m_.oArg, 1))));
    }
    Value base = mul(ext64(head), oStrides_[headAt]);
    if (m_.rank == 4) base = add(mul(ext64(b_idx_), oStrides_[0]), base);
    // The row's element pairs, and (wide) the same transposed within the quad: a warp's
    // pair stores write 16 of a 32-byte sector's bytes each, so every sector of O took two
    // stores; after the transpose each thread holds 8 adjacent columns (16 bytes) and a
    // quad's four stores fill 64 contiguous bytes. The shuffles run in every lane, before
    // the row's branch.
    SmallVector<Value> pairs;
    for (int64_t c = 0; c < m_.d / 8; ++c) pairs.push_back(packPair(o[size_t(4 * c + 2 * h)], o[size_t(4 * c + 2 * h + 1)]));
    SmallVector<Value> wide = wide16 ? quadTranspose(pairs) : SmallVector<Value>();
    ifThen(stored, [&] {
      Value rowBase = add(base, mul(ext64(row), oStrides_[rowAt]));
      auto storePairs = [&] {
        for (int64_t c = 0; c < m_.d / 8; ++c) {
          Value col = ext64(add(col0_, i32(8 * c)));
          Value ptr = b_.create<LLVM::GEPOp>(loc_, global, m_.inElt, oPtr_, ValueRange{add(rowBase, col)});
          b_.create<LLVM::StoreOp>(loc_, pairs[size_t(c)], ptr, /*alignment=*/4);
        }
      };
      if (!wide16) return storePairs();
      ifThenElse(
          wide16Ok,
          [&] {
            // Thread q of the quad: columns 8 (4 m + q) .. + 7, for m = 0 .. D / 32 - 1.
            Value q = b_.create<arith::AndIOp>(loc_, tid_, i32(3));
            auto v4 = VectorType::get({4}, b_.getI32Type());
            for (int64_t m = 0; m < m_.d / 32; ++m) {
              Value v = b_.create<LLVM::UndefOp>(loc_, v4);
              for (int64_t k = 0; k < 4; ++k)
                v = b_.create<LLVM::InsertElementOp>(loc_, v, wide[size_t(4 * m + k)], i32(int32_t(k)));
              Value col = ext64(mul(add(i32(int32_t(4 * m)), q), i32(8)));
              Value ptr = b_.create<LLVM::GEPOp>(loc_, global, m_.inElt, oPtr_, ValueRange{add(rowBase, col)});
              b_.create<LLVM::StoreOp>(loc_, v, ptr, /*alignment=*/16);
            }
          },
          storePairs);
      if (m_.rowStore)
        ifThen(quadFirst, [&] {
          Value off = add(add(mul(ext64(b_idx_), lStrides_[0]), mul(ext64(head), lStrides_[1])),
                          mul(ext64(row), lStrides_[2]));
          Value ptr = b_.create<LLVM::GEPOp>(loc_, global, b_.getF32Type(), lPtr_, ValueRange{off});
          b_.create<LLVM::StoreOp>(loc_, at(rowValues, h), ptr, /*alignment=*/4);
        });
    });
  }
}

struct LowerAttentionSm90Pass : kiln::impl::KilnLowerAttentionSm90Base<LowerAttentionSm90Pass> {
  using KilnLowerAttentionSm90Base::KilnLowerAttentionSm90Base;
  void runOnOperation() override {
    ModuleOp m = getOperation();
    // Two at least: a consumer waits for step j + 1's stage while it still reads step j's.
    if (stages < 0 || stages == 1 || stages > 4) {
      m.emitError("stages must be 0 (the deepest that fits) or 2..4, got " + std::to_string(stages));
      return signalPassFailure();
    }
    if (consumers != 0 && consumers != 2 && consumers != 3) {
      m.emitError("consumers must be 0 (kiln's choice), 2 or 3, got " + std::to_string(consumers));
      return signalPassFailure();
    }
    for (KernelOp k : llvm::to_vector(m.getOps<KernelOp>())) {
      AttentionMatch match;
      std::string why;
      if (!matchAttention(k, match, why)) {
        // Say why beside the GEMM path's reason (the kernel is neither).
        std::string gemm;
        if (auto s = m->getAttrOfType<StringAttr>("kiln.sm90")) gemm = s.str() + "; ";
        m->setAttr("kiln.sm90", StringAttr::get(&getContext(), gemm + "not attention: " + why));
        continue;
      }
      const int64_t programs = AttnGeometry::consumersFor(match, consumers);
      if (stages && AttnGeometry{match.d, match.kv, stages, programs, bool(match.keyLen), match.sequenceGrid}.sharedBytes() >
                        kMaxSharedBytes) {
        m.emitError("stages=" + std::to_string(stages) + " does not fit in shared memory at head dim " +
                    std::to_string(match.d) + " and " + std::to_string(match.kv) + " keys per step");
        return signalPassFailure();
      }
      OpBuilder b(&getContext());
      m->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
      m->removeAttr("kiln.sm90");
      auto gm = m.lookupSymbol<gpu::GPUModuleOp>("kiln");
      if (!gm) {
        b.setInsertionPointToEnd(m.getBody());
        gm = b.create<gpu::GPUModuleOp>(m.getLoc(), "kiln");
      }
      AttnEmitter(match, gm, stages, programs).run();
    }
  }
};

} // namespace

} // namespace kiln::hopper
