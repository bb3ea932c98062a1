#include "hopper/Sm90Launch.h"
#include "hopper/Sm90Tiles.h"

#include "Driver.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln::hopper {

namespace {

/// The plan's work units when `group` adjacent tiles along the last grid dim (C's columns;
/// the first, C's rows, for clusters along M) make one: C's tiles for group 1, a cluster's
/// pairs for 2. The product of the grid dims, each under 2^31 (checked by applies()).
int64_t unitCount(const LaunchPlan& plan, const std::vector<TensorView>& args, int64_t group = 1) {
  auto extent = [&](size_t i) { return args[size_t(plan.gridDims[i].arg)].dims[size_t(plan.gridDims[i].dim)]; };
  if (plan.sequenceUnits && plan.gridDims.size() == 3) // (query groups + sequences) x heads
    return (plan.gridDims[0].tiles(extent(0)) + plan.gridDims[2].tiles(extent(2))) * plan.gridDims[1].tiles(extent(1));
  int64_t n = 1;
  const size_t grouped = plan.clusterAlongM ? 0 : plan.gridDims.size() - 1;
  for (size_t i = 0; i < plan.gridDims.size(); ++i) {
    const GridDim& g = plan.gridDims[i];
    const int64_t tiles = g.tiles(args[size_t(g.arg)].dims[size_t(g.dim)]);
    n *= i == grouped ? (tiles + group - 1) / group : tiles;
  }
  return n;
}
int64_t tileCount(const LaunchPlan& plan, const std::vector<TensorView>& args) { return unitCount(plan, args); }

/// The stride of `v` along `d` in elements (row-major when `v` gives none), without the
/// allocation of TensorView::effective_strides: this runs at every launch.
int64_t strideOf(const TensorView& v, int d) {
  if (!v.strides.empty()) return v.strides[size_t(d)];
  int64_t s = 1;
  for (size_t i = size_t(d) + 1; i < v.dims.size(); ++i) s *= v.dims[i];
  return s;
}

/// L2's sector: the unit the tall pairs' rule counts B's rows in (bRowsOffSectors), and so
/// the modulus the choice cache keys addresses by (choiceKey; TMA's 16 divides it).
constexpr int64_t kL2SectorBytes = 32;

/// Says why argument `arg` breaks a rule; false. (Messages are built only on this path:
/// applies() runs at every launch.)
bool refuse(std::string* why, int arg, const char* rule) {
  *why = "argument " + std::to_string(arg) + rule;
  return false;
}

/// A row-major tensor TMA can read through a map of `rank` dims (its own rank): contiguous
/// rows, 16-byte aligned base and strides, extents and strides within a map's limits.
bool tmaReadable(const TensorView& v, size_t rank, int arg, std::string* why) {
  if (size_t(v.rank()) != rank || size_of(v.dtype) != 2)
    return refuse(why, arg, (" is not a " + std::to_string(rank) + "-D 16-bit tensor").c_str());
  const int64_t e = size_of(v.dtype);
  if (strideOf(v, int(rank) - 1) != 1) return refuse(why, arg, "'s rows are not contiguous");
  if (rank == 2 && strideOf(v, 0) < v.dims[1]) return refuse(why, arg, "'s rows overlap (row stride below the row length)");
  if (reinterpret_cast<uintptr_t>(v.data) % 16 != 0) return refuse(why, arg, "'s address is not 16-byte aligned");
  for (size_t d = 0; d < rank; ++d) {
    if (v.dims[d] < 1) return refuse(why, arg, " is empty");
    if (v.dims[d] > INT32_MAX) return refuse(why, arg, " is larger than a tensor map holds");
    if (d + 1 == rank) continue;
    const int64_t stride = strideOf(v, int(d));
    if (stride < 0 || (stride * e) % 16 != 0) return refuse(why, arg, "'s row pitch is not a multiple of 16 bytes");
    if (stride * e >= (int64_t(1) << 40)) return refuse(why, arg, " is larger than a tensor map holds");
  }
  return true;
}

/// Attention's O, written from registers in element pairs: 4-D (3-D: packed sequences),
/// rows contiguous, pairs 4-byte aligned.
bool pairsWritable(const TensorView& o, std::string* why) {
  if (o.rank() != 4 && o.rank() != 3) return *why = "O is not 3-D or 4-D", false;
  const int last = int(o.rank()) - 1;
  if (strideOf(o, last) != 1) return *why = "O's rows are not contiguous", false;
  bool aligned = reinterpret_cast<uintptr_t>(o.data) % 4 == 0;
  for (int d = 0; d < last; ++d) aligned &= strideOf(o, d) % 2 == 0;
  if (!aligned) return *why = "O's element pairs are not 4-byte aligned", false;
  return true;
}

} // namespace

