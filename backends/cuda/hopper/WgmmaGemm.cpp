// kiln-lower-gemm-sm90: the Hopper GEMM. A tile kernel that GemmMatch recognises gets a
// second kernel, `<name>__sm90`, beside the portable one kiln-lower-to-gpu makes; the
// runtime launches it whenever its TMA preconditions hold (hopper/LaunchPlan.h).
//
// One CTA computes a BM x BN tile of C (BM = 128; BN = 128 or 256) with 384 threads:
//   warpgroup 0 (producer): one thread issues TMA loads of A (BM x 64) and B (64 x BN) into
//     a ring of `stages` 128B-swizzled shared-memory stages; full[s] counts the bytes in,
//     empty[s] counts the consumers' releases. setmaxnreg gives its registers to the
//     consumers (24 kept, 240 each for them), which holds when the module is compiled as a
//     whole program (the runtime has the driver's JIT do that: nvJitLink drops it).
//   warpgroups 1, 2 (consumers): each owns 64 rows; per k-tile it waits for full[s], runs
//     4 x wgmma.mma_async m64nBNk16 (both operands from shared memory through descriptors,
//     f32 accumulators in registers), keeps one wgmma group in flight, and releases the
//     stage before. Then the epilogue: the tile kernel's own elementwise ops, evaluated on
//     each accumulator element where it lives; a 16-bit C goes out by TMA through 64 x 64
//     staging boxes (two per warpgroup), an f32 C by masked stores from registers.
// Shared memory (1024-B aligned): per stage A as 128 rows of 128 B (K-major), B as BN/64
// boxes of 64 K-rows x 128 B (MN-major); then the C staging boxes; then the 2 x stages mbarriers.
#include "hopper/GemmMatch.h"
#include "hopper/LaunchPlan.h"
#include "hopper/Sm90Tiles.h"
#include "Transforms/Passes.h"
#include "Transforms/ScalarMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/APFloat.h"

#include <map>
#include <tuple>

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERGEMMSM90
#include "Transforms/Passes.h.inc"
} // namespace kiln

namespace kiln::hopper {

using namespace mlir;
using namespace kiln::tile;

namespace {

constexpr int64_t kBM = kTileM, kBK = kTileK;
/// Epilogue column groups evaluated together (4 elements per thread each): more would keep
/// too many values live beside a 128 x 256 tile's accumulators.
constexpr int64_t kChunk = 4;
constexpr int64_t kBoxBytes = 64 * 2 * 64; // one 64 x 64 box of 16-bit elements, 128 B rows

struct Config {
  int64_t bn = 128;
  int64_t stages = 4;
  bool persistent = true;
  std::string suffix = "__sm90"; ///< the twin's name: the kernel's + this
  /// CTAs per cluster (1 or 2). With 2, the CTAs of a cluster take horizontally adjacent
  /// tiles (the same rows of A): each loads half of the A tile and multicasts it to both.
  int64_t cluster = 1;
  /// Arrivals that free a ring slot: every consumer thread (one CTA), or each consumer
  /// warp's lane 0 in both CTAs of a cluster (remote arrivals are costly).
  int64_t emptyArrivals() const { return cluster == 1 ? 256 : 8 * cluster; }
  int64_t aBytes() const { return kBM * kBK * 2; }
  int64_t stageBytes() const { return hopper::stageBytes(bn); }
  int64_t stagingOffset() const { return stages * stageBytes(); }
  int64_t barrierOffset() const { return stagingOffset() + kStagingBytes; }
  int64_t smemBytes() const { return sharedBytes(bn, stages); }
};

/// wgmma shared-memory descriptor, all but the start address (bits 0-13):
/// bits 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4, 62-63 swizzle (1 = 128B).
int64_t descriptorBits(int64_t lbo, int64_t sbo) {
  return int64_t((uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) | (uint64_t(1) << 62));
}

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

class Emitter {
public:
  Emitter(GemmMatch& m, Config cfg, gpu::GPUModuleOp gm)
      : loc_(m.kernel.getLoc()), m_(m), cfg_(cfg), gm_(gm), b_(m.kernel.getContext()) {}

  void run();

private:
  Location loc_;

