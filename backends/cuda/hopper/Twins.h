#pragma once
// Internal: which sm_90a twins a set of options selects. One list for the pass that emits
// them (kiln-lower-gemm-sm90) and for the compiler's checks of the runtime options, so the
// two cannot disagree about which tiles (and so which ring depths) are in play.
#include "hopper/Sm90Tiles.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::hopper {

/// One twin: its tile, its name (the kernel's + suffix) and its cluster.
struct TwinShape {
  int64_t bm = 128, bn = 128;
  std::string suffix;
  int64_t cluster = 1;
  bool clusterAlongM = false;
  bool swapAB = false; ///< the decode twin (Sm90Tiles.h)
  int64_t stages = 0;  ///< its ring when the options name none (0: the deepest that fits)
};

/// Whether the tall tile is built in clusters of `cluster` (0: kiln's choice, 1: none),
/// stacked along M when clusterAlongM: alone or in stacked pairs sharing B, not side by side
/// (not built). One rule for the twins selected and the options accepted.
constexpr bool tallClusterBuilt(int64_t cluster, bool clusterAlongM) {
  return cluster <= 1 || (cluster == 2 && clusterAlongM);
}

/// The twins tileM / tileN select (0: any of kiln's), with `cluster` CTAs per cluster (1, 2
/// or 4 side by side sharing A; 0: kiln's choice) stacked along M when clusterAlongM. Kiln's tiles: 128 x 128
/// (<kernel>__sm90), 128 x 256 (__sm90_n256), 64 x 128 (__sm90_m64), 128 x 192
/// (__sm90_n192: where it takes fewer rounds of CTAs than the others, e.g. 1536^3 in one
/// round of 96 where 128 x 256 leaves 60 SMs idle: 17.3 against 20.7 us on an H100,
/// 2026-12-05); 64 x 192 (__sm90_m64n192) when tileN asks for 192, and among kiln's own tiles
/// in stacked pairs sharing B (__sm90_m64n192x2: below). A
/// twin selected alone (or with its stacked pairs) is <kernel>__sm90. cluster 0: the
/// 128 x 256 tile alone; the 128 x 128, 64-row and tall tiles both alone and in stacked pairs
/// sharing B, suffixed x2 (each B tile read from L2 once per pair: on the H200, 1000^3 ran
/// in 12.0 us with 64 x 128 pairs against 13.4 with lone 128 x 128 tiles, 2000 x 1000 x 1000
/// in 15.0 us with 128 x 128 pairs against 18.2 alone), and the 128 x 128 tile also in
/// clusters of four side by side sharing A, suffixed x4 (below). 64 x 256 (__sm90_m64n256,
/// ping-pong: Sm90Tiles.h) only when both tileM and tileN ask for it (experimental); 256 x 128
/// (__sm90_m256, the tall tile: Sm90Tiles.h) among kiln's tiles (no width asked for) or when
/// tileM asks for 256, alone and in stacked pairs sharing B (__sm90_m256x2; the launch's rule:
/// Sm90Launch.cpp): the 128 x 256 tile's speed per element in half as many columns, it takes
/// fewer rounds where C's columns fall just past a multiple of 256 (H100, 2026-12-06: 4096 x
/// 4160 x 4096 in 174 us alone against the 128 x 256 tile's 209, 4096^3 in 174 against 174). With
/// kiln's tiles (tileM = tileN = 0, no forced clusters), decode twins of 16, 32, ... up to
/// `decodeRows` rows by 64 columns (__sm90_dec, __sm90_dec32, ...: C^T = B^T A^T, Sm90Tiles.h).
/// The options' values are the caller's to check; checkTwinOptions below accepts only values
/// that select some twin.
/// With kiln's tiles, also swapped twins of 128 columns by 80, 96, ... up to `wideRows` rows
/// (__sm90_sw80, ...: two consumer warpgroups, C^T = B^T A^T, no K-clusters), for C of more
/// rows than a decode twin holds but few enough that 128-row tiles waste much (Sm90Tiles.h).
inline std::vector<TwinShape> selectTwins(int64_t tileM, int64_t tileN, int64_t cluster, bool clusterAlongM,
                                          int64_t decodeRows = 0, int64_t wideRows = 0) {
  struct Tile {
    int64_t bm, bn;
    const char* suffix;
  };
  static constexpr Tile kTiles[] = {{128, 128, "__sm90"},      {128, 256, "__sm90_n256"},     {64, 128, "__sm90_m64"},
                                    {128, 192, "__sm90_n192"}, {64, 192, "__sm90_m64n192"}, {64, 256, "__sm90_m64n256"},
                                    {256, 128, "__sm90_m256"}};
  std::vector<TwinShape> twins;
  for (const Tile& t : kTiles) {
    if ((tileM != 0 && tileM != t.bm) || (tileN != 0 && tileN != t.bn) || (pingpong(t.bm, t.bn) && (tileM == 0 || tileN == 0)) ||
        (tall(t.bm) && tileM == 0 && tileN != 0))
      continue;
    if (tall(t.bm) && !tallClusterBuilt(cluster, clusterAlongM)) continue;
    // The 64 x 192 tile with no width asked for: only among kiln's own tiles (no height nor
    // clusters asked for either), in stacked pairs sharing B (the launch's rule: Sm90Launch.cpp).
    if (tileN == 0 && t.bm < 128 && t.bn == 192) {
      if (tileM == 0 && cluster == 0) twins.push_back({t.bm, t.bn, std::string(t.suffix) + "x2", 2, true});
      continue;
    }
    twins.push_back({t.bm, t.bn, t.suffix, cluster == 0 ? 1 : cluster, cluster != 0 && clusterAlongM});
    if (cluster == 0 && (t.bm < 128 || t.bn == 128)) twins.push_back({t.bm, t.bn, std::string(t.suffix) + "x2", 2, true});
    // Four 128 x 128 tiles side by side sharing A, each CTA loading a quarter of its rows
    // (multicast), on a ring of 5: for C of one row of tiles that takes one round (a GEMM of
    // 65 to 128 rows past the decode twins' reach), where the lone tiles leave SMs idle and
    // every CTA reads all of A. H100, 2026-12-06: 128 x 12288 x 4096 in 37.1 us against 39.0
    // alone (cuBLASLt 36.8-37.3), 128 x 14336 x 4096 42.6 against 44.7 (43.3-44.3).
    if (cluster == 0 && t.bm == 128 && t.bn == 128)
      twins.push_back({t.bm, t.bn, std::string(t.suffix) + "x4", 4, false, false, 5});
  }
  if (twins.size() == 1 || (twins.size() == 2 && twins[0].bm == twins[1].bm && twins[0].bn == twins[1].bn))
    twins[0].suffix = "__sm90";
  // kiln's choice also has decode twins (Sm90Tiles.h) of 16, 32, ... up to decodeRows rows of
  // C, smallest first: each launch takes the first that holds C's rows.
  if (tileM == 0 && tileN == 0 && cluster != 2)
    for (int64_t rows = 16; rows <= decodeRows; rows += 16)
      twins.push_back({rows, 64, rows == 16 ? "__sm90_dec" : "__sm90_dec" + std::to_string(rows), 1, false, true});
  if (tileM == 0 && tileN == 0 && cluster != 2)
    for (int64_t rows = 80; rows <= wideRows; rows += 16)
      twins.push_back({rows, 128, "__sm90_sw" + std::to_string(rows), 1, false, true});
  return twins;
}