bool applies(const LaunchPlan& plan, const std::vector<TensorView>& args, std::string* why) {
  // Every argument and dim the plan names must exist: a plan comes from the compiler or a
  // cache entry, and a wrong one is refused here rather than read out of bounds.
  for (const LaunchParam& p : plan.params) {
    if (p.arg < 0 || size_t(p.arg) >= args.size()) return *why = "the launch plan names a missing argument", false;
    if ((p.kind == LaunchParam::Stride || p.kind == LaunchParam::Dim) && p.dim >= args[size_t(p.arg)].rank())
      return *why = "the launch plan names a missing dim", false;
  }
  for (const GridDim& g : plan.gridDims)
    if (g.arg < 0 || size_t(g.arg) >= args.size() || g.dim < 0 || g.dim >= args[size_t(g.arg)].rank())
      return *why = "the launch plan's grid names a missing argument or dim", false;
  if (plan.splitK() && (size_t(plan.reduction.arg) >= args.size() || plan.reduction.dim >= args[size_t(plan.reduction.arg)].rank()))
    return *why = "the launch plan's reduction names a missing argument or dim", false;
  if (plan.output < 0 || size_t(plan.output) >= args.size()) return *why = "the launch plan has no output", false;
  for (const LaunchParam& p : plan.params) {
    const TensorView& v = args[size_t(p.arg)];
    if (p.kind == LaunchParam::TensorMap && !tmaReadable(v, p.box.size(), p.arg, why)) return false;
    if (p.kind == LaunchParam::Dim && (v.dims[size_t(p.dim)] < 1 || v.dims[size_t(p.dim)] > INT32_MAX))
      return refuse(why, p.arg, ("'s dim " + std::to_string(p.dim) + " is 0 or over 2^31").c_str());
  }
  if (plan.kind == LaunchPlan::Attention) {
    if (plan.gridDims.size() != 3) return *why = "the launch plan's grid is not query tiles x heads x batches", false;
    if (!pairsWritable(args[size_t(plan.output)], why)) return false;
    if (tileCount(plan, args) > INT32_MAX) return *why = "the grid has more than 2^31 CTAs", false;
    return true;
  }
  // C stored by TMA: the store writes whole 16-byte units of a row, so a row must end on one
  // (else the element after C's last column, in its padding, would be written).
  for (const LaunchParam& p : plan.params)
    if (p.kind == LaunchParam::TensorMap && p.arg == plan.output) {
      const TensorView& c = args[size_t(p.arg)];
      if ((c.dims[1] * size_of(c.dtype)) % 16 != 0)
        return *why = "C's rows are not a multiple of 16 bytes long (the twin stores whole 16-byte units)", false;
    }
  // C passed by pointer takes element pairs in one 4-byte store when its type is 16-bit
  // (passed as a tensor map, the rules above apply).
  for (const LaunchParam& p : plan.params)
    if (p.kind == LaunchParam::Pointer && p.arg == plan.output) {
      const TensorView& c = args[size_t(p.arg)];
      if (c.rank() != 2) return *why = "C is not 2-D", false;
      const int64_t pitch = strideOf(c, 0);
      if (strideOf(c, 1) != 1) return *why = "C's rows are not contiguous", false;
      if (size_of(c.dtype) == 2 && (reinterpret_cast<uintptr_t>(c.data) % 4 != 0 || pitch % 2 != 0))
        return *why = "C's element pairs are not 4-byte aligned", false;
      break;
    }
  // The kernel numbers tiles in 32 bits, and its persistent loop steps past the last one.
  if (tileCount(plan, args) > INT32_MAX - (int64_t(1) << 20)) return *why = "C has more than 2^31 tiles", false;
  return true;
}

namespace {
/// split() for a K-cluster plan; `whole`: its split into whole tiles, `slots` CTAs at once.
Split kClusterSplit(const LaunchPlan& plan, const std::vector<TensorView>& args, const LaunchConfig& config,
                    int64_t units, int64_t slots, const Split& whole) {
  if (config.splits == 1) return whole;
  const TensorView& r = args[size_t(plan.reduction.arg)];
  const int64_t kTiles = (r.dims[size_t(plan.reduction.dim)] + plan.reduction.tile - 1) / plan.reduction.tile;
  Split best = whole;
  for (int64_t s = 2; s <= plan.kCluster && kTiles / s >= kSplitKMinSteps; s *= 2) { // 2, 4: measured
    const int64_t known = size_t(s) < plan.clusterSlots.size() ? plan.clusterSlots[size_t(s)] : 0;
    const int64_t fit = known > 0 ? known : int64_t(config.smCount) * plan.ctasPerSm / s;
    if (fit < 1) continue;
    const int64_t clusters = std::min(units, fit), rounds = (units + clusters - 1) / clusters;
    const Split c{clusters * s, 0, s, double(rounds) / double(s), s};
    if (config.splits > 1) {
      if (s <= config.splits) best = c;
      continue;
    }
    // The weight is read once whatever the split: it pays only to put more SMs on the
    // stream. Half of them reach the bandwidth a launch gets (H200: 64 CTAs whole read
    // 16 x 4096 x 4096 as fast as 128 in pairs), and a cluster waits for its slowest CTA
    // at every tile (16 x 28672 x 4096: 62.7 us whole, 69.6 in pairs). So: only tiles too
    // few for half the slots, in the smallest clusters that make up half, in one round.
    if (units * 2 >= slots || rounds > 1) break;
    best = c;
    if (units * s * 2 >= slots) break;
  }
  return best;
}
} // namespace