  Value i32(int64_t v) { return b_.create<arith::ConstantIntOp>(loc_, v, 32); }
  Value i64(int64_t v) { return b_.create<arith::ConstantIntOp>(loc_, v, 64); }
  Value add(Value a, Value b) { return b_.create<arith::AddIOp>(loc_, a, b); }
  Value sub(Value a, Value b) { return b_.create<arith::SubIOp>(loc_, a, b); }
  Value mul(Value a, Value b) { return b_.create<arith::MulIOp>(loc_, a, b); }
  Value divu(Value a, Value b) { return b_.create<arith::DivUIOp>(loc_, a, b); }
  Value remu(Value a, Value b) { return b_.create<arith::RemUIOp>(loc_, a, b); }
  Value ult(Value a, Value b) { return b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ult, a, b); }
  Value eq(Value a, Value b) { return b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::eq, a, b); }
  Value ext64(Value v) { return b_.create<arith::ExtUIOp>(loc_, b_.getI64Type(), v); }
  Value byteAt(Value base, Value off) {
    return b_.create<LLVM::GEPOp>(loc_, base.getType(), b_.getI8Type(), base, ValueRange{off});
  }
  Value sharedPtr(Value off) { return byteAt(smem_, off); }
  /// scf.if with `then` (and `otherwise`) emitted through b_ inside the regions.
  template <class F> void ifThen(Value cond, F&& then) {
    auto op = b_.create<scf::IfOp>(loc_, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(op.thenBlock()->getTerminator());
    then();
  }
  template <class F, class G> void ifThenElse(Value cond, F&& then, G&& otherwise) {
    auto op = b_.create<scf::IfOp>(loc_, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(op.thenBlock()->getTerminator());
    then();
    b_.setInsertionPoint(op.elseBlock()->getTerminator());
    otherwise();
  }
  template <class F, class G> Value ifValue(Type t, Value cond, F&& then, G&& otherwise) {
    auto op = b_.create<scf::IfOp>(loc_, TypeRange{t}, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(op.thenBlock());
    b_.create<scf::YieldOp>(loc_, then());
    b_.setInsertionPointToStart(op.elseBlock());
    b_.create<scf::YieldOp>(loc_, otherwise());
    return op.getResult(0);
  }
  LLVM::LLVMStructType accType() {
    return LLVM::LLVMStructType::getLiteral(b_.getContext(), SmallVector<Type>(cfg_.bn / 2, b_.getF32Type()));
  }

  void declareParams();
  template <class F> void forEachTile(F&& body);
  /// barrier.cluster arrive + wait, by every thread of both CTAs.
  void clusterSync();
  /// Ring slot and phase bit of k-iteration `it` (counted across this CTA's tiles).
  std::pair<Value, Value> slotOf(Value it) {
    return {remu(it, i32(cfg_.stages)), b_.create<arith::AndIOp>(loc_, divu(it, i32(cfg_.stages)), i32(1))};
  }
  Value fullBarrier(Value s) { return sharedPtr(add(mul(s, i32(8)), i32(cfg_.barrierOffset()))); }
  Value emptyBarrier(Value s) { return sharedPtr(add(mul(s, i32(8)), i32(cfg_.barrierOffset() + 8 * cfg_.stages))); }
  void producer();
  Value consumerMainloop();
  Value kTile(Value kt, Value acc, bool first);
  void release(Value it) {
    Value bar = emptyBarrier(slotOf(it).first);
    if (cfg_.cluster == 1) {
      b_.create<NVVM::MBarrierArriveOp>(loc_, Type(), bar, Value());
      return;
    }
    // The slot is free for a producer once every consumer warp of the cluster is done with
    // it (wgmma.wait_group is warp-wide): lane 0 arrives on that slot's barrier in each CTA.
    ifThen(eq(remu(tid_, i32(32)), i32(0)), [&] {
      auto clusterPtr = LLVM::LLVMPointerType::get(b_.getContext(), 7);
      for (int64_t r = 0; r < cfg_.cluster; ++r) {
        Value there = b_.create<NVVM::MapaOp>(loc_, clusterPtr, bar, i32(r));
        b_.create<NVVM::MBarrierArriveOp>(loc_, Type(), there, Value(), NVVM::MemScopeKind::CLUSTER);
      }
    });
  }
  void epilogue(Value acc);
  /// The sites of column groups [j0, j1) of this thread's fragment (4 per group).
  SmallVector<Site> chunkSites(int64_t j0, int64_t j1, Value row0, Value col0, bool masked);
  /// f32 C: element by element from registers, masked on edge tiles.
  void epilogueStores(Value acc, Value row0, Value col0, bool masked);
  /// 16-bit C: 64 x 64 boxes through shared memory, stored by TMA (which clips edge tiles).
  void epilogueTma(Value acc, Value row0, Value col0, bool masked);
  /// Column groups [j0, j0 + kChunk) into the staging box `buf` whose first group is `jBox`.
  void stageChunk(Value acc, int64_t j0, Value row0, Value col0, bool masked, Value buf, int64_t jBox);
  /// Emits the epilogue's loads for `site` into `loaded`, once per distinct element (a
  /// bias is loaded once per column, not once per row).
  void loadInputs(const Site& site, LoadCache& loaded);
  /// Epilogue value `v` at `site`; its loads come from `loaded`.
  Value evalElement(Value v, Value acc, const Site& site, LoadCache& loaded, DenseMap<Value, Value>& memo);

  GemmMatch& m_;
  Config cfg_;
  gpu::GPUModuleOp gm_;
  OpBuilder b_;
  gpu::GPUFuncOp func_;
  LaunchPlan plan_;
  // Function arguments.
  Value tmA_, tmB_, M_, N_, K_;
  Value tmC_;            // 16-bit C: stored by TMA from shared memory
  Value cPtr_, cStride_; // f32 C: stored from registers
  DenseMap<unsigned, std::pair<Value, SmallVector<Value, 2>>> inputs_; // arg -> (ptr, strides)
  SmallVector<Value> epilogueLoads_; // the epilogue's tile.load results, each once
  // Per-CTA values.
  Value tid_, wg_, kTiles_, smem_, sbase_;
  Value tilesM_, tilesN_, numTiles_; // C's tiles, walked by the persistent loop
  Value rank_;                        // this CTA's rank in its cluster (0 when no cluster)
  // Per tile (set inside forEachTile): its corner and the ring position of its first k-tile.
  Value m0_, n0_, base_;
};

void Emitter::declareParams() {
  MLIRContext* ctx = b_.getContext();
  auto generic = LLVM::LLVMPointerType::get(ctx);
  auto global = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> types;
  auto param = [&](LaunchParam p, Type t) {
    plan_.params.push_back(p);
    types.push_back(t);
  };
  param({LaunchParam::TensorMap, int(m_.a), 0, {kBK, kBM / cfg_.cluster}}, generic);
  param({LaunchParam::TensorMap, int(m_.b), 0, {64, kBK}}, generic);
  const bool cByTma = m_.kernel.getArgType(m_.c).getElementType().getIntOrFloatBitWidth() == 16;
  if (cByTma) {
    param({LaunchParam::TensorMap, int(m_.c), 0, {64, 64}}, generic);
  } else {
    param({LaunchParam::Pointer, int(m_.c), 0, {}}, global);
    param({LaunchParam::Stride, int(m_.c), 0, {}}, b_.getI64Type());
  }
  for (unsigned in : m_.epilogueInputs) {
    param({LaunchParam::Pointer, int(in), 0, {}}, global);
    for (int d = 0; d < m_.kernel.getArgType(in).getRank(); ++d) param({LaunchParam::Stride, int(in), d, {}}, b_.getI64Type());
  }
  param({LaunchParam::Dim, int(m_.a), 0, {}}, b_.getI32Type()); // M
  param({LaunchParam::Dim, int(m_.b), 1, {}}, b_.getI32Type()); // N
  param({LaunchParam::Dim, int(m_.a), 1, {}}, b_.getI32Type()); // K

  b_.setInsertionPointToEnd(gm_.getBody());
  std::string name = m_.kernel.getSymName().str() + cfg_.suffix;
  func_ = b_.create<gpu::GPUFuncOp>(loc_, name, b_.getFunctionType(types, {}));
  func_->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
  // .maxntid + .minnctapersm: without both, ptxas ignores setmaxnreg.
  func_.setKnownBlockSizeAttr(b_.getDenseI32ArrayAttr({int32_t(kThreads), 1, 1}));
  func_->setAttr("nvvm.minctasm", b_.getI32IntegerAttr(1));
  Block& entry = func_.getBody().front();
  unsigned i = 0;
  tmA_ = entry.getArgument(i++);
  tmB_ = entry.getArgument(i++);
  if (cByTma) {
    tmC_ = entry.getArgument(i++);
  } else {
    cPtr_ = entry.getArgument(i++);
    cStride_ = entry.getArgument(i++);
  }
  for (unsigned in : m_.epilogueInputs) {
    auto& [ptr, strides] = inputs_[in];
    ptr = entry.getArgument(i++);
    for (int d = 0; d < m_.kernel.getArgType(in).getRank(); ++d) strides.push_back(entry.getArgument(i++));
  }
  M_ = entry.getArgument(i++);
  N_ = entry.getArgument(i++);
  K_ = entry.getArgument(i++);

  plan_.entry = name;
  plan_.threads = kThreads;
  plan_.sharedBytes = cfg_.smemBytes();
  plan_.tileM = kBM;
  plan_.tileN = cfg_.bn;
  plan_.tileK = kBK;
  plan_.stages = cfg_.stages;
  plan_.output = int(m_.c);
  plan_.cluster = cfg_.cluster;
  auto dimName = [&](unsigned arg, unsigned d) {
    tile::TensorArgType t = m_.kernel.getArgType(arg);
    return t.getDimSymbol(d).empty() ? std::to_string(t.getDimConstant(d)) : t.getDimSymbol(d).str();
  };
  plan_.gridDims = {{int(m_.a), 0, kBM, dimName(m_.a, 0)}, {int(m_.b), 1, cfg_.bn, dimName(m_.b, 1)}};
  plan_.persistent = cfg_.persistent;
}

void Emitter::run() {
  declareParams();
  // The epilogue's loads, each once, found from the stored value down to the accumulator.
  SmallVector<Value> work{m_.store.getValue()};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (v == m_.loop.getResult(0) || !seen.insert(v).second) continue;
    if (v.getDefiningOp<LoadOp>()) epilogueLoads_.push_back(v);
    else if (Operation* op = v.getDefiningOp()) llvm::append_range(work, op->getOperands());
  }
  MLIRContext* ctx = b_.getContext();
  b_.setInsertionPointToStart(gm_.getBody());
  if (!gm_.lookupSymbol("kiln_sm90_smem"))
    b_.create<LLVM::GlobalOp>(loc_, LLVM::LLVMArrayType::get(b_.getI8Type(), 0), /*isConstant=*/false,
                              LLVM::Linkage::External, "kiln_sm90_smem", Attribute(), /*alignment=*/1024,
                              /*addrSpace=*/3);
  b_.setInsertionPointToStart(&func_.getBody().front());
  tid_ = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::ThreadIdOp>(loc_, gpu::Dimension::x));
  wg_ = divu(tid_, i32(128));
  tilesM_ = divu(add(M_, i32(kBM - 1)), i32(kBM));
  tilesN_ = divu(add(N_, i32(cfg_.bn - 1)), i32(cfg_.bn));
  numTiles_ = mul(tilesM_, tilesN_);
  // A cluster of 2 is CTAs 2c and 2c + 1 of the 1-D grid; its work units are pairs of
  // horizontally adjacent tiles.
  Value bidx = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::BlockIdOp>(loc_, gpu::Dimension::x));
  rank_ = cfg_.cluster == 1 ? i32(0) : remu(bidx, i32(cfg_.cluster));
  kTiles_ = divu(add(K_, i32(kBK - 1)), i32(kBK));