/// The deepest ring every twin of `twins` fits: the most a hopper_stages that applies to
/// all of them may ask for.
inline int64_t maxStagesOf(const std::vector<TwinShape>& twins) {
  int64_t most = 64;
  for (const TwinShape& t : twins) most = std::min(most, maxStages(t.bm, t.bn, t.swapAB));
  return most;
}

/// The twins' options, as RuntimeOptions (hopper_*) and kiln-lower-gemm-sm90 (tile-n, ...)
/// both take them: 0 leaves a value to kiln.
struct TwinOptions {
  int64_t tileM = 0, tileN = 0, stages = 0, cluster = 0;
  bool clusterM = false;
  int64_t raster = 0;
};
/// How a caller spells each option in its messages.
struct TwinOptionNames {
  const char *tileM, *tileN, *stages, *cluster, *clusterM, *raster;
};

/// The first rule `o` breaks, worded with `n`'s names, or "" when it keeps them all. One
/// list for the runtime's options and the pass's, so the two cannot accept different sets.
inline std::string checkTwinOptions(const TwinOptions& o, const TwinOptionNames& n) {
  auto got = [](int64_t v) { return ", got " + std::to_string(v); };
  if (o.tileN != 0 && o.tileN != 128 && o.tileN != 192 && o.tileN != 256)
    return std::string(n.tileN) + " must be 0, 128, 192 or 256" + got(o.tileN);
  if (o.tileM != 0 && o.tileM != 64 && o.tileM != 128 && o.tileM != 256)
    return std::string(n.tileM) + " must be 0, 64, 128 or 256" + got(o.tileM);
  if (tall(o.tileM) && o.tileN != 0 && o.tileN != 128)
    return std::string(n.tileN) + " must be 0 or 128 at " + n.tileM + " 256 (the tall tile is 256 x 128)" + got(o.tileN);
  if (tall(o.tileM) && !tallClusterBuilt(o.cluster, o.clusterM))
    return std::string(n.cluster) + " must be 0, 1, or 2 with " + n.clusterM + " at " + n.tileM +
           " 256 (the tall tile runs alone or in stacked pairs)" + got(o.cluster);
  if (o.cluster < 0 || o.cluster > 4 || o.cluster == 3)
    return std::string(n.cluster) + " must be 0, 1, 2 or 4" + got(o.cluster);
  // (Ping-pong consumers in fours: never built nor tested.)
  if (o.cluster == 4 && pingpong(o.tileM, o.tileN))
    return std::string(n.cluster) + " 4 does not take the ping-pong 64 x 256 tile (" + n.tileM + " 64, " + n.tileN +
           " 256): 0, 1 or 2" + got(o.cluster);
  if (o.clusterM && o.cluster != 2)
    return std::string(n.clusterM) + " pairs tiles in clusters: it needs " + n.cluster + " 2" + got(o.cluster);
  if (o.raster < 0 || o.raster > 64) return std::string(n.raster) + " must be 0..64" + got(o.raster);
  // Every height has every width (the tall tile's one, checked above): the values above
  // always select at least one twin.
  const int64_t most = maxStagesOf(selectTwins(o.tileM, o.tileN, o.cluster, o.clusterM));
  if (o.stages != 0 && (o.stages < 2 || o.stages > most))
    return std::string(n.stages) + " must be 0 or 2.." + std::to_string(most) + " at " + n.tileN + " " +
           std::to_string(o.tileN) + (o.tileM ? std::string(" and ") + n.tileM + " " + std::to_string(o.tileM) : "") +
           " (the ring must fit in 227 KiB of shared memory)" + got(o.stages);
  return "";
}

} // namespace kiln::hopper