Split split(const LaunchPlan& plan, const std::vector<TensorView>& args, const LaunchConfig& config) {
  const int64_t units = unitCount(plan, args, plan.cluster);
  // One CTA per unit; with no SM count to go by, every unit counts as a round.
  if (!plan.persistent || config.smCount <= 0) return {units * plan.cluster, 0, 0, double(units)};
  // A cluster lives in one GPC, whose SMs need not divide by its size: as many clusters as
  // the driver says fit at once, where the runtime asked it, so that no cluster of a
  // persistent grid waits for another to finish (with 33 clusters of 4 on 132 SMs one did:
  // 2048^3 ran 1.8x slower).
  int64_t slots = std::max<int64_t>(1, int64_t(config.smCount) * plan.ctasPerSm / plan.cluster);
  if (size_t(plan.cluster) < plan.clusterSlots.size() && plan.clusterSlots[size_t(plan.cluster)] > 0 && !plan.kClusters())
    slots = std::min(slots, plan.clusterSlots[size_t(plan.cluster)]);
  const int64_t rounds = (units + slots - 1) / slots;
  Split whole{std::min(units, slots) * plan.cluster, 0, 0, double(rounds)};
  if (plan.kClusters()) return kClusterSplit(plan, args, config, units, slots, whole);
  const SplitK mode = config.splits == 1 ? SplitK::Off : config.splits > 1 ? SplitK::On : config.splitK;
  if (!plan.splitK() || plan.cluster != 1 || mode == SplitK::Off || units % slots == 0) return whole;
  const TensorView& r = args[size_t(plan.reduction.arg)];
  const int64_t kTiles = (r.dims[size_t(plan.reduction.dim)] + plan.reduction.tile - 1) / plan.reduction.tile;
  // The tiles of the last full round and the part-full one are split (all of them when
  // there are fewer tiles than CTAs).
  const int64_t full = units / slots;
  const int64_t splitTiles = units - (full >= 1 ? (full - 1) * slots : 0);
  const double before = double(units - splitTiles) / double(slots); // whole rounds first
  Split best; // the cheapest split (splits 0: none possible)
  // More tiles than the counters hold: whole tiles.
  if (splitTiles * kSplitKCountersPerTile * 4 > kSplitKCounterBytes) return whole;
  for (int64_t s = 2; s <= kTiles / kSplitKMinSteps && s <= 16; ++s) {
    const int64_t chunkRounds = (splitTiles * s + slots - 1) / slots;
    // At most 4 chunks per CTA: bounds the workspace (a slot per chunk) to 4 x slots slots.
    if (splitTiles * s > 4 * slots) break;
    // A chunk costs 1/s of a tile; the fix-up of a tile reads its s parts back, each about
    // 1.5 k-steps' worth of the main loop.
    const double cost = before + double(chunkRounds) / double(s) + double(s) * 1.5 / double(kTiles);
    // Asked for a number of chunks: the most up to it that the limits allow.
    if (config.splits > 1) {
      if (s <= config.splits) best = {slots, splitTiles, s, cost};
      continue;
    }
    if (best.splits == 0 || cost < best.cost) best = {slots, splitTiles, s, cost};
  }
  if (best.splits == 0) return whole;
  // Only for a clear gain (auto): the fix-up cost is a model, not a measurement.
  return mode == SplitK::On || best.cost < 0.97 * whole.cost ? best : whole;
}

int64_t headFold(const LaunchPlan& plan, const std::vector<TensorView>& args) {
  const int kArg = plan.foldsHeadsOf();
  if (kArg < 0) return 1;
  const TensorView& o = args[size_t(plan.output)];
  const int64_t rows = o.dims[2], groups = args[size_t(kArg)].dims[1];
  const int64_t ratio = std::max<int64_t>(o.dims[1] / std::max<int64_t>(groups, 1), 1);
  for (int64_t f = std::min<int64_t>(ratio, 64 / std::max<int64_t>(rows, 1)); f > 1; --f)
    if (ratio % f == 0) return f;
  return 1;
}