  // The dynamic shared memory, rounded up to 1024 B: 128B-swizzle atoms and the wgmma
  // descriptors assume it, whatever alignment the loader gives.
  auto shared = LLVM::LLVMPointerType::get(ctx, 3);
  Value raw = b_.create<LLVM::AddressOfOp>(loc_, shared, "kiln_sm90_smem");
  Value rawAddr = b_.create<LLVM::PtrToIntOp>(loc_, b_.getI32Type(), raw);
  sbase_ = b_.create<arith::AndIOp>(loc_, add(rawAddr, i32(1023)), i32(-1024));
  smem_ = byteAt(raw, sub(sbase_, rawAddr));

  // full[s]: one arrival (the producer's expect_tx) + the bytes; empty[s]: 256 consumer threads.
  Value isThread0 = eq(tid_, i32(0));
  ifThen(isThread0, [&] {
    for (int64_t s = 0; s < cfg_.stages; ++s) {
      b_.create<NVVM::MBarrierInitOp>(loc_, sharedPtr(i32(cfg_.barrierOffset() + 8 * s)), i32(1), Value());
      b_.create<NVVM::MBarrierInitOp>(loc_, sharedPtr(i32(cfg_.barrierOffset() + 8 * (cfg_.stages + s))),
                                      i32(cfg_.emptyArrivals()), Value());
    }
    b_.create<NVVM::FenceMbarrierInitOp>(loc_);
  });
  b_.create<gpu::BarrierOp>(loc_);
  // The peer's barriers are initialised before anyone arrives on them or multicasts to them.
  if (cfg_.cluster > 1) clusterSync();