Split keySplit(const LaunchPlan& plan, const std::vector<TensorView>& args, const LaunchConfig& config) {
  // CTAs, each its own programs' keys whole: groups of query tiles x heads (f to a program
  // where they fold) x batches.
  const int64_t fold = headFold(plan, args);
  const GridDim& headDim = plan.gridDims.at(1); // the grid: query tiles, heads, batches
  const int64_t heads = args[size_t(headDim.arg)].dims[size_t(headDim.dim)];
  const int64_t units = unitCount(plan, args) / std::max<int64_t>(heads, 1) * ((heads + fold - 1) / fold);
  const TensorView& k = args[size_t(plan.reduction.arg >= 0 ? plan.reduction.arg : 0)];
  const int64_t steps = plan.reduction.arg >= 0
                            ? (k.dims[size_t(plan.reduction.dim)] + plan.reduction.tile - 1) / plan.reduction.tile
                            : 1;
  const int64_t slots = std::max<int64_t>(1, int64_t(config.smCount) * plan.ctasPerSm);
  // The busiest SM's key steps: rounds of CTAs (clusters) times the steps of one.
  const Split whole{units, 0, 0, double((units + slots - 1) / slots) * double(steps), 0, fold};
  Split best = whole;
  if (!plan.kClusters() || config.smCount <= 0 || config.splits == 1) return best;
  // The keys are read once whatever the split: it pays only to put more SMs on them. So the
  // cluster size whose rounds of clusters (as many at once as the driver says fit: a cluster
  // lives in one GPC) take the fewest steps, each part keeping kKeySplitMinSteps steps; the
  // smaller at a tie. Any size, not only powers of two: where 32 clusters of 4 do not fit
  // at once (H200: a GPC's SMs need not divide by 4), 32 of 3 may, on 96 SMs instead of 64.
  // Asked for a number of parts (`splits`), at most that many.
  for (int64_t s = 2; s <= plan.kCluster && steps / s >= kKeySplitMinSteps; ++s) {
    if (config.splits > 1 && s > config.splits) break;
    const int64_t known = size_t(s) < plan.clusterSlots.size() ? plan.clusterSlots[size_t(s)] : 0;
    const int64_t fit = known > 0 ? known : slots / s;
    if (fit < 1) continue;
    const double cost = double((units + fit - 1) / fit) * double((steps + s - 1) / s);
    if (cost < best.cost) best = {units * s, 0, 0, cost, s, fold};
  }
  // Only for a clear gain (auto): the model counts key steps, not the merge nor a cluster
  // waiting for its slowest CTA. Where the grid already fills the SMs the gain is a sliver
  // of the last round (prefill, B4 H32 S4096: pairs model 1008 steps against 1024 and ran
  // 18% slower at head dim 128, 37% causal; H200, 2026-12-03); where it leaves them idle it
  // is 2x and more (decode: 256 -> 86 steps, 1.75 -> 3.75 TB/s).
  if (config.splits == 0 && best.cluster > 1 && best.cost > kKeySplitMinGain * whole.cost) return whole;
  return best;
}

std::string describe(const LaunchPlan& plan, const Split& work) {
  const std::string ctas = std::to_string(work.ctas) + " CTAs", s = std::to_string(work.cluster);
  if (work.splitTiles)
    return ctas + ", split-K: the last " + std::to_string(work.splitTiles) + " tiles cut along K into " +
           std::to_string(work.splits) + " chunks";
  if (plan.kind == LaunchPlan::Attention) {
    std::string out = ctas;
    if (work.fold > 1)
      out += ", " + std::to_string(work.fold) + " query heads to a program (their rows in one tile, one read of their K/V head)";
    if (work.cluster > 1)
      out += ", key splits in clusters of " + s + ": each program's keys cut into " + s + " parts, merged in rank order";
    return out;
  }
  if (work.cluster > 1 && plan.kClusters())
    return ctas + ", split-K in clusters of " + s + ": each tile cut along K into " + s + " chunks";
  return ctas;
}

namespace {
/// C's rows for `p`'s launch over `args` (every twin's first grid dim); 0 for a plan with no
/// grid dims.
int64_t rowsOf(const LaunchPlan& p, const std::vector<TensorView>& args) {
  return p.gridDims.empty() ? 0 : args[size_t(p.gridDims[0].arg)].dims[size_t(p.gridDims[0].dim)];
}

/// The decode twin for `args`, or -1 (see choose()).
template <class Usable>
int chooseDecode(const std::vector<LaunchPlan>& twins, Usable& usable,
                 const std::vector<TensorView>& args, const LaunchConfig& config) {
  auto decode = [&](size_t i) { return twins[i].decode() && !twins[i].gridDims.empty() && usable(i); };
  // One that holds C's rows in one tile, always: it reads each weight once and wastes no
  // multiply on absent rows.
  for (size_t i = 0; i < twins.size(); ++i)
    if (decode(i) && rowsOf(twins[i], args) <= twins[i].tileM) return int(i);
  // Else one that holds them in two rows of tiles, where both fill one round of CTAs: the
  // tile order puts a column's two tiles side by side, so the second CTA reads its B tile
  // from L2 as the first brings it in. (H200, 2026-12-01, bf16: 65, 80, 96, 112, 128 x
  // 4096 x 4096 in 16.0, 14.4, 14.4, 14.8, 14.5 us against 19.2, 17.6, 17.2, 16.2, 15.7 on
  // 128-row tiles; in two rounds slower: 96 x 8192 x 8192 44.4 us against 39.8.)
  if (config.smCount <= 0) return -1;
  for (size_t i = 0; i < twins.size(); ++i) {
    if (!decode(i) || rowsOf(twins[i], args) > 2 * twins[i].tileM) continue;
    const LaunchPlan& p = twins[i];
    if (unitCount(p, args) <= int64_t(config.smCount) * p.ctasPerSm / p.cluster) return int(i);
  }
  return -1;
}

/// The swapped twin of 128 columns for `args`, or -1 (see choose()): for C of 129 to 512
/// rows that 128-row tiles would pad by an eighth or more, the twin of the fewest rows whose
/// tiles fill one round of CTAs. H200, 2026-12-04, bf16 plain GEMM (kiln bench beside
/// cuBLASLt, L2 flushed; docs/benchmarks/2026-12-04-h200-medium-m-gemm/): 160 x 8192 x 8192
/// in 38.8 us against 68.9 (cuBLASLt 37.3-37.8), 200 x 4096 x 4096 19.4 against 23.3, 300 x
/// 4096 x 4096 20.0 against 37.4. Chosen by the cost model instead (rounds x tile area), they
/// lost where the 128-row tiles pad no row (256 x 4096 x 4096 + bias + ReLU: 19.8 against
/// 17.1) and in more than one round (480 x 8192 x 8192 + bias + ReLU: 98.5 against 87.5).
template <class Usable>
int chooseWide(const std::vector<LaunchPlan>& twins, Usable& usable, const std::vector<TensorView>& args,
               const LaunchConfig& config) {
  if (config.smCount <= 0) return -1;
  int best = -1;
  for (size_t i = 0; i < twins.size(); ++i) {
    const LaunchPlan& p = twins[i];
    if (!p.swapAB || p.decode() || p.gridDims.empty()) continue;
    // C's rows: the cheap test before the twin's TMA rules, which a launch of any other shape
    // then never pays for these twins.
    const int64_t rows = rowsOf(p, args);
    const int64_t padded = (rows + 127) / 128 * 128;
    if (rows <= 128 || rows > 512 || 8 * (padded - rows) < padded) return -1;
    if (!usable(i) || unitCount(p, args) > int64_t(config.smCount) * p.ctasPerSm) continue;
    if (best < 0 || p.tileM < twins[size_t(best)].tileM) best = int(i);
  }
  return best;
}

/// Whether some of B's rows start off a 32-byte sector: its row pitch is not a multiple of 32
/// bytes (N an odd multiple of 8 bf16 elements: every other row) or its first row starts off
/// one (a view of B 16 bytes into an allocation: every row). Each such 128-byte row of a B
/// box touches five sectors in L2 instead of four, a quarter more of B's traffic, which
/// stacked pairs sharing B halve. (The choice cache keys addresses modulo 32 for this.)
bool bRowsOffSectors(const LaunchPlan& p, const std::vector<TensorView>& args) {
  const TensorView& b = args[size_t(p.gridDims.back().arg)]; // B: the grid's columns are its dim 1
  return b.rank() == 2 && ((strideOf(b, 0) * int64_t(size_of(b.dtype))) % kL2SectorBytes != 0 ||
                           reinterpret_cast<uintptr_t>(b.data) % kL2SectorBytes != 0);
}

/// A tile's work relative to a 128 x 128 tile's: its area times the time per element of its
/// kind. A 128 x 256 one computes 6% faster per element (measured: 1442 vs 1366 us at
/// 8192^3), a 128 x 192 one 2% (its forced runs took 0.98 of the 128 x 128 tile's time per
/// element where rounds were near full: H200, 8192^3, 1411.5 us in 20.8 rounds against the
/// 128 x 256 tile's 1373.3 in 15.5, 2026-11-30; so it wins only where it saves a round), a
/// 64-row one (one consumer warpgroup) 26% slower (580 against 779 TFLOP/s at 4096^3), the
/// tall 256 x 128 one as fast as the 128 x 256 one (H100, 2026-12-06: 174 us both at 4096^3,
/// 1.365 and 1.360 ms at 8192^3; at equal cost the earlier twin, 128 x 256, keeps the place).
/// Two products (one wgmma of twice tileN) weigh by that width: at 2048 x 14336 x 4096 the
/// 128 x 128 tile of two (wgmma N 256) ran in 634 us against 667 for 128 x 64 (N 128), at
/// 8192 rows 2552 against 2969 (H200, 2026-12-04, docs/benchmarks/2026-12-04-h200-llama-layer/).
double tileWork(const LaunchPlan& p) {
  const int64_t mmaN = p.tileN * p.products;
  double perElement = 1.0;
  if (mmaN >= 256 || p.tileM >= 256) perElement = 0.94;
  else if (p.tileM < 128) perElement = 1.0 / 0.74;
  else if (mmaN == 192) perElement = 0.98;
  return double(p.tileM * mmaN) / (128.0 * 128.0) * perElement;
}
} // namespace