  ifThenElse(
      eq(wg_, i32(0)), [&] { producer(); },
      [&] {
        b_.create<NVVM::SetMaxRegisterOp>(loc_, 240, NVVM::SetMaxRegisterAction::increase);
        forEachTile([&] { epilogue(consumerMainloop()); });
        // The last boxes' stores finish before the CTA (and its shared memory) goes away.
        if (tmC_)
          ifThen(eq(remu(tid_, i32(128)), i32(0)),
                 [&] { b_.create<NVVM::CpAsyncBulkWaitGroupOp>(loc_, b_.getI32IntegerAttr(0), UnitAttr()); });
      });
  // No CTA leaves while its peer may still arrive on its barriers or multicast into it.
  if (cfg_.cluster > 1) clusterSync();
  b_.create<gpu::ReturnOp>(loc_);
  func_->setAttr(kLaunchPlanAttr, StringAttr::get(ctx, plan_.toJson().dump()));
}

/// The persistent loop: CTA b takes tiles b, b + grid, b + 2 grid, ... of C (a grid of one
/// CTA per tile takes exactly one). Tiles are numbered in groups of 8 M-tiles, column by
/// column inside a group, so the CTAs running at once share A and B tiles in L2.
///
/// With a cluster of 2 the loop runs over clusters and work units instead: cluster c takes
/// units c, c + clusters, ...; a unit is a pair of horizontally adjacent tiles, the CTA of
/// rank r taking tile column 2u + r. Past C's last column that CTA still loads (zeros) and
/// multiplies, so both keep the same ring schedule, and stores nothing.
template <class F> void Emitter::forEachTile(F&& body) {
  const int64_t cl = cfg_.cluster;
  Value bid = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::BlockIdOp>(loc_, gpu::Dimension::x));
  Value grid = b_.create<arith::IndexCastOp>(loc_, b_.getI32Type(), b_.create<gpu::GridDimOp>(loc_, gpu::Dimension::x));
  Value first = cl == 1 ? bid : divu(bid, i32(cl)), step = cl == 1 ? grid : divu(grid, i32(cl));
  Value unitsN = cl == 1 ? tilesN_ : divu(add(tilesN_, i32(cl - 1)), i32(cl));
  auto loop = b_.create<scf::ForOp>(loc_, first, mul(tilesM_, unitsN), step);
  OpBuilder::InsertionGuard g(b_);
  b_.setInsertionPoint(loop.getBody()->getTerminator());
  Value t = loop.getInductionVar();
  constexpr int64_t kGroup = 8;
  Value perGroup = mul(unitsN, i32(kGroup));
  Value group = divu(t, perGroup);
  Value firstM = mul(group, i32(kGroup));
  Value groupRows = b_.create<arith::MinUIOp>(loc_, sub(tilesM_, firstM), i32(kGroup));
  Value local = remu(t, perGroup);
  m0_ = mul(add(firstM, remu(local, groupRows)), i32(kBM));
  Value column = divu(local, groupRows);
  n0_ = mul(cl == 1 ? column : add(mul(column, i32(cl)), rank_), i32(cfg_.bn));
  base_ = mul(divu(sub(t, first), step), kTiles_);
  body();
}

void Emitter::clusterSync() {
  // Not .aligned: at the end the producer warp's lanes reconverge from divergent paths.
  b_.create<NVVM::ClusterArriveOp>(loc_, UnitAttr());
  b_.create<NVVM::ClusterWaitOp>(loc_, UnitAttr());
}