int choose(const std::vector<LaunchPlan>& twins, const std::vector<TensorView>& args, const LaunchConfig& config,
           std::string* why, Split* work) {
  int best = -1;
  double bestCost = 0;
  // Stacked pairs: 2-CTA clusters of vertically adjacent tiles (a plan sets clusterAlongM
  // only with a cluster).
  auto stacked = [](const LaunchPlan& t) { return t.cluster > 1 && t.clusterAlongM; };
  const bool fullHeight = std::any_of(twins.begin(), twins.end(), [](const LaunchPlan& t) { return t.tileM >= 128; });
  const bool lone = !std::all_of(twins.begin(), twins.end(), stacked);
  // Each twin's rules checked once, when first asked (this runs at every launch: no
  // allocation; a kernel has far fewer than 64 twins, any past 64 are checked each time).
  uint64_t checked = 0, passed = 0;
  auto usable = [&](size_t i) {
    const uint64_t bit = i < 64 ? uint64_t(1) << i : 0;
    if (bit && (checked & bit)) return (passed & bit) != 0;
    std::string whyNot;
    const bool ok = applies(twins[i], args, &whyNot);
    if (!ok && i == 0) *why = whyNot;
    checked |= bit;
    if (ok) passed |= bit;
    return ok;
  };
  if (!twins.empty()) usable(0); // names why the first twin does not apply, as before
  // Attention twins: the first that applies, one CTA per group of query tiles (or a
  // cluster of CTAs cutting its keys).
  for (size_t i = 0; i < twins.size(); ++i)
    if (twins[i].kind == LaunchPlan::Attention && usable(i)) {
      if (work) *work = keySplit(twins[i], args, config);
      return int(i);
    }
  if (!twins.empty() && twins[0].kind == LaunchPlan::Attention) return -1;
  if (int d = chooseDecode(twins, usable, args, config); d >= 0) {
    if (work) *work = split(twins[size_t(d)], args, config);
    return d;
  }
  if (int w = chooseWide(twins, usable, args, config); w >= 0) {
    if (work) *work = split(twins[size_t(w)], args, config);
    return w;
  }
  Split bestSplit;
  for (size_t i = 0; i < twins.size(); ++i) {
    if (twins[i].swapAB || !usable(i)) continue; // (swapped twins: their own rules above)
    const LaunchPlan& p = twins[i];
    const int64_t rows = rowsOf(p, args);
    if (!p.gridDims.empty()) {
      // Beside lone twins, stacked pairs only with two rows of tiles: with one, every pair's
      // second CTA has no rows and the pair is a lone tile holding two SMs.
      if (stacked(p) && lone && rows <= p.gridDims[0].tile) continue;
      // Beside 128-row twins, a tile of fewer rows only where C has no more rows of its units
      // than of 128-row tiles: alone, where C has at most 64 rows (decode shapes: it skips the
      // empty rows a 128-row tile multiplies; elsewhere it measured no faster on the H200,
      // 1000^3: 14.0 against 13.4 us); in stacked pairs sharing B, anywhere, and the rounds
      // decide (1000^3: 12.0 us).
      const int64_t stack = stacked(p) ? p.cluster : 1; // stacked tiles make one unit
      if (p.tileM < 128 && fullHeight && ((rows + p.tileM - 1) / p.tileM + stack - 1) / stack > (rows + 127) / 128) continue;
    }
    const double perTile = tileWork(p);
    const Split s = split(p, args, config);
    const double cost = s.cost * perTile;
    // At equal cost, stacked pairs beat the same tile alone: they read each B tile from L2
    // once per pair (H200, 128 x 128: 2000 x 1000 x 1000 in 15.0 us against 18.2 alone,
    // and no slower on any shape measured).
    // The tall tile's pairs only where B's rows start off a 32-byte sector (bRowsOffSectors):
    // elsewhere they ran 1% slower than the tall tile alone (H200, 2026-12-06, bf16 plain GEMM:
    // 4096 x 4160 x 4096 176.8 against 174.6 us, 4096 x 4112 178.0 against 175.7; 4096 x
    // 4104: 179.9 against 188.8, cuBLASLt 178.8).
    const bool tiesSameTile = best >= 0 && cost == bestCost && twins[size_t(best)].tileM == p.tileM &&
                              twins[size_t(best)].tileN == p.tileN;
    const bool pairsOverAlone = tiesSameTile && stacked(p) && !stacked(twins[size_t(best)]) &&
                                (!tall(p.tileM) || bRowsOffSectors(p, args));
    // At equal cost in one round, four tiles side by side sharing A beat the same tile alone:
    // each CTA reads a quarter of A's rows from L2 instead of all of them, and its ring is
    // shallower (H100, 2026-12-06: 128 x 12288 x 4096 in 37.1 us against 39.0, 128 x 14336 x
    // 4096 42.6 against 44.7). Stacked pairs that tie keep the place (not measured beside it).
    const bool quadsOverAlone =
        tiesSameTile && s.cost == 1.0 && p.cluster == 4 && !p.clusterAlongM && twins[size_t(best)].cluster == 1;
    // In one round, for C of one row of 128-row tiles (65 to 128 rows), the 64 x 192 tile in
    // stacked pairs over a best that also takes one round on fewer CTAs: its N / 96 CTAs put
    // a third more SMs to work than the 128 x 128 tiles' N / 128 (fours or alone), each
    // taking in as many bytes a k-step (64 rows of A and 192 columns of B against 128 and
    // 128). The cost model counts rounds times a tile's compute, which this memory-bound
    // class does not follow. Same-call A/B against the fours, 2026-12-07
    // (docs/benchmarks/2026-12-07-hopper-gemm-n192-pairs/): H200, 128 x 12288 x 4096 in
    // 29.3-29.8 us against 30.4-30.5 (cuBLASLt 27.8-28.1), 96 rows 1-2% faster, 128 x 11264 a
    // tie; H100 (DRAM-bound there) within 1.3% of the fours.
    const bool narrowPairsWider = best >= 0 && stacked(p) && p.tileM == 64 && p.tileN == 192 && rows > 64 &&
                                  rows <= 128 && s.cost == 1.0 && s.splits == 0 && bestSplit.cost == 1.0 &&
                                  bestSplit.splits == 0 && s.ctas > bestSplit.ctas;
    if (best < 0 || cost < bestCost || pairsOverAlone || quadsOverAlone || narrowPairsWider) {
      best = int(i), bestCost = cost, bestSplit = s;
      if (work) *work = s;
    }
  }
  return best;
}

namespace {
/// ChoiceCache's key for `args` into `key`: per argument its dtype, rank, dims, strides (a
/// count, then the strides as given: none means row-major) and address modulo
/// kL2SectorBytes. The number of words, or 0 where they do not fit.
size_t choiceKey(const std::vector<TensorView>& args, int64_t* key, size_t capacity) {
  size_t n = 0;
  auto put = [&](int64_t w) {
    if (n < capacity) key[n] = w;
    ++n;
  };
  for (const TensorView& v : args) {
    put(int64_t(v.dtype));
    put(int64_t(v.dims.size()));
    for (int64_t d : v.dims) put(d);
    put(int64_t(v.strides.size()));
    for (int64_t s : v.strides) put(s);
    put(int64_t(reinterpret_cast<uintptr_t>(v.data) % kL2SectorBytes));
  }
  return n <= capacity ? n : 0;
}
} // namespace

int ChoiceCache::choose(const std::vector<LaunchPlan>& twins, const std::vector<TensorView>& args,
                        const LaunchConfig& config, std::string* why, Split* work) {
  std::array<int64_t, kKeyWords> key{};
  const size_t words = choiceKey(args, key.data(), kKeyWords);
  if (words > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Entry& e : entries_)
      if (e.words == words && std::equal(key.begin(), key.begin() + long(words), e.key.begin())) {
        if (why) *why = e.why;
        if (work) *work = e.work;
        return e.twin;
      }
  }
  std::string whyNot;
  Split s;
  const int twin = hopper::choose(twins, args, config, &whyNot, &s);
  if (words > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[next_];
    next_ = (next_ + 1) % kEntries;
    e.words = words, e.key = key, e.twin = twin, e.work = s, e.why = whyNot;
  }
  if (why) *why = std::move(whyNot);
  if (work) *work = s;
  return twin;
}

TensorMapCache::Key TensorMapCache::keyOf(const void* address, uint32_t type, size_t rank, const uint64_t* dims,
                                          const uint64_t* pitches, const uint32_t* box) {
  static_assert(3 + 5 * 2 + 4 <= kKeyWords, "a rank-5 map's inputs fit the key");
  Key key{};
  size_t k = 0;
  key[k++] = uint64_t(reinterpret_cast<uintptr_t>(address));
  key[k++] = type;
  key[k++] = rank;
  for (size_t d = 0; d < rank; ++d) key[k++] = dims[d], key[k++] = box[d];
  for (size_t d = 0; d + 1 < rank; ++d) key[k++] = pitches[d];
  return key;
}

bool TensorMapCache::find(const Key& key, void* map) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_)
    if (e.lastUse && e.key == key) {
      e.lastUse = ++clock_; // a map in use every launch (A, C) outlives the ones that change (B per layer)
      std::memcpy(map, &e.map, sizeof e.map);
      return true;
    }
  return false;
}