void Emitter::producer() {
  b_.create<NVVM::SetMaxRegisterOp>(loc_, 24, NVVM::SetMaxRegisterAction::decrease);
  ifThen(eq(tid_, i32(0)), [&] {
  // The tensor maps live in parameter space: fetch their lines now rather than at the first
  // copy of each (CUTLASS does the same).
  for (Value map : {tmA_, tmB_, tmC_})
    if (map) b_.create<NVVM::PrefetchOp>(loc_, NVVM::PrefetchCacheLevelAttr(), NVVM::CacheEvictionPriorityAttr(), map,
                                         Value(), /*tensormap=*/true, /*uniform=*/false, /*in_param_space=*/true);
  forEachTile([&] {
    auto loop = b_.create<scf::ForOp>(loc_, i32(0), kTiles_, i32(1));
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    Value kt = loop.getInductionVar();
    auto [s, phase] = slotOf(add(base_, kt));
    Value full = fullBarrier(s);
    Value empty = emptyBarrier(s);
    // The first pass over the ring waits on the phase before the barrier's first one,
    // which counts as complete: it does not block.
    b_.create<NVVM::MBarrierTryWaitParityOp>(loc_, empty, b_.create<arith::XOrIOp>(loc_, phase, i32(1)),
                                             i32(10000000));
    b_.create<NVVM::MBarrierArriveExpectTxOp>(loc_, Type(), full, i32(cfg_.stageBytes()), NVVM::MemScopeKind::CTA,
                                              false, Value());
    auto cluster = LLVM::LLVMPointerType::get(b_.getContext(), 7);
    Value stage = mul(s, i32(cfg_.stageBytes()));
    Value k0 = mul(kt, i32(kBK));
    auto tma = [&](Value dstOff, Value map, SmallVector<Value> coords) {
      Value dst = b_.create<LLVM::AddrSpaceCastOp>(loc_, cluster, sharedPtr(dstOff));
      b_.create<NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp>(loc_, dst, map, coords, full, ValueRange{}, Value(),
                                                                Value(), NVVM::TMALoadMode::TILE, false,
                                                                NVVM::CTAGroupKindAttr(), Value());
    };
    // Coordinates are innermost first: A's box at (k0, m0), B's boxes at (n0 + 64h, k0).
    if (cfg_.cluster == 1) {
      tma(stage, tmA_, {k0, m0_});
    } else {
      // This CTA's share of A's rows, multicast into the same place in every CTA of the
      // cluster (each full[s] counts the whole stage's bytes, its peer's share included).
      const int64_t rows = kBM / cfg_.cluster;
      Value dst = b_.create<LLVM::AddrSpaceCastOp>(loc_, cluster,
                                                   sharedPtr(add(stage, mul(rank_, i32(rows * 128)))));
      Value mask = b_.create<arith::ConstantIntOp>(loc_, (1 << cfg_.cluster) - 1, 16);
      b_.create<NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp>(
          loc_, dst, tmA_, ValueRange{k0, add(m0_, mul(rank_, i32(rows)))}, full, ValueRange{}, mask, Value(),
          NVVM::TMALoadMode::TILE, false, NVVM::CTAGroupKindAttr(), Value());
    }
    for (int64_t h = 0; h < cfg_.bn / 64; ++h)
      tma(add(stage, i32(cfg_.aBytes() + h * kBoxBytes)), tmB_, {add(n0_, i32(64 * h)), k0});
  }); });
}

Value Emitter::kTile(Value kt, Value acc, bool first) {
  auto [s, phase] = slotOf(add(base_, kt));
  b_.create<NVVM::MBarrierTryWaitParityOp>(loc_, fullBarrier(s), phase, i32(10000000));
  // Descriptor start addresses: (shared address >> 4) & 0x3FFF. This consumer's 64 rows of
  // A start 64 x 128 B into the stage.
  Value stageAddr = add(sbase_, mul(s, i32(cfg_.stageBytes())));
  Value cw = sub(wg_, i32(1));
  Value aAddr = add(stageAddr, mul(cw, i32(64 * 128)));
  Value bAddr = add(stageAddr, i32(cfg_.aBytes()));
  auto field = [&](Value addr) {
    return ext64(b_.create<arith::AndIOp>(loc_, b_.create<arith::ShRUIOp>(loc_, addr, i32(4)), i32(0x3FFF)));
  };
  Value descA = b_.create<arith::OrIOp>(loc_, i64(descriptorBits(16, 1024)), field(aAddr));
  Value descB = b_.create<arith::OrIOp>(loc_, i64(descriptorBits(kBoxBytes, 1024)), field(bAddr));
  b_.create<NVVM::WgmmaFenceAlignedOp>(loc_);
  auto type = m_.inElt.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  auto shape = NVVM::MMAShapeAttr::get(b_.getContext(), 64, int(cfg_.bn), 16);
  for (int64_t kk = 0; kk < kBK / 16; ++kk) {
    // k16 steps: A (K-major) advances 32 B inside its swizzled rows; B (MN-major) 16 rows of 128 B.
    Value da = kk ? add(descA, i64(kk * 32 >> 4)) : descA;
    Value db = kk ? add(descB, i64(kk * 16 * 128 >> 4)) : descB;
    acc = b_.create<NVVM::WgmmaMmaAsyncOp>(
        loc_, accType(), acc, da, db, shape, type, type, NVVM::WGMMATypes::f32,
        first && kk == 0 ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one, NVVM::WGMMAScaleIn::one,
        NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row, NVVM::MMALayout::row, NVVM::MMAIntOverflowAttr());
  }
  b_.create<NVVM::WgmmaGroupSyncAlignedOp>(loc_);
  return acc;
}