void TensorMapCache::keep(const Key& key, const void* map) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* oldest = &entries_[0];
  for (Entry& e : entries_)
    if (e.lastUse < oldest->lastUse) oldest = &e;
  oldest->lastUse = ++clock_, oldest->key = key;
  std::memcpy(&oldest->map, map, sizeof oldest->map);
}

void launch(CUfunction f, const LaunchPlan& plan, const std::vector<TensorView>& args, CUstream stream,
            const std::string& kernelName, const Split& work, const WorkspaceFn& workspace, TensorMapCache* maps) {
  if (work.ctas <= 0) return; // a grid of no programs (packed sequences, none of them)
  // One slot per parameter, sized and aligned for a tensor map (the largest and the most
  // aligned); the driver reads each through its pointer in `params`. On the stack for the
  // parameter counts kiln's plans have (a launch should not allocate).
  struct alignas(alignof(CUtensorMap)) Slot {
    unsigned char bytes[sizeof(CUtensorMap)];
  };
  constexpr size_t kInline = 16;
  Slot inlineSlots[kInline];
  void* inlineParams[kInline];
  std::vector<Slot> heapSlots(plan.params.size() > kInline ? plan.params.size() : 0);
  std::vector<void*> heapParams(heapSlots.size());
  Slot* slots = heapSlots.empty() ? inlineSlots : heapSlots.data();
  void** params = heapParams.empty() ? inlineParams : heapParams.data();
  for (size_t i = 0; i < plan.params.size(); ++i) {
    const LaunchParam& p = plan.params[i];
    const TensorView& v = args[size_t(p.arg)];
    void* slot = params[i] = slots[i].bytes;
    switch (p.kind) {
    case LaunchParam::TensorMap: {
      // Innermost first: extents, the strides of all but the innermost dim (bytes), box.
      const size_t rank = p.box.size();
      cuuint64_t dims[5], pitch[4];
      cuuint32_t box[5], unit[5];
      for (size_t d = 0; d < rank; ++d) {
        dims[d] = cuuint64_t(v.dims[rank - 1 - d]);
        if (d > 0) pitch[d - 1] = cuuint64_t(strideOf(v, int(rank - 1 - d)) * size_of(v.dtype));
        box[d] = cuuint32_t(p.box[d]);
        unit[d] = 1;
      }
      // Folded heads: Q's map (attention's first parameter) reads the T rows of f heads.
      if (i == 0 && work.fold > 1) box[1] = cuuint32_t(v.dims[2]), box[2] = cuuint32_t(work.fold);
      auto type = v.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
      const TensorMapCache::Key key = TensorMapCache::keyOf(v.data, uint32_t(type), rank, dims, pitch, box);
      if (maps && maps->find(key, slot)) break;
      KILN_CU_CHECK_CTX(cuda::driver().cuTensorMapEncodeTiled(static_cast<CUtensorMap*>(slot), type, cuuint32_t(rank), v.data, dims,
                                                              pitch, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                              CU_TENSOR_MAP_SWIZZLE_128B,
                                                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                        "kernel '" + kernelName + "': encoding the tensor map of argument " + std::to_string(p.arg) +
                            " (" + v.describe() + ")");
      if (maps) maps->keep(key, slot);
      break;
    }
    case LaunchParam::Pointer: {
      auto ptr = reinterpret_cast<CUdeviceptr>(v.data);
      std::memcpy(slot, &ptr, sizeof ptr);
      break;
    }
    case LaunchParam::Stride: {
      int64_t stride = strideOf(v, p.dim);
      std::memcpy(slot, &stride, sizeof stride);
      break;
    }
    case LaunchParam::Dim: {
      auto dim = int32_t(v.dims[size_t(p.dim)]);
      std::memcpy(slot, &dim, sizeof dim);
      break;
    }
    case LaunchParam::Workspace: {
      CUdeviceptr ws =
          work.splitTiles ? workspace(size_t(splitKWorkspaceBytes(plan.tileM, plan.tileN, work.splitTiles, work.splits))) : 0;
      std::memcpy(slot, &ws, sizeof ws);
      break;
    }
    case LaunchParam::HeadFold: {
      auto n = int32_t(work.fold);
      std::memcpy(slot, &n, sizeof n);
      break;
    }
    case LaunchParam::SplitTiles:
    case LaunchParam::KSplits: {
      auto n = int32_t(p.kind == LaunchParam::SplitTiles ? work.splitTiles : work.splits);
      std::memcpy(slot, &n, sizeof n);
      break;
    }
    }
  }
  const std::array<unsigned, 3> grid = {unsigned(work.ctas), 1, 1}, block = {unsigned(plan.threads), 1, 1};
  cuda::launchKernelEx(f, kernelName, grid, block, unsigned(work.cluster > 0 ? work.cluster : plan.cluster),
                       unsigned(plan.sharedBytes), stream, params);
}

} // namespace kiln::hopper