Value Emitter::consumerMainloop() {
  // k-tile 0 is peeled: its first wgmma overwrites an undefined accumulator (scale-d = 0), so
  // no zeroing moves land between wgmma.fence and the wgmma. K = 0 never gets here (the
  // runtime launches the portable kernel then), but stays defined: the accumulator is zero.
  return ifValue(
      accType(), ult(i32(0), kTiles_),
      [&] {
        Value first = kTile(i32(0), b_.create<LLVM::UndefOp>(loc_, accType()), true);
        auto loop = b_.create<scf::ForOp>(loc_, i32(1), kTiles_, i32(1), ValueRange{first});
        {
          OpBuilder::InsertionGuard g(b_);
          b_.setInsertionPointToStart(loop.getBody());
          Value kt = loop.getInductionVar();
          Value acc = kTile(kt, loop.getRegionIterArgs()[0], false);
          // One wgmma group stays in flight; the one before it is done: release its stage.
          b_.create<NVVM::WgmmaWaitGroupSyncOp>(loc_, 1);
          release(sub(add(base_, kt), i32(1)));
          b_.create<scf::YieldOp>(loc_, acc);
        }
        // The last k-tile's stage goes back to the producer too: it fills the next tile.
        b_.create<NVVM::WgmmaWaitGroupSyncOp>(loc_, 0);
        release(sub(add(base_, kTiles_), i32(1)));
        return loop.getResult(0);
      },
      [&] { return Value(b_.create<LLVM::ZeroOp>(loc_, accType())); });
}

/// Rounds an f32 value to `t`'s precision and back (a no-op for f32): what storing an
/// intermediate tile of that type does in every other backend.
Value roundTo(OpBuilder& b, Location loc, Value v, Type t) {
  if (t.isF32()) return v;
  Value narrow = b.create<arith::TruncFOp>(loc, t, v);
  return b.create<arith::ExtFOp>(loc, b.getF32Type(), narrow);
}

std::tuple<void*, int64_t, int64_t> loadKey(Value load, const SmallVector<Axis, 2>& axes, const Site& site) {
  bool row = llvm::is_contained(axes, Axis::Row), col = llvm::is_contained(axes, Axis::Col);
  return {load.getAsOpaquePointer(), row ? site.h : -1, col ? site.c : -1};
}

void Emitter::loadInputs(const Site& site, LoadCache& loaded) {
  for (Value v : epilogueLoads_) {
    const auto& axes = m_.axes.lookup(v);
    auto key = loadKey(v, axes, site);
    if (loaded.count(key)) continue;
    auto view = v.getDefiningOp<LoadOp>().getView().getDefiningOp<ViewOp>();
    unsigned arg = cast<BlockArgument>(view.getTensor()).getArgNumber();
    auto& [ptr, strides] = inputs_[arg];
    Type elt = cast<TileType>(v.getType()).getElementType();
    Value off = i64(0);
    for (size_t d = 0; d < axes.size(); ++d) off = add(off, mul(axes[d] == Axis::Row ? site.row : site.col, strides[d]));
    Value p = b_.create<LLVM::GEPOp>(loc_, ptr.getType(), elt, ptr, ValueRange{off});
    Value x = b_.create<LLVM::LoadOp>(loc_, elt, p);
    loaded[key] = elt.isF32() ? x : b_.create<arith::ExtFOp>(loc_, b_.getF32Type(), x);
  }
}

Value Emitter::evalElement(Value v, Value acc, const Site& site, LoadCache& loaded, DenseMap<Value, Value>& memo) {
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  Value out;
  Type elt = cast<TileType>(v.getType()).getElementType();
  if (v == m_.loop.getResult(0)) {
    out = b_.create<LLVM::ExtractValueOp>(loc_, acc, ArrayRef<int64_t>{site.accIndex});
  } else if (auto f = v.getDefiningOp<FullOp>()) {
    llvm::APFloat x(f.getValue().convertToDouble());
    bool lost;
    x.convert(elt.isF32() ? llvm::APFloat::IEEEsingle() : cast<FloatType>(elt).getFloatSemantics(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
    x.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &lost);
    out = b_.create<arith::ConstantOp>(loc_, b_.getF32FloatAttr(x.convertToFloat()));
  } else if (auto bc = v.getDefiningOp<BroadcastOp>()) {
    out = evalElement(bc.getInput(), acc, site, loaded, memo);
  } else if (v.getDefiningOp<LoadOp>()) {
    out = loaded.at(loadKey(v, m_.axes.lookup(v), site));
  } else {
    Operation* op = v.getDefiningOp();
    SmallVector<Value> x;
    for (Value in : op->getOperands()) x.push_back(evalElement(in, acc, site, loaded, memo));
    out = roundTo(b_, loc_, emitScalar(b_, loc_, op, x), elt);
  }
  memo[v] = out;
  return out;
}

void Emitter::epilogue(Value acc) {
  // Accumulator fragment of m64nNk16 (per warpgroup): thread t = tid % 128, warp w = t / 32,
  // lane l = t % 32; struct element 4j + 2h + e holds row 16w + l/4 + 8h, column 8j + 2(l%4) + e.
  Value t = remu(tid_, i32(128));
  Value w = divu(t, i32(32));
  Value l = remu(t, i32(32));
  Value cw = sub(wg_, i32(1));
  Value row0 = add(add(add(m0_, mul(cw, i32(64))), mul(w, i32(16))), divu(l, i32(4)));
  Value col0 = add(n0_, mul(remu(l, i32(4)), i32(2)));
  // Tiles inside C (all but the last row and column of tiles) read their inputs without
  // clamps and store without masks; the edge tiles take the careful path.
  Value inside = b_.create<arith::AndIOp>(loc_, b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ule, add(m0_, i32(kBM)), M_),
                                          b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::ule, add(n0_, i32(cfg_.bn)), N_));
  auto body = [&](bool masked) {
    if (tmC_) epilogueTma(acc, row0, col0, masked);
    else epilogueStores(acc, row0, col0, masked);
  };
  auto both = [&] { ifThenElse(inside, [&] { body(false); }, [&] { body(true); }); };
  if (cfg_.cluster > 1) ifThen(ult(n0_, N_), both); // a cluster's tile past C's last column
  else both();
}

SmallVector<Site> Emitter::chunkSites(int64_t j0, int64_t j1, Value row0, Value col0, bool masked) {
  Value lastRow = sub(ext64(M_), i64(1)), lastCol = sub(ext64(N_), i64(1));
  auto clamp = [&](Value v, Value last) { return masked ? b_.create<arith::MinUIOp>(loc_, v, last).getResult() : v; };
  SmallVector<Site> sites;
  for (int64_t j = j0; j < j1; ++j)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t e = 0; e < 2; ++e)
        sites.push_back({4 * j + 2 * h + e, clamp(ext64(add(row0, i32(8 * h))), lastRow),
                         clamp(ext64(add(col0, i32(8 * j + e))), lastCol), h, 8 * j + e});
  return sites;
}

// Both epilogues evaluate kChunk column groups (16 elements per thread) at a time: first every load of the chunk, then its math
// and stores. Loads issued together overlap their latency; a load after a store could not
// move above it (C may alias an input as far as the compiler knows). Every element is
// still read (from an epilogue input) before the same thread writes it, so C may be the
// residual input itself.

void Emitter::epilogueStores(Value acc, Value row0, Value col0, bool masked) {
  Value M = ext64(M_), N = ext64(N_);
  Type cElt = m_.kernel.getArgType(m_.c).getElementType();
  auto global = LLVM::LLVMPointerType::get(b_.getContext(), 1);
  for (int64_t j0 = 0; j0 < cfg_.bn / 8; j0 += kChunk) {
    SmallVector<Site> sites = chunkSites(j0, j0 + kChunk, row0, col0, masked);
    LoadCache loaded;
    for (const Site& s : sites) loadInputs(s, loaded);
    for (const Site& s : sites) {
      DenseMap<Value, Value> memo;
      Value v = evalElement(m_.store.getValue(), acc, s, loaded, memo);
      Value row = ext64(add(row0, i32(8 * s.h)));
      Value col = ext64(add(col0, i32(s.c)));
      auto store = [&] {
        Value ptr = b_.create<LLVM::GEPOp>(loc_, global, cElt, cPtr_, ValueRange{add(mul(row, cStride_), col)});
        b_.create<LLVM::StoreOp>(loc_, v, ptr);
      };
      if (masked) ifThen(b_.create<arith::AndIOp>(loc_, ult(row, M), ult(col, N)), store);
      else store();
    }
  }
}

void Emitter::epilogueTma(Value acc, Value row0, Value col0, bool masked) {
  // Each consumer warpgroup stores its 64 rows as 64 x 64 boxes, alternating between its
  // two staging buffers.
  Value cw = sub(wg_, i32(1));
  Value leader = eq(remu(tid_, i32(128)), i32(0));
  Value myStaging = add(i32(cfg_.stagingOffset()), mul(cw, i32(2 * kStagingBoxBytes)));
  // Named barriers 1 and 2, one per consumer warpgroup (0 is the CTA's): the two
  // warpgroups store their boxes independently.
  auto syncWarpgroup = [&] { b_.create<NVVM::BarrierOp>(loc_, Type(), wg_, i32(128), NVVM::BarrierReductionAttr(), Value()); };

  // Boxes wholly right of C are skipped, so within a tile the stores are boxes 0, 1, ...
  // in order and the one before last used this buffer: "at most one store still reading"
  // frees it. The first box waits for none (the last tile's stores may have skipped).
  for (int64_t q = 0; q < cfg_.bn / 64; ++q) {
    Value boxRow = add(m0_, mul(cw, i32(64))), boxCol = add(n0_, i32(64 * q));
    Value buf = add(myStaging, i32((q % 2) * kStagingBoxBytes));
    auto box = [&] {
      ifThen(leader, [&] {
        b_.create<NVVM::CpAsyncBulkWaitGroupOp>(loc_, b_.getI32IntegerAttr(q == 0 ? 0 : 1), b_.getUnitAttr());
      });
      syncWarpgroup();
      for (int64_t j0 = 8 * q; j0 < 8 * q + 8; j0 += kChunk) stageChunk(acc, j0, row0, col0, masked, buf, 8 * q);
      // The generic-proxy writes become visible to TMA (the async proxy), then one thread
      // stores the box; TMA writes only what lies inside C.
      b_.create<NVVM::FenceProxyOp>(loc_, NVVM::ProxyKind::async_shared,
                                    NVVM::SharedSpaceAttr::get(b_.getContext(), NVVM::SharedSpace::shared_cta));
      syncWarpgroup();
      ifThen(b_.create<arith::AndIOp>(loc_, leader, ult(boxRow, M_)), [&] {
        b_.create<NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp>(loc_, tmC_, sharedPtr(buf), ValueRange{boxCol, boxRow},
                                                              Value(), NVVM::TMAStoreMode::TILE, Value());
        b_.create<NVVM::CpAsyncBulkCommitGroupOp>(loc_);
      });
    };
    if (masked && q > 0) ifThen(ult(boxCol, N_), box); // the same for the whole warpgroup
    else box();
  }
}

void Emitter::stageChunk(Value acc, int64_t j0, Value row0, Value col0, bool masked, Value buf, int64_t jBox) {
  // A box is laid out as TMA's 128B swizzle expects: row r at r x 128 bytes, its 16-byte
  // chunk c at chunk c ^ (r % 8). A thread's rows are 16w + l/4 + 8h, so r % 8 = l/4, and a
  // warp's 4-byte stores for one (j, h) hit 32 different banks.
  Value t = remu(tid_, i32(128));
  Value l = remu(t, i32(32));
  Value rowByte = mul(add(mul(divu(t, i32(32)), i32(16)), divu(l, i32(4))), i32(128)); // h = 0
  Value swz = divu(l, i32(4));
  Value laneByte = mul(remu(l, i32(4)), i32(4));
  Type cElt = m_.kernel.getArgType(m_.c).getElementType();
  auto shared = LLVM::LLVMPointerType::get(b_.getContext(), 3);
  SmallVector<Site> sites = chunkSites(j0, j0 + kChunk, row0, col0, masked);
  LoadCache loaded;
  for (const Site& s : sites) loadInputs(s, loaded);
  for (size_t p = 0; p < sites.size(); p += 2) {
    Value v[2];
    for (int e = 0; e < 2; ++e) {
      DenseMap<Value, Value> memo;
      v[e] = evalElement(m_.store.getValue(), acc, sites[p + e], loaded, memo);
    }
    auto v2 = VectorType::get({2}, b_.getF32Type());
    Value pair = b_.create<vector::FromElementsOp>(loc_, v2, ValueRange{v[0], v[1]});
    Value bits = b_.create<LLVM::BitcastOp>(loc_, b_.getI32Type(),
                                            b_.create<arith::TruncFOp>(loc_, VectorType::get({2}, cElt), pair));
    int64_t jj = sites[p].c / 8 - jBox, h = sites[p].h;
    Value chunk = b_.create<arith::XOrIOp>(loc_, swz, i32(jj));
    Value off = add(add(buf, add(rowByte, i32(8 * h * 128))), add(mul(chunk, i32(16)), laneByte));
    b_.create<LLVM::StoreOp>(loc_, bits, b_.create<LLVM::GEPOp>(loc_, shared, b_.getI8Type(), smem_, ValueRange{off}),
                             /*alignment=*/4);
  }
}

struct LowerGemmSm90Pass : kiln::impl::KilnLowerGemmSm90Base<LowerGemmSm90Pass> {
  using KilnLowerGemmSm90Base::KilnLowerGemmSm90Base;
  void runOnOperation() override {
    ModuleOp m = getOperation();
    if (cluster != 1 && cluster != 2) {
      m.emitError("cluster must be 1 or 2, got ") << cluster;
      return signalPassFailure();
    }
    if (tileN != 0 && tileN != 128 && tileN != 256) {
      m.emitError("tile-n must be 0 (both), 128 or 256, got ") << tileN;
      return signalPassFailure();
    }
    // tile-n 0: both widths, the narrow one named <kernel>__sm90, the wide <kernel>__sm90_n256.
    SmallVector<Config> configs;
    for (int64_t n : {int64_t(128), int64_t(256)}) {
      if (tileN != 0 && tileN != n) continue;
      Config cfg{n, stages ? stages : maxStages(n), persistent, tileN == 0 && n == 256 ? "__sm90_n256" : "__sm90",
                 cluster};
      if (cfg.stages < 2 || cfg.stages > maxStages(n)) {
        m.emitError("stages must be 2..") << maxStages(n) << " at tile-n " << n
                                          << " (227 KiB of shared memory), got " << stages;
        return signalPassFailure();
      }
      configs.push_back(cfg);
    }
    for (KernelOp k : llvm::to_vector(m.getOps<KernelOp>())) {
      GemmMatch match;
      std::string why;
      if (!matchGemm(k, match, why)) {
        m->setAttr("kiln.sm90", StringAttr::get(&getContext(), "kernel '" + k.getSymName().str() + "': " + why));
        continue;
      }
      OpBuilder b(&getContext());
      m->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
      auto gm = m.lookupSymbol<gpu::GPUModuleOp>("kiln");
      if (!gm) {
        b.setInsertionPointToEnd(m.getBody());
        gm = b.create<gpu::GPUModuleOp>(m.getLoc(), "kiln");
      }
      for (const Config& cfg : configs) {
        GemmMatch copy = match; // the emitter reads the match; each twin its own
        Emitter(copy, cfg, gm).run();
      }
    }
  }
};

} // namespace

} // namespace kiln::hopper
