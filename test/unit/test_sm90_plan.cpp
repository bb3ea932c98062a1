// The sm_90a twin's launch plan (hopper/LaunchPlan.h) and the rules that decide, per launch,
// whether the twin runs (hopper/Sm90Launch.h): internal, so compiled into this binary.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstring>

#include "hopper/LaunchPlan.h"
#include "hopper/Sm90Launch.h"
#include "hopper/Twins.h"
#include "kiln/error.hpp"

using namespace kiln;
using namespace kiln::hopper;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// C = A @ B + bias: the plan the compiler writes for gemm_bias_relu (arguments A, B, bias, C).
LaunchPlan gemmPlan() {
  LaunchPlan p;
  p.entry = "gemm_bias_relu__sm90";
  p.threads = 384;
  p.sharedBytes = 132160;
  p.tileM = 128, p.tileN = 128, p.tileK = 64;
  p.stages = 4;
  p.gridDims = {{0, 0, 128, "M"}, {1, 1, 128, ""}};
  p.params = {{LaunchParam::TensorMap, 0, 0, {64, 128}}, {LaunchParam::TensorMap, 1, 0, {64, 64}},
              {LaunchParam::Pointer, 3, 0, {}},           {LaunchParam::Stride, 3, 0, {}},
              {LaunchParam::Pointer, 2, 0, {}},           {LaunchParam::Stride, 2, 0, {}},
              {LaunchParam::Dim, 0, 0, {}},               {LaunchParam::Dim, 1, 1, {}},
              {LaunchParam::Dim, 0, 1, {}}};
  p.output = 3;
  return p;
}

alignas(256) char gMemory[1 << 12]; // stands in for device memory: only addresses matter here

TensorView view(size_t offset, std::vector<int64_t> dims, std::vector<int64_t> strides = {}) {
  return TensorView{gMemory + offset, DType::bf16, std::move(dims), std::move(strides)};
}

std::vector<TensorView> args(int64_t M, int64_t N, int64_t K) {
  return {view(0, {M, K}), view(256, {K, N}), view(512, {N}), view(768, {M, N})};
}

/// kiln's own persistent GEMM twins in the compiler's order: 128 x 128 alone and in stacked
/// pairs, 128 x 256, 64 x 128 alone and in stacked pairs, then (withMid) 128 x 192.
std::vector<LaunchPlan> ownTwins(bool withMid) {
  LaunchPlan narrow = gemmPlan(), pairs = gemmPlan(), wide = gemmPlan(), low = gemmPlan(), lowPairs = gemmPlan(),
             mid = gemmPlan();
  for (LaunchPlan* p : {&narrow, &pairs, &wide, &low, &lowPairs, &mid}) p->persistent = true;
  pairs.cluster = lowPairs.cluster = 2;
  pairs.clusterAlongM = lowPairs.clusterAlongM = true;
  wide.tileN = 256;
  wide.gridDims[1].tile = 256;
  mid.tileN = 192;
  mid.gridDims[1].tile = 192;
  for (LaunchPlan* p : {&low, &lowPairs}) {
    p->tileM = 64;
    p->threads = 256;
    p->gridDims[0].tile = 64;
  }
  std::vector<LaunchPlan> twins = {narrow, pairs, wide, low, lowPairs};
  if (withMid) twins.push_back(mid);
  return twins;
}

} // namespace

TEST_CASE("a launch plan survives JSON, as the kernel cache stores it", "[sm90]") {
  LaunchPlan p = gemmPlan();
  LaunchPlan q = LaunchPlan::fromJson(nlohmann::json::parse(p.toJson().dump()));
  CHECK(q.toJson() == p.toJson());
  CHECK(q.params.size() == 9);
  CHECK(q.params[1].box == std::vector<int64_t>{64, 64});
  CHECK(q.str() == "128x128x64 tiles, 4 stages, 384 threads, 132160 B smem, one CTA per ceildiv(M, 128) x ceildiv(arg1.1, 128) tiles");
  nlohmann::json older = p.toJson(); // cache entries written before plans recorded their stages
  older.erase("stages");
  older.erase("cluster");
  CHECK(LaunchPlan::fromJson(older).cluster == 1);
  CHECK(LaunchPlan::fromJson(older).stages == 0);
  CHECK_THAT(LaunchPlan::fromJson(older).str(), StartsWith("128x128x64 tiles, 384 threads"));
  LaunchPlan clustered = p;
  clustered.cluster = 2;
  CHECK(LaunchPlan::fromJson(clustered.toJson()).cluster == 2);
  CHECK_THAT(clustered.str(), Contains("4 stages, clusters of 2 (A multicast), 384 threads"));
  p.persistent = true;
  CHECK(LaunchPlan::fromJson(p.toJson()).persistent);
  CHECK_THAT(LaunchPlan::fromJson(p.toJson()).str(), Contains("persistent over ceildiv(M, 128)"));
}

TEST_CASE("a malformed launch plan is refused with InvalidArgument, never trusted", "[sm90][errors]") {
  auto broken = [](auto&& change) {
    nlohmann::json j = gemmPlan().toJson();
    change(j);
    return j;
  };
  for (const nlohmann::json& j : {broken([](auto& j) { j.erase("entry"); }),
                                  broken([](auto& j) { j["params"][0]["kind"] = "texture"; }),
                                  broken([](auto& j) { j["params"][0]["box"] = {64, 512}; }),
                                  broken([](auto& j) { j["params"][2]["arg"] = -1; }),
                                  broken([](auto& j) { j["threads"] = 4096; }),
                                  broken([](auto& j) { j["grid"] = nlohmann::json::array(); }),
                                  broken([](auto& j) { j["tile"] = {128, 128}; }),
                                  broken([](auto& j) { j["shared_bytes"] = "lots"; }),
                                  broken([](auto& j) { j["ctas_per_sm"] = 0; }),
                                  broken([](auto& j) { j["cluster"] = 0; }),
                                  broken([](auto& j) { j["products"] = 3; }),
                                  // Numbers that are not integers in range: never cast (undefined behaviour).
                                  broken([](auto& j) { j["threads"] = 1e111; }),
                                  broken([](auto& j) { j["stages"] = 2.5; }),
                                  broken([](auto& j) { j["grid"][0]["arg"] = int64_t(1) << 40; }),
                                  broken([](auto& j) { j["tile"][0] = uint64_t(1) << 63; })}) {
    INFO(j.dump());
    try {
      LaunchPlan::fromJson(j);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      CHECK_THAT(std::string(e.what()), Contains("malformed launch plan"));
    }
  }
}

TEST_CASE("the twin runs on aligned row-major operands, ragged M, N and K included", "[sm90]") {
  std::string why;
  for (auto [M, N, K] : {std::tuple{4096, 4096, 4096}, {4097, 4096, 4096}, {1000, 1000, 1000}, {1, 8, 8}, {77, 136, 72}}) {
    INFO(M << "x" << N << "x" << K << ": " << why);
    CHECK(applies(gemmPlan(), args(M, N, K), &why));
  }
}

TEST_CASE("the portable kernel runs where TMA's rules do not hold, and the reason is named", "[sm90]") {
  LaunchPlan p = gemmPlan();
  std::string why;
  auto refused = [&](std::vector<TensorView> a, const char* reason) {
    INFO(reason);
    CHECK_FALSE(applies(p, a, &why));
    CHECK_THAT(why, Contains(reason));
  };
  auto a = args(64, 64, 33); // K = 33: A's row pitch is 66 bytes
  refused(a, "argument 0's row pitch is not a multiple of 16 bytes");
  a = args(64, 64, 64);
  a[0] = view(2, {64, 64});
  refused(a, "argument 0's address is not 16-byte aligned");
  a = args(64, 64, 64);
  a[1] = view(256, {64, 64}, {1, 64}); // B transposed in memory
  refused(a, "argument 1's rows are not contiguous");
  refused(args(64, 64, 0), "argument 0 is empty");
  a = args(64, 64, 64);
  a[3] = view(770, {64, 64}); // C at an odd element: bf16 pairs are not 4-byte aligned
  refused(a, "C's element pairs are not 4-byte aligned");
  a = args(64, 64, 64);
  a[3] = view(768, {64, 63}, {65, 1});
  refused(a, "C's element pairs are not 4-byte aligned");
  refused(args(int64_t(1) << 30, int64_t(1) << 30, 64), "C has more than 2^31 tiles");
  a = args(64, 64, 64);
  a[0] = view(0, {64, 64}, {8, 1}); // rows 8 elements apart, 64 long: they overlap
  refused(a, "argument 0's rows overlap");
}

TEST_CASE("C stored by TMA must be a tensor TMA can write; the bias passed by pointer is not held to C's rules", "[sm90]") {
  // The twin of a 16-bit C: C is a tensor map of 64 x 64 boxes, the bias the first pointer.
  LaunchPlan p = gemmPlan();
  p.params[2] = {LaunchParam::TensorMap, 3, 0, {64, 64}};
  p.params.erase(p.params.begin() + 3); // C's stride: the tensor map holds it
  std::string why;
  CHECK(applies(p, args(77, 136, 72), &why));
  auto a = args(64, 64, 64);
  a[3] = view(768, {64, 63}, {65, 1}); // rows of 130 bytes
  CHECK_FALSE(applies(p, a, &why));
  CHECK_THAT(why, Contains("argument 3's row pitch is not a multiple of 16 bytes"));
  a = args(64, 64, 64);
  a[3] = view(770, {64, 64});
  CHECK_FALSE(applies(p, a, &why));
  CHECK_THAT(why, Contains("argument 3's address is not 16-byte aligned"));
  a = args(64, 64, 64);
  a[3] = view(768, {64, 63}, {64, 1}); // pitch fine, rows of 126 bytes: TMA would write the 127th and 128th
  CHECK_FALSE(applies(p, a, &why));
  CHECK_THAT(why, Contains("C's rows are not a multiple of 16 bytes long"));
}

TEST_CASE("a plan cached before plans named their output still finds C: its first pointer", "[sm90]") {
  nlohmann::json j = gemmPlan().toJson();
  j.erase("output");
  CHECK(LaunchPlan::fromJson(j).output == 3);
  j["params"] = nlohmann::json::array({j["params"][0], j["params"][1]}); // no pointer at all
  CHECK_THROWS_WITH(LaunchPlan::fromJson(j), Contains("malformed launch plan: no output argument"));
}

TEST_CASE("each launch takes the twin width that leaves the busiest SM least work", "[sm90]") {
  LaunchPlan narrow = gemmPlan(), wide = gemmPlan();
  narrow.persistent = wide.persistent = true;
  wide.tileN = 256;
  wide.gridDims[1].tile = 256;
  std::vector<LaunchPlan> twins = {narrow, wide};
  std::string why;
  auto pick = [&](int64_t M, int64_t N, int64_t K) { return choose(twins, args(M, N, K), {132}, &why); };
  // Enough tiles for several rounds on 132 SMs: the wide tile (fewer, faster rounds).
  CHECK(pick(4096, 4096, 4096) == 1);
  CHECK(pick(4097, 4096, 4096) == 1);
  CHECK(pick(8192, 8192, 64) == 1);
  CHECK(pick(2048, 2048, 64) == 1); // 256 narrow tiles take 2 rounds, 128 wide ones 1
  // Fewer tiles than SMs: the narrow tile (more SMs busy).
  CHECK(pick(1000, 1000, 1000) == 0);
  CHECK(pick(128, 12288, 4096) == 0);
  CHECK(pick(16, 4096, 4096) == 0);
  // One twin, or none that applies.
  CHECK(choose({narrow}, args(4096, 4096, 4096), {132}, &why) == 0);
  CHECK(choose(twins, args(64, 64, 33), {132}, &why) == -1);
  CHECK_THAT(why, Contains("argument 0's row pitch is not a multiple of 16 bytes"));
  // One CTA per tile (smCount 0): rounds are tiles; the wide tile still halves them.
  CHECK(choose(twins, args(4096, 4096, 64), {0}, &why) == 1);
}

TEST_CASE("a launch takes the 128 x 192 tile only where it takes fewer rounds of CTAs than the others", "[sm90]") {
  const std::vector<LaunchPlan> twins = ownTwins(true);
  std::string why;
  Split work;
  auto pick = [&](int64_t M, int64_t N, int64_t K) { return choose(twins, args(M, N, K), {132}, &why, &work); };
  // One round of 96 tiles where 128 x 256 takes one of 72 (1.47 against 1.88) and 128 x 128
  // two (H100, 2026-12-05: 17.3 against 20.7 us).
  CHECK(pick(1536, 1536, 1536) == 5);
  CHECK(work.ctas == 96);
  // Three rounds (384 tiles) where the others take five or three of 1.88 (H100: 31.2 against
  // 35.5 us; 6144 x 1536^2 42.1 against 50.8); two where they take three (2304^3: 40.1 against 44.4).
  CHECK(pick(3072, 3072, 1024) == 5);
  CHECK(pick(6144, 1536, 1536) == 5);
  CHECK(pick(2304, 2304, 2304) == 5);
  // Where it saves no round it loses: 1536 x 4608 x 2048 in two rounds of 128 x 256 (3.76)
  // against three of it (4.41) (H100: 46.7 against 52.6 us); 2048 x 1024 x 4096 in one of
  // stacked 128 x 128 pairs (34.9 us with it against 28.5).
  CHECK(pick(1536, 4608, 2048) == 2);
  CHECK(pick(2048, 1024, 4096) == 1);
  // The shapes chosen before it came in keep their twins: 128 x 256 for big C (4096^3: 6
  // rounds of it against 3.88 of 128 x 256; 8192^3: 21 against 16, 30.9 against 30.1),
  // 64 x 128 pairs at 1000^3 and 1024^3, 128 x 128 at 128 x 12288 x 4096.
  CHECK(pick(4096, 4096, 4096) == 2);
  CHECK(pick(4097, 4096, 4096) == 2);
  CHECK(pick(8192, 8192, 8192) == 2);
  CHECK(pick(1000, 1000, 1000) == 4);
  CHECK(pick(1024, 1024, 1024) == 4);
  CHECK(pick(128, 12288, 4096) == 0);
}

TEST_CASE("a launch takes the tall 256 x 128 tile only where it takes fewer rounds, in pairs where B's rows are off sectors", "[sm90]") {
  // kiln's order: 128 x 128 alone and in pairs, 128 x 256, 64 x 128 alone and in pairs,
  // 128 x 192, then the tall tile (two consumer warpgroups of 128 rows: 384 threads) alone
  // (6) and in stacked pairs sharing B (7: a unit of 512 x 128, 66 of them at once on 132 SMs).
  std::vector<LaunchPlan> twins = ownTwins(true);
  LaunchPlan tallTile = twins[2];
  tallTile.tileM = 256, tallTile.tileN = 128;
  tallTile.gridDims[0].tile = 256, tallTile.gridDims[1].tile = 128;
  twins.push_back(tallTile);
  tallTile.cluster = 2, tallTile.clusterAlongM = true;
  twins.push_back(tallTile);
  std::string why;
  Split work;
  auto pick = [&](int64_t M, int64_t N, int64_t K) { return choose(twins, args(M, N, K), {132}, &why, &work); };
  // C's columns just past a multiple of 256: 17 columns of 128 x 256 tiles take 5 rounds
  // (544 tiles), 33 of tall ones 4 (528) (H100, 2026-12-06: 4096 x 4160 x 4096 in 174 us
  // against 209, 4096 x 4112 182 against 224). Alone where B's rows are whole 32-byte sectors
  // (8320 and 8224 bytes long), in pairs where they are not (8208: H200, 179.9 us in pairs
  // against 188.8 alone).
  CHECK(pick(4096, 4160, 4096) == 6);
  CHECK(work.ctas == 132);
  CHECK(pick(4096, 4112, 4096) == 6);
  CHECK(pick(4096, 4104, 4096) == 7);
  CHECK(work.ctas == 132);
  CHECK(pick(2048, 4104, 4096) == 7);
  // B's pitch, not its width, decides: 4160 columns of B in rows 4168 long (8336 bytes).
  std::vector<TensorView> strided = args(4096, 4160, 4096);
  strided[1].strides = {4168, 1};
  CHECK(choose(twins, strided, {132}, &why) == 7);
  // And where B's first row starts 16 bytes into a sector (a view into a larger allocation),
  // every row is off: the pairs, and a cached choice tells the two addresses apart.
  std::vector<TensorView> shifted = args(4096, 4160, 4096);
  shifted[1].data = gMemory + 256 + 16;
  CHECK(choose(twins, shifted, {132}, &why) == 7);
  shifted[1].data = gMemory + 256 + 32; // 32 bytes in: whole sectors again
  CHECK(choose(twins, shifted, {132}, &why) == 6);
  ChoiceCache cache;
  for (int64_t offset : {0, 16, 0, 48, 64}) {
    CAPTURE(offset);
    shifted[1].data = gMemory + 256 + offset;
    CHECK(cache.choose(twins, shifted, {132}, &why, &work) == (offset % 32 ? 7 : 6));
  }
  // Equal rounds: the 128 x 256 tile keeps the place (4096^3, 8192^3: as fast as it).
  CHECK(pick(4096, 4096, 4096) == 2);
  CHECK(pick(8192, 8192, 8192) == 2);
  // Rows just past a multiple of 256 favour the wide tile (4097 x 4096^2: 17 rows of tall tiles
  // take 5 rounds, 215 against 175 us), and 2049 rows the 128 x 192 one (129 against 102).
  CHECK(pick(4097, 4096, 4096) == 2);
  CHECK(pick(2049, 4096, 4096) == 5);
  // An odd number of tall rows: the last pair's second CTA has no rows, and the pairs take the
  // rounds of one row more. 3840 x 2056 (15 rows, 17 columns, B's rows off sectors): 255 tiles
  // alone take two rounds, 8 x 17 pairs three (as 30 x 9 tiles of 128 x 256): alone it is.
  CHECK(pick(3840, 2056, 4096) == 6);
  // Small C keeps its twins: one row of tiles (a pair would hold an SM with no rows), 1000^3,
  // decode-sized M.
  CHECK(pick(128, 12288, 4096) == 0);
  CHECK(pick(1000, 1000, 1000) == 4);
  CHECK(pick(256, 4160, 4096) < 6);
  CHECK(pick(256, 4104, 4096) != 7);
}

TEST_CASE("two products sharing A weigh their tiles by the wgmma's width, and say so in the plan", "[sm90]") {
  // The two-product twins of swiglu: C tiles 128 x 64 (wgmma N 128), 128 x 128 (N 256) and
  // 64 x 64 (N 128). Measured (H200): 2048 x 14336 x 4096 634 us with the 128 x 128 tile
  // against 667 with 128 x 64; 16 rows: the 64-row tile, 64.8 us against 76.7.
  LaunchPlan narrow = gemmPlan(), wide = gemmPlan(), low = gemmPlan();
  for (LaunchPlan* p : {&narrow, &wide, &low}) p->persistent = true, p->products = 2;
  narrow.tileN = 64, narrow.gridDims[1].tile = 64;
  wide.tileN = 128;
  low.tileM = 64, low.tileN = 64, low.threads = 256, low.gridDims = {{0, 0, 64, "M"}, {1, 1, 64, ""}};
  std::vector<LaunchPlan> twins = {narrow, wide, low};
  std::string why;
  auto pick = [&](int64_t M, int64_t N, int64_t K) { return choose(twins, args(M, N, K), {132}, &why); };
  CHECK(pick(2048, 14336, 4096) == 1);
  CHECK(pick(8192, 14336, 4096) == 1);
  CHECK(pick(16, 14336, 4096) == 2);
  CHECK(pick(64, 14336, 4096) == 2);
  // One product a tile (the same tiles): 128 x 64 and 128 x 128 tie at 2048 rows as before.
  for (LaunchPlan& p : twins) p.products = 1;
  CHECK(pick(2048, 14336, 4096) == 0);
  CHECK(LaunchPlan::fromJson(wide.toJson()).products == 2);
  CHECK_THAT(wide.str(), Contains("2 products sharing A, one wgmma"));
  CHECK(LaunchPlan::fromJson(gemmPlan().toJson()).products == 1);
}

TEST_CASE("a launch takes the 64-row tile only where C has at most 64 rows", "[sm90]") {
  LaunchPlan narrow = gemmPlan(), wide = gemmPlan(), low = gemmPlan();
  narrow.persistent = wide.persistent = low.persistent = true;
  wide.tileN = 256;
  wide.gridDims[1].tile = 256;
  low.tileM = 64;
  low.threads = 256;
  low.gridDims[0].tile = 64;
  std::vector<LaunchPlan> twins = {narrow, wide, low};
  std::string why;
  auto pick = [&](int64_t M, int64_t N, int64_t K) { return choose(twins, args(M, N, K), {132}, &why); };
  // Decode shapes: the 128-row tile would multiply 112 (or 64) empty rows.
  CHECK(pick(16, 4096, 4096) == 2);
  CHECK(pick(1, 8, 8) == 2);
  CHECK(pick(64, 16384, 4096) == 2);
  // More rows: B's tiles would be read once per 64 rows; the 128-row tiles as before.
  CHECK(pick(65, 4096, 4096) == 0);
  CHECK(pick(1000, 1000, 1000) == 0);
  CHECK(pick(128, 12288, 4096) == 0);
  CHECK(pick(4096, 4096, 4096) == 1);
  // The 64-row twin alone runs every shape.
  CHECK(choose({low}, args(4096, 4096, 4096), {132}, &why) == 0);
}

TEST_CASE("a launch takes the 64-row tile in stacked pairs wherever its rounds cost least", "[sm90]") {
  LaunchPlan narrow = gemmPlan(), wide = gemmPlan(), low = gemmPlan(), stacked = gemmPlan();
  narrow.persistent = wide.persistent = low.persistent = stacked.persistent = true;
  low.tileM = 64;
  low.threads = 256;
  low.gridDims[0].tile = 64;
  wide.tileN = 256;
  wide.gridDims[1].tile = 256;
  stacked.tileM = 64;
  stacked.threads = 256;
  stacked.gridDims[0].tile = 64;
  stacked.cluster = 2;
  stacked.clusterAlongM = true;
  std::vector<LaunchPlan> twins = {narrow, wide, low, stacked}; // as the compiler orders them
  std::string why;
  Split work;
  auto pick = [&](int64_t M, int64_t N, int64_t K) { return choose(twins, args(M, N, K), {132}, &why, &work); };
  // Up to 66 pairs: one round on 132 SMs, each tile half a 128 x 128 one.
  CHECK(pick(1000, 1000, 1000) == 3);
  CHECK(work.ctas == 128); // 64 pairs
  // C with at most 64 rows: the tile alone (a pair's lower CTA would have no rows), also
  // where its 96 tiles would take two rounds of pairs.
  CHECK(pick(16, 4096, 4096) == 2);
  CHECK(work.ctas == 32);
  CHECK(pick(16, 12288, 4096) == 2);
  // More: two rounds of pairs cost more than one of 128 x 128 tiles.
  CHECK(pick(128, 12288, 4096) == 0);
  CHECK(pick(4096, 4096, 4096) == 1);
}

TEST_CASE("a launch takes 128 x 128 tiles in stacked pairs where they cost no more than alone", "[sm90]") {
  const std::vector<LaunchPlan> twins = ownTwins(false);
  const LaunchPlan& pairs = twins[1];
  std::string why;
  Split work;
  auto pick = [&](int64_t M, int64_t N, int64_t K) { return choose(twins, args(M, N, K), {132}, &why, &work); };
  // 128 tiles: one round alone or in 64 pairs; the pairs read B half as often.
  CHECK(pick(2000, 1000, 1000) == 1);
  CHECK(work.ctas == 128);
  // Three rows of tiles: the last pair is half empty, still one round (64-row pairs: two).
  CHECK(pick(384, 4096, 1024) == 1);
  CHECK(work.ctas == 128);
  // One row of tiles: a pair's second CTA would have no rows; the tile alone.
  CHECK(pick(128, 12288, 4096) == 0);
  // Pairs costing more rounds than tiles alone lose: 2 x 96 tiles are 2 rounds either way,
  // and the wide tile does them in one.
  CHECK(pick(256, 12288, 4096) == 2);
  // Elsewhere as before: the wide tile for big C, 64-row pairs for 1000^3, the 64-row
  // tile alone for C with at most 64 rows.
  CHECK(pick(4096, 4096, 4096) == 2);
  CHECK(pick(1000, 1000, 1000) == 4);
  CHECK(pick(16, 4096, 4096) == 3);
  // Asked for alone (no lone twin beside it), the pairs run any C, one row of tiles included.
  CHECK(choose({pairs}, args(16, 4096, 4096), {132}, &why, &work) == 0);
  CHECK(work.ctas == 64); // 32 units: each column's tile and an empty one below it
}

namespace {
// ownTwins(true) with the fours in the compiler's place: 128 x 128 alone, in stacked pairs, in
// fours; 128 x 256; 64 x 128 alone and in pairs; 128 x 192.
std::vector<LaunchPlan> ownTwinsWithFours() {
  std::vector<LaunchPlan> twins = ownTwins(true);
  LaunchPlan quads = twins[0];
  quads.cluster = 4;
  quads.stages = 5;
  twins.insert(twins.begin() + 2, quads);
  return twins;
}
} // namespace

TEST_CASE("a launch takes 128 x 128 tiles in fours sharing A where alone they would take one round", "[sm90]") {
  std::vector<LaunchPlan> twins = ownTwinsWithFours();
  std::string why;
  Split work;
  auto pick = [&](int64_t M, int64_t N, int64_t K) { return choose(twins, args(M, N, K), {132}, &why, &work); };
  // One row of tiles in one round: 96 tiles alone or 24 fours; the fours read A a quarter as often.
  CHECK(pick(128, 12288, 4096) == 2);
  CHECK(work.ctas == 96);
  CHECK(work.cluster == 0);
  CHECK(pick(128, 14336, 4096) == 2);
  CHECK(work.ctas == 112);
  // Ragged: 97 columns of tiles make 25 fours, the last with three CTAs past C's last column.
  CHECK(pick(100, 12352, 4096) == 2);
  CHECK(work.ctas == 100);
  // Where the driver says fewer fours fit at once than 132 SMs hold (a cluster lives in one
  // GPC), they count: 28 fours in two rounds of 24 cost more than 112 tiles in one.
  twins[2].clusterSlots = {0, 0, 0, 0, 24};
  CHECK(pick(128, 14336, 4096) == 0);
  CHECK(pick(128, 12288, 4096) == 2);
  CHECK(work.ctas == 96);
  // ... and bound a persistent grid of fours: 64 of them on 24 slots (on 30 without the bound
  // it would be 33, one more than fit).
  CHECK(choose({twins[2]}, args(2048, 2048, 2048), {132}, &why, &work) == 0);
  CHECK(work.ctas == 96);
  twins[2].clusterSlots = {0, 0, 0, 0, 30};
  CHECK(choose({twins[2]}, args(2048, 2048, 2048), {132}, &why, &work) == 0);
  CHECK(work.ctas == 120);
  twins[2].clusterSlots.clear();
  CHECK(choose({twins[2]}, args(2048, 2048, 2048), {132}, &why, &work) == 0);
  CHECK(work.ctas == 132);
  // In more than one round they do not take the place of lone tiles (not measured there),
  // nor of stacked pairs that tie: elsewhere as before.
  CHECK(pick(2000, 1000, 1000) == 1);
  CHECK(pick(384, 4096, 1024) == 1);
  CHECK(pick(256, 12288, 4096) == 6); // 128 x 192: 128 tiles in one round
  CHECK(pick(4096, 4096, 4096) == 3);
  CHECK(pick(1000, 1000, 1000) == 5);
  CHECK(pick(16, 4096, 4096) == 4);
}

TEST_CASE("a launch takes 64 x 192 tiles in stacked pairs for C of one row of 128-row tiles in one round", "[sm90]") {
  // The compiler's order: as in ownTwinsWithFours(), then 64 x 192 in stacked pairs.
  std::vector<LaunchPlan> twins = ownTwinsWithFours();
  LaunchPlan narrowPairs = twins[5]; // the 64 x 128 pairs, 192 columns wide
  narrowPairs.tileN = 192;
  narrowPairs.gridDims[1].tile = 192;
  twins.push_back(narrowPairs);
  const int narrow = int(twins.size()) - 1;
  std::string why;
  Split work;
  auto pick = [&](int64_t M, int64_t N, int64_t K) { return choose(twins, args(M, N, K), {132}, &why, &work); };
  // 64 pairs (128 CTAs) where the fours put 96 CTAs to work, both in one round.
  CHECK(pick(128, 12288, 4096) == narrow);
  CHECK(work.ctas == 128);
  CHECK(work.cluster == 0);
  CHECK(pick(100, 12288, 4096) == narrow); // C's rows need not fill the tiles
  // Ragged: 65 columns of 64 x 192 tiles, 130 CTAs against 25 fours' 100.
  CHECK(pick(100, 12352, 4096) == narrow);
  CHECK(work.ctas == 130);
  // Not in two rounds: 75 pairs on 66 slots; the fours keep 128 x 14336 (112 CTAs, one round).
  CHECK(pick(128, 14336, 4096) == 2);
  // Not where a one-round best puts more CTAs to work: 64 x 128 pairs at 128 x 6144 (96 CTAs
  // against 64).
  CHECK(pick(128, 6144, 4096) == 5);
  CHECK(work.ctas == 96);
  // Not for C past one row of 128-row tiles, nor of at most 64 rows (a pair's second tile empty).
  CHECK(pick(256, 12288, 4096) == 6);
  CHECK(pick(64, 12288, 4096) != narrow);
  // Where the driver says fewer pairs fit at once (a cluster lives in one GPC), they count:
  // 64 pairs on 60 slots take two rounds.
  twins[size_t(narrow)].clusterSlots = {0, 0, 60};
  CHECK(pick(128, 12288, 4096) == 2);
  twins[size_t(narrow)].clusterSlots = {0, 0, 64};
  CHECK(pick(128, 12288, 4096) == narrow);
  // The tiles of 128 rows keep C past a 65-row one when the pairs would take two rounds.
  twins[size_t(narrow)].clusterSlots.clear();
  CHECK(pick(65, 25344, 4096) != narrow);
  CHECK(pick(128, 12288, 4096) == narrow);
}

namespace {
// The same plan as a split-K twin makes it: a workspace, the split tiles and their chunks,
// K as its reduction.
LaunchPlan splitKPlan(int64_t tileN = 128) {
  LaunchPlan p = gemmPlan();
  p.persistent = true;
  p.tileN = tileN;
  p.gridDims[1].tile = tileN;
  p.params.push_back({LaunchParam::Workspace, 0, 0, {}});
  p.params.push_back({LaunchParam::SplitTiles, 0, 0, {}});
  p.params.push_back({LaunchParam::KSplits, 0, 0, {}});
  p.reduction = {0, 1, 64, "K"};
  return p;
}
} // namespace

TEST_CASE("a launch cuts tiles along K only where the last round of CTAs would be part-empty", "[sm90]") {
  const LaunchPlan p = splitKPlan();
  auto at = [&](int64_t M, int64_t N, int64_t K, SplitK mode = SplitK::Auto) { return split(p, args(M, N, K), {132, mode}); };
  // 96 tiles of 64 k-steps on 132 SMs: 4 chunks each, 384 chunks in 3 rounds of 132 CTAs
  // (0.75 of a tile) plus the fix-up (4 x 1.5 / 64); 2 or 3 chunks would still take a tile.
  Split s = at(128, 12288, 4096);
  CHECK(s.splitTiles == 96);
  CHECK(s.splits == 4);
  CHECK(s.ctas == 132);
  CHECK(s.cost == Approx(0.75 + 4 * 1.5 / 64));
  // 1000^3: 64 tiles of 16 k-steps in halves: 128 CTAs, half a tile each.
  s = at(1000, 1000, 1000);
  CHECK(s.splitTiles == 64);
  CHECK(s.splits == 2);
  CHECK(s.cost == Approx(0.5 + 2 * 1.5 / 16));
  // Chunks are at least 4 k-steps: tiles of 2 k-steps are never cut, even when asked.
  CHECK(at(1000, 1000, 128, SplitK::On).splitTiles == 0);
  // 1024 tiles: 7.76 rounds; cut in halves (more chunks would pass 4 per CTA), no better
  // than 8 whole rounds: whole tiles. Forced, 6 whole rounds and the remaining 232 tiles cut.
  CHECK(at(4096, 4096, 4096).splitTiles == 0);
  s = at(4096, 4096, 4096, SplitK::On);
  CHECK(s.splitTiles == 1024 - 6 * 132);
  CHECK(s.splits == 2);
  // 512 wide tiles: 3.88 rounds, no cut does better than 4.
  CHECK(split(splitKPlan(256), args(4096, 4096, 4096), {132}).splitTiles == 0);
  // 544 tiles: 3 whole rounds first, the remaining 148 tiles in chunks.
  s = at(2176, 4096, 512, SplitK::On);
  CHECK(s.splitTiles == 544 - 3 * 132);
  CHECK(s.splits >= 2);
  // At most 4 chunks per CTA: 200 tiles of 1024 k-steps would take 15 chunks each.
  s = at(25 * 128, 8 * 128, 65536, SplitK::On);
  CHECK(s.splitTiles == 200);
  CHECK(s.splitTiles * s.splits <= 4 * 132);
  // Tiles that fill every round exactly: whole tiles.
  s = at(128 * 132, 128, 4096);
  CHECK(s.splitTiles == 0);
  CHECK(s.ctas == 132);
  CHECK(s.cost == 1.0);
  // Off for A/B runs; one CTA per tile (no SM count) never cuts.
  CHECK(at(128, 12288, 4096, SplitK::Off).splitTiles == 0);
  CHECK(split(p, args(128, 12288, 4096), {0}).splitTiles == 0);
  CHECK(split(p, args(128, 12288, 4096), {0}).ctas == 96);
  // A plan without split-K parameters never cuts.
  CHECK(split(gemmPlan(), args(128, 12288, 4096), {132}).splitTiles == 0);
}

/// The decode twin of `rows` rows: K-clusters, no split-K parameters.
LaunchPlan decodePlan(int64_t rows = 16) {
  LaunchPlan p = gemmPlan();
  p.persistent = true;
  p.tileM = rows, p.tileN = 64;
  p.swapAB = true;
  p.gridDims = {{0, 0, rows, "M"}, {1, 1, 64, ""}};
  p.reduction = {0, 1, 64, "K"};
  p.kCluster = 4;
  return p;
}

TEST_CASE("a launch takes the smallest decode twin that holds C's rows, split along K in clusters", "[sm90]") {
  LaunchPlan narrow = splitKPlan(), low = splitKPlan(), dec = decodePlan(), dec32 = decodePlan(32);
  low.tileM = 64;
  low.gridDims[0].tile = 64;
  std::vector<LaunchPlan> twins = {narrow, low, dec, dec32};
  std::string why;
  Split work;
  auto pick = [&](int64_t M, int64_t N, int64_t K, SplitK mode = SplitK::Off) {
    return choose(twins, args(M, N, K), {132, mode}, &why, &work);
  };
  // 16 x 4096 x 4096: 64 tiles of 64 columns, under half of 132 SMs: in pairs, each CTA
  // half of a tile's k-steps, 128 CTAs on the weight.
  CHECK(pick(16, 4096, 4096) == 2);
  CHECK(work.cluster == 2);
  CHECK(work.splits == 2);
  CHECK(work.splitTiles == 0); // no workspace
  CHECK(work.ctas == 128);
  // 4 x 2048 x 4096: 32 tiles, in fours (pairs would fill 64 SMs, under half).
  CHECK(pick(4, 2048, 4096) == 2);
  CHECK(work.cluster == 4);
  CHECK(work.ctas == 128);
  CHECK(pick(1, 8, 8) == 2);
  CHECK(work.cluster == 0); // one k-step: nothing to cut
  CHECK(work.ctas == 1);
  // 8 x 4096 x 14336: 64 tiles of 224 k-steps, in pairs.
  CHECK(pick(8, 4096, 14336) == 2);
  CHECK(work.cluster == 2);
  // Half the SMs or more have a tile: whole tiles, the persistent loop over them.
  CHECK(pick(1, 8192, 8192) == 2);
  CHECK(work.cluster == 0);
  CHECK(work.ctas == 128);
  CHECK(pick(16, 28672, 4096) == 2);
  CHECK(work.cluster == 0);
  CHECK(work.ctas == 132);
  // 17 to 32 rows: the 32-row decode twin; more: the other twins, as without them.
  CHECK(pick(17, 4096, 4096) == 3);
  CHECK(work.cluster == 2);
  CHECK(pick(32, 8192, 8192) == 3);
  // More rows than the largest decode twin holds: in two rows of its tiles if they fill one
  // round (64 columns of tiles x 2 on 132 SMs), else the other twins, as without decode twins.
  CHECK(pick(33, 4096, 4096) == 3);
  CHECK(work.cluster == 0);
  CHECK(work.ctas == 128);
  CHECK(pick(33, 8192, 4096) == 1);
  CHECK(pick(65, 4096, 4096) == 0);
  CHECK(pick(128, 12288, 4096) == 0);
  // Split-K asked off stays off for the others and leaves the decode twin to its rule.
  CHECK(split(low, args(16, 4096, 4096), {132, SplitK::Off}).splitTiles == 0);
  CHECK(split(dec, args(16, 4096, 4096), {132, SplitK::Off}).cluster == 2);
  // Clusters that do not fit at once are not made: where the driver says only 20 clusters
  // of 4 fit, 32 tiles go in pairs (64 CTAs) rather than two rounds of fours.
  dec.clusterSlots = {0, 0, 66, 0, 20};
  CHECK(split(dec, args(4, 2048, 4096), {132}).cluster == 2);
  dec.clusterSlots = {0, 0, 30, 0, 20};
  CHECK(split(dec, args(4, 2048, 4096), {132}).cluster == 0);
}

TEST_CASE("a kernel's remembered twin choices are the ones choose() makes, for every shape, stride and alignment it meets",
          "[sm90]") {
  LaunchPlan narrow = splitKPlan(), wide = splitKPlan(256), low = splitKPlan(), dec = decodePlan(), dec32 = decodePlan(32);
  low.tileM = 64;
  low.gridDims[0].tile = 64;
  const std::vector<LaunchPlan> twins = {narrow, wide, low, dec, dec32};
  const LaunchConfig config{132, SplitK::Auto};
  // Shapes a decode loop and a prefill meet, more of them than the cache keeps, and views
  // that differ from one another only in a stride or in the address's alignment.
  std::vector<std::vector<TensorView>> launches;
  for (auto [M, N, K] : std::vector<std::array<int64_t, 3>>{{16, 4096, 4096}, {4096, 4096, 4096}, {1000, 1000, 1000},
                                                            {128, 12288, 4096}, {17, 4096, 4096}, {33, 4096, 4096},
                                                            {4, 2048, 4096}, {2048, 8192, 2048}, {65, 4096, 4096},
                                                            {64, 64, 33}, {1, 8, 8}})
    launches.push_back(args(M, N, K));
  std::vector<TensorView> padded = args(1000, 1000, 1000);
  padded[0].strides = {1008, 1}; // A's rows padded: still TMA's rules
  launches.push_back(padded);
  padded[0].strides = {1001, 1}; // a pitch TMA cannot read: the portable kernel
  launches.push_back(padded);
  std::vector<TensorView> shifted = args(4096, 4096, 4096);
  shifted[1].data = gMemory + 256 + 8; // B 8 bytes off 16: the portable kernel
  launches.push_back(shifted);
  shifted[1].data = gMemory + 256 + 16; // 16 bytes off: the twin again
  launches.push_back(shifted);
  std::vector<TensorView> f32A = args(4096, 4096, 4096); // the 4096^3 launch's views, A in f32: no tensor map
  f32A[0].dtype = DType::f32;
  launches.push_back(f32A);
  std::vector<TensorView> wideViews = args(256, 256, 256); // more key words than are kept
  for (TensorView& v : wideViews) v.strides = v.dims.size() == 2 ? std::vector<int64_t>{v.dims[1], 1} : std::vector<int64_t>{1};
  wideViews.insert(wideViews.end(), 8, view(1024, {1, 1, 1, 1}, {1, 1, 1, 1})); // 126 words
  launches.push_back(wideViews);

  ChoiceCache cache;
  for (int pass = 0; pass < 3; ++pass) // first asked, then remembered (or replaced and asked again)
    for (size_t i = 0; i < launches.size(); ++i) {
      const std::vector<TensorView>& a = launches[pass == 1 ? launches.size() - 1 - i : i];
      std::string whyFresh, whyCached;
      Split fresh, cached;
      const int expect = choose(twins, a, config, &whyFresh, &fresh);
      INFO("pass " << pass << ", launch " << i);
      CHECK(cache.choose(twins, a, config, &whyCached, &cached) == expect);
      CHECK(whyCached == whyFresh);
      CHECK(cached.ctas == fresh.ctas);
      CHECK(cached.cluster == fresh.cluster);
      CHECK(cached.splits == fresh.splits);
      CHECK(cached.splitTiles == fresh.splitTiles);
      CHECK(cached.cost == fresh.cost);
    }
  // The alignment, stride and dtype cases above do reach both answers.
  std::string why;
  CHECK(choose(twins, launches[launches.size() - 5], config, &why) == -1);
  CHECK(choose(twins, launches[launches.size() - 4], config, &why) == -1);
  CHECK(choose(twins, launches[launches.size() - 3], config, &why) >= 0);
  CHECK(choose(twins, launches[launches.size() - 2], config, &why) == -1);
}

TEST_CASE("a tensor map's cache key changes with each input of its encoding: address, type, rank, extents, pitches "
          "and box alone", "[sm90]") {
  const int x = 0;
  const void* base = &x;
  const uint64_t dims[5] = {4096, 1024, 8, 2, 3}, pitches[4] = {8192, 8192 * 1024, 1 << 26, 1 << 27};
  const uint32_t box[5] = {64, 128, 1, 1, 1};
  const TensorMapCache::Key key = TensorMapCache::keyOf(base, 10, 5, dims, pitches, box);
  CHECK(TensorMapCache::keyOf(base, 10, 5, dims, pitches, box) == key);
  CHECK(TensorMapCache::keyOf(static_cast<const char*>(base) + 16, 10, 5, dims, pitches, box) != key);
  CHECK(TensorMapCache::keyOf(base, 9, 5, dims, pitches, box) != key);
  CHECK(TensorMapCache::keyOf(base, 10, 4, dims, pitches, box) != key);
  for (size_t d = 0; d < 5; ++d) {
    CAPTURE(d);
    uint64_t dims2[5], pitches2[4];
    uint32_t box2[5];
    std::copy(dims, dims + 5, dims2), std::copy(pitches, pitches + 4, pitches2), std::copy(box, box + 5, box2);
    dims2[d] += 1;
    CHECK(TensorMapCache::keyOf(base, 10, 5, dims2, pitches, box) != key);
    // The box alone (a folded-heads launch reads more rows of the same tensor at once).
    box2[d] *= 2;
    CHECK(TensorMapCache::keyOf(base, 10, 5, dims, pitches, box2) != key);
    if (d < 4) {
      pitches2[d] += 16;
      CHECK(TensorMapCache::keyOf(base, 10, 5, dims, pitches2, box) != key);
    }
  }
  // A rank-2 map's key ignores what lies past its rank (the launch fills only that much).
  uint64_t dims3[5] = {4096, 1024, 77, 77, 77}, pitches3[4] = {8192, 99, 99, 99};
  uint32_t box3[5] = {64, 128, 7, 7, 7};
  CHECK(TensorMapCache::keyOf(base, 10, 2, dims3, pitches3, box3) == TensorMapCache::keyOf(base, 10, 2, dims, pitches, box));
}

TEST_CASE("a kept tensor map is found only under its own key, and the least recently used goes first when the cache "
          "is full", "[sm90]") {
  TensorMapCache cache;
  auto keyOf = [](uint64_t address) {
    TensorMapCache::Key k{};
    k[0] = address, k[1] = 10, k[2] = 2, k[3] = 4096, k[4] = 64;
    return k;
  };
  auto mapOf = [](unsigned char fill) {
    CUtensorMap m;
    std::memset(&m, fill, sizeof m);
    return m;
  };
  CUtensorMap out = mapOf(0);
  CHECK_FALSE(cache.find(keyOf(0x1000), &out));
  const CUtensorMap a = mapOf(0xA1);
  cache.keep(keyOf(0x1000), &a);
  REQUIRE(cache.find(keyOf(0x1000), &out));
  CHECK(std::memcmp(&out, &a, sizeof a) == 0);
  TensorMapCache::Key other = keyOf(0x1000);
  other[5] = 128; // one more word differs (a pitch)
  CHECK_FALSE(cache.find(other, &out));
  CHECK_FALSE(cache.find(keyOf(0x1010), &out)); // another address
  // Sixteen more maps push the first out; the last sixteen stay.
  for (unsigned char i = 1; i <= 16; ++i) {
    const CUtensorMap m = mapOf(i);
    cache.keep(keyOf(0x1000 + 0x100 * i), &m);
  }
  CHECK_FALSE(cache.find(keyOf(0x1000), &out));
  for (unsigned char i = 1; i <= 16; ++i) {
    REQUIRE(cache.find(keyOf(0x1000 + 0x100 * i), &out));
    const CUtensorMap m = mapOf(i);
    CHECK(std::memcmp(&out, &m, sizeof m) == 0);
  }
  // Used again, a map outlives those used less recently: the next one pushes out map 2.
  REQUIRE(cache.find(keyOf(0x1000 + 0x100 * 1), &out));
  for (unsigned char i = 3; i <= 16; ++i) REQUIRE(cache.find(keyOf(0x1000 + 0x100 * i), &out));
  const CUtensorMap newest = mapOf(17);
  cache.keep(keyOf(0x9000), &newest);
  CHECK(cache.find(keyOf(0x1000 + 0x100 * 1), &out));
  CHECK_FALSE(cache.find(keyOf(0x1000 + 0x100 * 2), &out));
  CHECK(cache.find(keyOf(0x9000), &out));
}

TEST_CASE("C of up to twice a decode twin's rows takes it in two rows of tiles, only where they fill one round", "[sm90]") {
  const LaunchPlan tall = splitKPlan(), dec16 = decodePlan(16), dec64 = decodePlan(64);
  const std::vector<LaunchPlan> twins = {tall, dec16, dec64};
  std::string why;
  Split work;
  auto pick = [&](int64_t M, int64_t N, int64_t K, int sms = 132) {
    return choose(twins, args(M, N, K), {sms}, &why, &work);
  };
  // One tile of rows, in the smallest twin that holds them, before two of a smaller one.
  CHECK(pick(16, 4096, 4096) == 1);
  CHECK(pick(17, 4096, 4096) == 2);
  CHECK(pick(64, 4096, 4096) == 2);
  // 65 to 128 rows: the 64-row twin's 2 x 64 tiles on 132 SMs, each B tile read by the two
  // CTAs of its column side by side; no cut along K (the tiles fill more than half).
  for (int64_t rows : {65, 96, 128}) {
    CHECK(pick(rows, 4096, 4096) == 2);
    CHECK(work.ctas == 128);
    CHECK(work.cluster == 0);
  }
  // Fewer columns of tiles: K-clusters as for C of one row of tiles.
  CHECK(pick(100, 2048, 4096) == 2);
  CHECK(work.cluster == 2);
  CHECK(work.ctas == 128);
  // Two rounds of CTAs, three rows of tiles, or no SM count to go by: the 128-row tiles.
  CHECK(pick(96, 8192, 8192) == 0);
  CHECK(pick(129, 1024, 4096) == 0);
  CHECK(pick(96, 4096, 4096, 0) == 0);
  CHECK(pick(96, 4096, 4096, 100) == 0);
}

/// A swapped twin of 128 columns by `rows` rows: two consumers, no K-clusters, whole tiles.
LaunchPlan widePlan(int64_t rows) {
  LaunchPlan p = gemmPlan();
  p.persistent = true;
  p.tileM = rows, p.tileN = 128;
  p.swapAB = true;
  p.gridDims = {{0, 0, rows, "M"}, {1, 1, 128, ""}};
  return p;
}

TEST_CASE("C of 129 to 512 rows that 128-row tiles would pad takes the swapped twin of fewest rows filling one round",
          "[sm90]") {
  const std::vector<LaunchPlan> twins = {gemmPlan(), decodePlan(64), widePlan(80), widePlan(96), widePlan(112),
                                         widePlan(128)};
  CHECK(!twins[2].decode());
  CHECK(twins[1].decode());
  std::string why;
  Split work;
  auto pick = [&](int64_t M, int64_t N, int64_t K, int sms = 132) {
    return choose(twins, args(M, N, K), {sms}, &why, &work);
  };
  // 160 rows: two tiles of 80 (not of 128: 96 rows of multiplies by nothing) x 64 columns of
  // tiles, 128 CTAs, whole tiles.
  CHECK(pick(160, 8192, 8192) == 2);
  CHECK(work.ctas == 128);
  CHECK(work.splitTiles == 0);
  CHECK(work.cluster == 0);
  CHECK(pick(200, 4096, 4096) == 2); // three of 80 x 32: 96 CTAs
  CHECK(work.ctas == 96);
  CHECK(pick(129, 4096, 4096) == 2);
  // Tiles of 80 would take two rounds (3 x 64 = 192 CTAs): two of 112 x 64 do not.
  CHECK(pick(200, 8192, 4096) == 4);
  CHECK(work.ctas == 128);
  CHECK(pick(300, 4096, 4096) == 2); // four of 80 x 32
  // None fills one round: the 128-row tiles, as without swapped twins.
  CHECK(pick(300, 8192, 4096) == 0);
  CHECK(pick(480, 8192, 8192) == 0);
  // 128-row tiles that pad under an eighth of their rows, or none: those.
  CHECK(pick(256, 4096, 4096) == 0);
  CHECK(pick(384, 4096, 4096) == 0);
  CHECK(pick(250, 4096, 4096) == 0);
  // Past 512 rows, at most 128 (the decode twins' and the 64-row tiles' rules), or with no SM
  // count to go by: never.
  CHECK(pick(520, 1024, 1024) == 0);
  CHECK(pick(100, 4096, 4096) == 1);
  CHECK(pick(120, 16384, 4096) == 0);
  CHECK(pick(160, 8192, 8192, 0) == 0);
}

TEST_CASE("a decode plan's K-clusters survive JSON, and a malformed one is refused", "[sm90][errors]") {
  LaunchPlan p = decodePlan();
  LaunchPlan q = LaunchPlan::fromJson(nlohmann::json::parse(p.toJson().dump()));
  CHECK(q.toJson() == p.toJson());
  CHECK(q.kClusters());
  CHECK_FALSE(q.splitK());
  CHECK_THAT(q.str(), Contains("split along K in clusters of up to 4"));
  auto refused = [](nlohmann::json j) {
    try {
      LaunchPlan::fromJson(j);
    } catch (const Error& e) {
      return std::string(e.what()).find("k_cluster") != std::string::npos;
    }
    return false;
  };
  nlohmann::json j = p.toJson();
  j["k_cluster"] = 9;
  CHECK(refused(j));
  j = p.toJson();
  j["swap_ab"] = false; // only the decode twin sums in clusters
  CHECK(refused(j));
  j = p.toJson();
  j["reduction"]["arg"] = -1;
  CHECK(refused(j));
  // A plan from before K-clusters (no k_cluster): whole tiles.
  j = p.toJson();
  j.erase("k_cluster");
  j.erase("reduction");
  CHECK_FALSE(LaunchPlan::fromJson(j).kClusters());
}

TEST_CASE("hopper_split_k fixes the chunks along K, within the limits, or turns split-K off", "[sm90]") {
  LaunchPlan dec = decodePlan();
  auto at = [&](const LaunchPlan& p, int64_t M, int64_t N, int64_t K, int64_t splits) {
    return split(p, args(M, N, K), {132, SplitK::Off, splits});
  };
  // 1: never, the decode twin included.
  CHECK(at(dec, 16, 4096, 4096, 1).cluster == 0);
  // The decode twin: clusters of 4 (33 at once: two rounds of its 64 tiles), as asked...
  Split s = at(dec, 16, 4096, 4096, 4);
  CHECK(s.cluster == 4);
  CHECK(s.ctas == 132);
  // ... of 2 where 3 is asked (powers of two), of 4 at most ...
  CHECK(at(dec, 16, 4096, 4096, 3).cluster == 2);
  CHECK(at(dec, 16, 4096, 4096, 16).cluster == 4);
  // ... and chunks of at least 4 k-steps: 2 of 12 k-steps' 8 asked.
  CHECK(at(dec, 16, 4096, 768, 8).cluster == 2);
  // The workspace's split-K on the other twins.
  LaunchPlan wide = splitKPlan();
  CHECK(at(wide, 128, 12288, 4096, 1).splitTiles == 0);
  s = at(wide, 128, 12288, 4096, 4);
  CHECK(s.splitTiles == 96);
  CHECK(s.splits == 4);
  // 16 asked: the workspace holds 4 chunks per CTA (528 on 132 SMs): 5 chunks per tile.
  CHECK(at(wide, 128, 12288, 4096, 16).splits == 5);
  // The other twins too, where their last round is part-empty (the runtime's default
  // leaves them whole).
  s = at(splitKPlan(), 128, 12288, 4096, 2);
  CHECK(s.splitTiles == 96);
  CHECK(s.splits == 2);
  CHECK(at(splitKPlan(), 128 * 132, 128, 4096, 2).splitTiles == 0); // full rounds: nothing to cut
}

TEST_CASE("the twin width is chosen with split-K counted", "[sm90]") {
  std::vector<LaunchPlan> twins = {splitKPlan(128), splitKPlan(256)};
  std::string why;
  auto pick = [&](int64_t M, int64_t N, int64_t K) { return choose(twins, args(M, N, K), {132}, &why); };
  CHECK(pick(128, 12288, 4096) == 0); // 96 narrow tiles in 4 chunks (0.84) beat 48 wide ones in 5 (0.97 x 1.88)
  CHECK(pick(4096, 4096, 4096) == 1); // 512 wide tiles: 3.88 rounds, whole
  CHECK(split(twins[1], args(4096, 4096, 4096), {132}).splitTiles == 0);
}

TEST_CASE("a split-K plan survives JSON, and one missing its parameters is refused", "[sm90][errors]") {
  LaunchPlan p = splitKPlan();
  LaunchPlan q = LaunchPlan::fromJson(nlohmann::json::parse(p.toJson().dump()));
  CHECK(q.toJson() == p.toJson());
  CHECK(q.splitK());
  CHECK_THAT(q.str(), Contains("tiles (split-K capable)"));
  nlohmann::json j = p.toJson();
  j["params"].erase(j["params"].size() - 1); // no k_splits
  CHECK_THROWS_WITH(LaunchPlan::fromJson(j), Contains("one workspace, one split_tiles and one k_splits parameter"));
  j = p.toJson();
  j.erase("reduction"); // parameters without a reduction
  CHECK_THROWS_WITH(LaunchPlan::fromJson(j), Contains("one workspace, one split_tiles and one k_splits parameter"));
  CHECK_FALSE(LaunchPlan::fromJson(gemmPlan().toJson()).splitK());
  p.reduction.dim = 4; // A has no dim 4
  std::string why;
  CHECK_FALSE(applies(p, args(64, 64, 64), &why));
  CHECK_THAT(why, Contains("reduction names a missing argument or dim"));
}

TEST_CASE("a launch plan naming arguments or dims the launch lacks is refused, not read out of bounds", "[sm90][errors]") {
  std::string why;
  LaunchPlan p = gemmPlan();
  p.params[3].dim = 5; // C's stride along a dim C does not have
  CHECK_FALSE(applies(p, args(64, 64, 64), &why));
  CHECK_THAT(why, Contains("missing dim"));
  p = gemmPlan();
  p.gridDims[0].arg = 9;
  CHECK_FALSE(applies(p, args(64, 64, 64), &why));
  CHECK_THAT(why, Contains("grid names a missing argument"));
  p = gemmPlan();
  p.output = 7;
  CHECK_FALSE(applies(p, args(64, 64, 64), &why));
  CHECK_THAT(why, Contains("the launch plan has no output"));
  p = gemmPlan();
  p.params[0].arg = 2; // a tensor map of the 1-D bias
  CHECK_FALSE(applies(p, args(64, 64, 64), &why));
  CHECK_THAT(why, Contains("not a 2-D 16-bit tensor"));
}

TEST_CASE("the options select the twins by one rule, for the pass and the option checks alike", "[sm90]") {
  auto names = [](const std::vector<TwinShape>& twins) {
    std::string s;
    for (const TwinShape& t : twins)
      s += t.suffix + ":" + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "/" + std::to_string(t.cluster) +
           (t.clusterAlongM ? "m" : "") + " ";
    return s;
  };
  // kiln's choice: the 128 x 256 and 128 x 192 tiles alone, the 128 x 128, 64-row and tall
  // 256 x 128 ones alone and in stacked pairs, the 128 x 128 one also in fours (on its own ring
  // of 5), the 64 x 192 one only in stacked pairs, the decode twins of 16, 32, 48 and 64 rows
  // (up to the rows asked for); the deepest ring all of them fit is the 128 x 256 tile's (the
  // tall tile's is the same).
  CHECK(names(selectTwins(0, 0, 0, false, 64)) == "__sm90:128x128/1 __sm90x2:128x128/2m __sm90x4:128x128/4 __sm90_n256:128x256/1 "
                                                    "__sm90_m64:64x128/1 __sm90_m64x2:64x128/2m __sm90_n192:128x192/1 "
                                                    "__sm90_m64n192x2:64x192/2m __sm90_m256:256x128/1 __sm90_m256x2:256x128/2m "
                                                    "__sm90_dec:16x64/1 __sm90_dec32:32x64/1 __sm90_dec48:48x64/1 "
                                                    "__sm90_dec64:64x64/1 ");
  CHECK(names(selectTwins(0, 0, 0, false, 32)).ends_with("__sm90_dec:16x64/1 __sm90_dec32:32x64/1 "));
  CHECK(maxStagesOf(selectTwins(0, 0, 0, false, 64)) == maxStages(128, 256));
  CHECK(selectTwins(0, 0, 0, false)[2].stages == 5);
  CHECK(selectTwins(0, 0, 0, false)[0].stages == 0);
  // The 64-row one's shared memory: 8 stages of 16 KiB and three peers' 16 KiB slots fit.
  CHECK(sharedBytes(64, 64, kDecodeStages, true) <= kMaxSharedBytes);
  CHECK(names(selectTwins(0, 0, 0, false, 16)).ends_with("__sm90_m256x2:256x128/2m __sm90_dec:16x64/1 "));
  CHECK(names(selectTwins(0, 0, 0, false, 0)).find("_dec") == std::string::npos);
  // The swapped twins of 128 columns, after the decode twins, by 80, 96, ... up to the rows
  // asked for; only with kiln's own tiles, and not in clusters. Their ring of 32 KiB stages
  // (at 128 rows) needs no staging: the deepest ring every twin fits stays the 128 x 256 tile's.
  CHECK(names(selectTwins(0, 0, 0, false, 16, 128))
            .ends_with("__sm90_dec:16x64/1 __sm90_sw80:80x128/1 __sm90_sw96:96x128/1 __sm90_sw112:112x128/1 "
                       "__sm90_sw128:128x128/1 "));
  CHECK(names(selectTwins(0, 0, 0, false, 0, 96)).ends_with("__sm90_m256x2:256x128/2m __sm90_sw80:80x128/1 __sm90_sw96:96x128/1 "));
  CHECK(names(selectTwins(0, 128, 0, false, 16, 128)).find("_sw") == std::string::npos);
  CHECK(names(selectTwins(0, 0, 2, false, 16, 128)).find("_sw") == std::string::npos);
  CHECK(stagingBytes(128, 128, true) == 0);
  CHECK(consumers(80, 128, true) == 2);
  CHECK(maxStagesOf(selectTwins(0, 0, 0, false, 64, 128)) == maxStages(128, 256));
  // The decode twin only with kiln's own tiles, and not in clusters.
  CHECK(names(selectTwins(0, 0, 1, false, 16)) ==
        "__sm90:128x128/1 __sm90_n256:128x256/1 __sm90_m64:64x128/1 __sm90_n192:128x192/1 __sm90_m256:256x128/1 "
        "__sm90_dec:16x64/1 ");
  CHECK(names(selectTwins(0, 128, 0, false, 16)).find("_dec") == std::string::npos);
  CHECK(names(selectTwins(0, 0, 2, false, 16)).find("_dec") == std::string::npos);
  // Its shared memory: a ring of 10 KiB stages (a 64-column box of B and 16 rows of A) and,
  // for C staging, three peers' partial sums (K-clusters of up to 4), 4 KiB each.
  CHECK(stagingBytes(16, 64, true) == 3 * 4096);
  CHECK(maxStages(16, 64, true) >= 16);
  // The tall 256 x 128 tile, among kiln's tiles or when tile-m asks for it (not with a width
  // asked for): alone and in stacked pairs where the clusters are kiln's, never side by side;
  // two consumer warpgroups of two 64-row parts each, on the 128 x 256 tile's stages.
  CHECK(names(selectTwins(256, 0, 0, false)) == "__sm90:256x128/1 __sm90_m256x2:256x128/2m ");
  CHECK(names(selectTwins(256, 128, 1, false)) == "__sm90:256x128/1 ");
  CHECK(names(selectTwins(256, 0, 2, true)) == "__sm90:256x128/2m ");
  CHECK(names(selectTwins(256, 0, 2, false)).empty());
  CHECK(names(selectTwins(0, 128, 0, false)).find("256x128") == std::string::npos);
  CHECK(names(selectTwins(0, 0, 2, false)).find("256x128") == std::string::npos);
  CHECK(names(selectTwins(0, 0, 4, false)).find("256x128") == std::string::npos);
  CHECK(names(selectTwins(0, 0, 2, true)).find("__sm90_m256:256x128/2m") != std::string::npos);
  CHECK(consumers(256, 128) == 2);
  CHECK(rowParts(256) == 2);
  CHECK(rowParts(128) == 1);
  CHECK(threads(256, 128) == 384);
  CHECK(maxStages(256, 128) == maxStages(128, 256));
  // Clusters off: five tiles; side by side: every tile but the tall one in pairs sharing A.
  CHECK(names(selectTwins(0, 0, 1, false)) ==
        "__sm90:128x128/1 __sm90_n256:128x256/1 __sm90_m64:64x128/1 __sm90_n192:128x192/1 __sm90_m256:256x128/1 ");
  // 128 rows: the three widths; 64 rows: 128 wide only (64 x 192 only when asked for).
  CHECK(names(selectTwins(128, 0, 1, false)) == "__sm90:128x128/1 __sm90_n256:128x256/1 __sm90_n192:128x192/1 ");
  CHECK(names(selectTwins(64, 0, 1, false)) == "__sm90:64x128/1 ");
  CHECK(names(selectTwins(0, 128, 2, false)) == "__sm90:128x128/2 __sm90_m64:64x128/2 ");
  CHECK(names(selectTwins(0, 128, 4, false)) == "__sm90:128x128/4 __sm90_m64:64x128/4 ");
  // One tile (with its stacked pairs) is named as a lone twin.
  CHECK(names(selectTwins(64, 0, 0, false)) == "__sm90:64x128/1 __sm90_m64x2:64x128/2m ");
  CHECK(names(selectTwins(128, 256, 1, false)) == "__sm90:128x256/1 ");
  CHECK(maxStagesOf(selectTwins(64, 0, 1, false)) == maxStages(64, 128));
  // Asked for 192: both heights.
  CHECK(names(selectTwins(0, 192, 1, false)) == "__sm90_n192:128x192/1 __sm90_m64n192:64x192/1 ");
  CHECK(names(selectTwins(64, 192, 2, true)) == "__sm90:64x192/2m ");
  // The ping-pong 64 x 256 tile only when both height and width ask for it.
  CHECK(names(selectTwins(64, 256, 0, false)) == "__sm90:64x256/1 __sm90_m64n256x2:64x256/2m ");
  CHECK(names(selectTwins(64, 256, 1, false)) == "__sm90:64x256/1 ");
  CHECK(names(selectTwins(0, 256, 1, false)) == "__sm90:128x256/1 ");
  CHECK(maxStagesOf(selectTwins(64, 256, 1, false)) == 4);
}

TEST_CASE("the runtime's and the pass's twin options are checked by one rule, each in its own names", "[cuda]") {
  const TwinOptionNames runtime{"hopper_tile_m", "hopper_tile_n", "hopper_stages", "hopper_cluster", "hopper_cluster_m",
                                "hopper_raster"};
  const TwinOptionNames pass{"tile-m", "tile-n", "stages", "cluster", "cluster-m", "raster-group"};
  CHECK(checkTwinOptions({}, runtime).empty());
  CHECK(checkTwinOptions({.tileM = 64, .tileN = 256, .stages = 4}, pass).empty());
  CHECK(checkTwinOptions({.tileN = 96}, runtime) == "hopper_tile_n must be 0, 128, 192 or 256, got 96");
  CHECK(checkTwinOptions({.tileN = 96}, pass) == "tile-n must be 0, 128, 192 or 256, got 96");
  CHECK(checkTwinOptions({.tileM = 32}, pass) == "tile-m must be 0, 64, 128 or 256, got 32");
  // The tall tile is 256 x 128 and runs alone or in stacked pairs.
  CHECK(checkTwinOptions({.tileM = 256}, runtime).empty());
  CHECK(checkTwinOptions({.tileM = 256, .tileN = 128, .cluster = 1}, runtime).empty());
  CHECK(checkTwinOptions({.tileM = 256, .cluster = 2, .clusterM = true}, runtime).empty());
  CHECK(checkTwinOptions({.tileM = 256, .tileN = 256}, runtime) ==
        "hopper_tile_n must be 0 or 128 at hopper_tile_m 256 (the tall tile is 256 x 128), got 256");
  CHECK(checkTwinOptions({.tileM = 256, .cluster = 2}, pass) ==
        "cluster must be 0, 1, or 2 with cluster-m at tile-m 256 (the tall tile runs alone or in stacked pairs), got 2");
  CHECK(checkTwinOptions({.tileM = 256, .cluster = 4}, runtime) ==
        "hopper_cluster must be 0, 1, or 2 with hopper_cluster_m at hopper_tile_m 256 (the tall tile runs alone or in "
        "stacked pairs), got 4");
  CHECK(checkTwinOptions({.cluster = 3}, runtime) == "hopper_cluster must be 0, 1, 2 or 4, got 3");
  CHECK(checkTwinOptions({.cluster = 4}, runtime).empty());
  CHECK(checkTwinOptions({.tileM = 64, .tileN = 256, .cluster = 4}, runtime) ==
        "hopper_cluster 4 does not take the ping-pong 64 x 256 tile (hopper_tile_m 64, hopper_tile_n 256): 0, 1 or 2, got 4");
  CHECK(checkTwinOptions({.cluster = 4, .clusterM = true}, pass) ==
        "cluster-m pairs tiles in clusters: it needs cluster 2, got 4");
  CHECK(checkTwinOptions({.cluster = 1, .clusterM = true}, pass) ==
        "cluster-m pairs tiles in clusters: it needs cluster 2, got 1");
  CHECK(checkTwinOptions({.raster = 65}, runtime) == "hopper_raster must be 0..64, got 65");
  // The ring depth is checked against every twin the options select: 4 beside a 128 x 256 tile.
  CHECK(checkTwinOptions({.stages = 5}, runtime) ==
        "hopper_stages must be 0 or 2..4 at hopper_tile_n 0 (the ring must fit in 227 KiB of shared memory), got 5");
  CHECK(checkTwinOptions({.tileM = 64, .tileN = 128, .stages = 8}, pass).empty());
  CHECK(checkTwinOptions({.tileM = 64, .tileN = 128, .stages = 9}, pass) ==
        "stages must be 0 or 2..8 at tile-n 128 and tile-m 64 (the ring must fit in 227 KiB of shared memory), got 9");
}

namespace {
// attention(Q, K, V, O) on sm_90a: 4-D tensor maps of Q, K and V, O by pointer and strides,
// the dims B, H, S and G; one CTA per pair of 64-row query tiles, head and batch.
LaunchPlan attentionPlan() {
  LaunchPlan p;
  p.kind = LaunchPlan::Attention;
  p.entry = "attention__sm90_attn";
  p.threads = 384;
  p.sharedBytes = 230456;
  p.tileM = 128, p.tileN = 128, p.tileK = 128;
  p.stages = 3;
  p.gridDims = {{3, 2, 128, "S"}, {3, 1, 1, "H"}, {3, 0, 1, "B"}};
  p.params = {{LaunchParam::TensorMap, 0, 0, {64, 64, 1, 1}}, {LaunchParam::TensorMap, 1, 0, {64, 128, 1, 1}},
              {LaunchParam::TensorMap, 2, 0, {64, 128, 1, 1}}, {LaunchParam::Pointer, 3, 0, {}},
              {LaunchParam::Stride, 3, 0, {}},                 {LaunchParam::Stride, 3, 1, {}},
              {LaunchParam::Stride, 3, 2, {}},                 {LaunchParam::Dim, 0, 0, {}},
              {LaunchParam::Dim, 0, 1, {}},                    {LaunchParam::Dim, 0, 2, {}},
              {LaunchParam::Dim, 1, 1, {}}};
  p.output = 3;
  return p;
}

std::vector<TensorView> attentionArgs(int64_t B, int64_t H, int64_t G, int64_t S) {
  return {view(0, {B, H, S, 128}), view(256, {B, G, S, 128}), view(512, {B, G, S, 128}), view(768, {B, H, S, 128})};
}
} // namespace

TEST_CASE("an attention plan survives JSON with its kind and 4-D boxes; a bad kind or box is refused", "[sm90]") {
  LaunchPlan p = LaunchPlan::fromJson(attentionPlan().toJson());
  CHECK(p.kind == LaunchPlan::Attention);
  CHECK(p.params[0].box == std::vector<int64_t>{64, 64, 1, 1});
  CHECK(p.params[1].box == std::vector<int64_t>{64, 128, 1, 1});
  CHECK(p.gridDims.size() == 3);
  CHECK_FALSE(p.persistent);
  // Plans from before kinds existed are GEMMs.
  nlohmann::json j = gemmPlan().toJson();
  j.erase("kind");
  CHECK(LaunchPlan::fromJson(j).kind == LaunchPlan::Gemm);
  j = attentionPlan().toJson();
  j["kind"] = "convolution";
  CHECK_THROWS_WITH(LaunchPlan::fromJson(j), Contains("unknown kind 'convolution'"));
  j = attentionPlan().toJson();
  j["params"][0]["box"] = {64, 64, 1, 1, 1, 1};
  CHECK_THROWS_WITH(LaunchPlan::fromJson(j), Contains("2 to 5 extents"));
  j["params"][0]["box"] = {64, 0, 1, 1};
  CHECK_THROWS_WITH(LaunchPlan::fromJson(j), Contains("2 to 5 extents"));
}

TEST_CASE("the attention twin runs on aligned 4-D tensors, ragged S and grouped heads included, one CTA per query pair", "[sm90]") {
  std::string why;
  for (auto [B, H, G, S] : {std::tuple{4, 32, 32, 4096}, {1, 1, 1, 1}, {2, 8, 2, 77}, {3, 4, 1, 1000}}) {
    INFO(B << "x" << H << "x" << G << "x" << S << ": " << why);
    auto a = attentionArgs(B, H, G, S);
    CHECK(applies(attentionPlan(), a, &why));
    // Chosen among twins that include it, whatever the SM count; the grid is every (pair, head, batch).
    Split work;
    CHECK(choose({attentionPlan()}, a, LaunchConfig{132}, &why, &work) == 0);
    CHECK(work.ctas == (S + 127) / 128 * H * B);
  }
}

TEST_CASE("the attention twin runs over sequences packed end to end: 3-D tensors read through token-major strides, "
          "a CTA per query pair, head and sequence (none where there is no sequence)", "[sm90]") {
  // Q, K, V, O [heads, T, 128] as views of token-major memory [T, heads, 128]; Offsets [B + 1].
  LaunchPlan p = attentionPlan();
  p.entry = "attention_packed__sm90_attn";
  p.gridDims = {{4, 1, 128, "T"}, {4, 0, 1, "H"}, {3, 0, 1, "B1", 1}};
  p.params = {{LaunchParam::TensorMap, 0, 0, {64, 64, 1}}, {LaunchParam::TensorMap, 1, 0, {64, 128, 1}},
              {LaunchParam::TensorMap, 2, 0, {64, 128, 1}}, {LaunchParam::Pointer, 4, 0, {}},
              {LaunchParam::Stride, 4, 0, {}},              {LaunchParam::Stride, 4, 1, {}},
              {LaunchParam::Pointer, 3, 0, {}},             {LaunchParam::Stride, 3, 0, {}},
              {LaunchParam::Dim, 0, 0, {}},                 {LaunchParam::Dim, 1, 0, {}},
              {LaunchParam::Dim, 0, 1, {}},                 {LaunchParam::Dim, 3, 0, {}}};
  p.output = 4;
  auto packed = [](int64_t T, int64_t heads, size_t at) { return view(at, {heads, T, 128}, {128, heads * 128, 1}); };
  auto args = [&](int64_t H, int64_t G, int64_t T, int64_t B) {
    return std::vector<TensorView>{packed(T, H, 0), packed(T, G, 256), packed(T, G, 512),
                                   TensorView{gMemory + 1024, DType::i32, {B + 1}, {}}, packed(T, H, 768)};
  };
  std::string why;
  Split work;
  for (auto [H, G, T, B] : {std::tuple{32, 8, 10000, 4}, {4, 2, 420, 5}, {1, 1, 1, 1}}) {
    INFO(H << "x" << G << "x" << T << "x" << B << ": " << why);
    CHECK(applies(p, args(H, G, T, B), &why));
    REQUIRE(choose({p}, args(H, G, T, B), LaunchConfig{132}, &why, &work) == 0);
    CHECK(work.ctas == (T + 127) / 128 * H * B); // B + 1 offsets less 1: the sequences
    CHECK(work.cluster == 0);
  }
  // No sequence (one offset): no CTA, and no launch.
  REQUIRE(choose({p}, args(4, 2, 420, 0), LaunchConfig{132}, &why, &work) == 0);
  CHECK(work.ctas == 0);
  // Sequence units: (query pairs along T + sequences) x heads CTAs, enough for every pair
  // holding rows when the sequences do not overlap; CTAs past them find none and leave.
  LaunchPlan units = p;
  units.sequenceUnits = true;
  for (auto [H, G, T, B] : {std::tuple{32, 8, 16384, 16}, {4, 2, 420, 5}, {4, 2, 420, 0}}) {
    REQUIRE(choose({units}, args(H, G, T, B), LaunchConfig{132}, &why, &work) == 0);
    CHECK(work.ctas == ((T + 127) / 128 + B) * H);
  }
  CHECK(LaunchPlan::fromJson(units.toJson()).sequenceUnits);
  CHECK_FALSE(LaunchPlan::fromJson(p.toJson()).sequenceUnits);
  CHECK_THAT(units.str(), Contains("x heads x sequences, only where a sequence has rows"));
  // O's element pairs must be 4-byte aligned whatever its rank.
  std::vector<TensorView> odd = args(4, 2, 420, 5);
  odd[4].strides = {129, 4 * 129, 1};
  CHECK_FALSE(applies(p, odd, &why));
  CHECK(why == "O's element pairs are not 4-byte aligned");
  // The grid's `less` survives JSON and names the sequences; a negative one is refused.
  LaunchPlan back = LaunchPlan::fromJson(p.toJson());
  CHECK(back.gridDims[2].less == 1);
  CHECK_THAT(back.str(), Contains("x heads x B1 - 1 sequences"));
  CHECK_THAT(attentionPlan().str(), Contains("x heads x batches"));
  nlohmann::json j = p.toJson();
  j["grid"][2]["less"] = -1;
  CHECK_THROWS_WITH(LaunchPlan::fromJson(j), Contains("bad grid dim"));
}

namespace {
// attention_decode: Q and O [B, H, T, 128], K and V [B, G, S, 128]; keys split in clusters of
// up to 8 (K's dim 2, 128 keys a step).
LaunchPlan keyCachePlan() {
  LaunchPlan p = attentionPlan();
  p.entry = "attention_decode__sm90_attn";
  p.gridDims = {{3, 2, 128, "T"}, {3, 1, 1, "H"}, {3, 0, 1, "B"}};
  p.reduction = {1, 2, 128, "S"};
  p.kCluster = 8;
  return p;
}
std::vector<TensorView> keyCacheArgs(int64_t B, int64_t H, int64_t G, int64_t T, int64_t S) {
  return {view(0, {B, H, T, 128}), view(256, {B, G, S, 128}), view(512, {B, G, S, 128}), view(768, {B, H, T, 128})};
}
} // namespace

TEST_CASE("attention cuts its keys in clusters where that leaves the busiest SM fewer key steps, never below four a part",
          "[sm90]") {
  std::string why;
  auto keys = [&](int64_t B, int64_t H, int64_t T, int64_t S, LaunchConfig config = LaunchConfig{132}) {
    Split work;
    REQUIRE(choose({keyCachePlan()}, keyCacheArgs(B, H, H, T, S), config, &why, &work) == 0);
    return std::pair{work.ctas, work.cluster};
  };
  // One query of 32 heads against 32k keys: 32 CTAs alone, 128 in clusters of 4 (8 would
  // make 256, more than run at once; 7, 224 in two rounds of 37 steps).
  CHECK(keys(1, 32, 1, 32768) == std::pair<int64_t, int64_t>{128, 4});
  CHECK(keys(2, 32, 8, 32768) == std::pair<int64_t, int64_t>{128, 2});
  CHECK(keys(1, 8, 1, 32768) == std::pair<int64_t, int64_t>{64, 8}); // at most 8 parts
  // 12 heads: 12 clusters of 8 (96 CTAs) in one round; 8 parts is the most.
  CHECK(keys(1, 12, 1, 32768) == std::pair<int64_t, int64_t>{96, 8});
  // Enough CTAs already: whole programs.
  CHECK(keys(4, 32, 1, 32768) == std::pair<int64_t, int64_t>{128, 0});
  // Prefill, B4 H32 S4096: 4096 CTAs in 32 rounds. Pairs would take 63 rounds of 16 steps
  // (1008 against 1024): too little to pay for the merge and the pairs' lockstep (H200: 18%
  // slower at head dim 128, 37% causal), so whole programs.
  CHECK(keys(4, 32, 4096, 4096) == std::pair<int64_t, int64_t>{4096, 0});
  CHECK(keys(1, 32, 2048, 2048).second == 0);
  // Short caches: a part keeps 4 steps of 128 keys at least.
  CHECK(keys(1, 32, 1, 1024) == std::pair<int64_t, int64_t>{64, 2});
  CHECK(keys(1, 32, 1, 800) == std::pair<int64_t, int64_t>{32, 0}); // 7 steps
  CHECK(keys(1, 32, 1, 1536) == std::pair<int64_t, int64_t>{96, 3}); // 12 steps: 3 parts of 4
  // Where the driver says fewer clusters fit at once (a cluster lives in one GPC), rounds of
  // them count, and any size may win. 40 of 3 fit: 32 in one round of 86 steps, where 30 of
  // 4 take 2 x 64 and 14 of 7 or 8 three rounds (111, 96).
  LaunchPlan fewer = keyCachePlan();
  fewer.clusterSlots = {0, 0, 66, 40, 30, 24, 20, 14, 14};
  Split work;
  REQUIRE(choose({fewer}, keyCacheArgs(1, 32, 32, 1, 32768), LaunchConfig{132}, &why, &work) == 0);
  CHECK(work.cluster == 3);
  CHECK(work.ctas == 96);
  // 20 of 3 and 15 of 5 or 6: the fewest steps are in clusters of 8 (3 x 32 = 96).
  fewer.clusterSlots = {0, 0, 66, 20, 30, 15, 15, 14, 14};
  REQUIRE(choose({fewer}, keyCacheArgs(1, 32, 32, 1, 32768), LaunchConfig{132}, &why, &work) == 0);
  CHECK(work.cluster == 8);
  CHECK(work.ctas == 256);
  // With 8 out of reach and 3 no better than 2 in two rounds: 2 (the smaller at a tie with 4).
  fewer.clusterSlots = {0, 0, 66, 20, 30};
  fewer.kCluster = 4;
  REQUIRE(choose({fewer}, keyCacheArgs(1, 32, 32, 1, 32768), LaunchConfig{132}, &why, &work) == 0);
  CHECK(work.cluster == 2);
  // hopper_split_k = 1: never; 2: at most 2 parts; no SM count: whole.
  CHECK(keys(1, 32, 1, 32768, LaunchConfig{132, SplitK::Auto, 1}).second == 0);
  CHECK(keys(1, 32, 1, 32768, LaunchConfig{132, SplitK::Auto, 2}).second == 2);
  CHECK(keys(1, 32, 1, 32768, LaunchConfig{0}).second == 0);
  // A plan without key splits (a loop not recognised as an online softmax) never splits.
  Split plain;
  REQUIRE(choose({attentionPlan()}, attentionArgs(1, 32, 32, 64), LaunchConfig{132}, &why, &plain) == 0);
  CHECK(plain.cluster == 0);
  // The plan says so, and survives JSON.
  CHECK_THAT(keyCachePlan().str(), Contains("keys split in clusters of up to 8"));
  LaunchPlan back = LaunchPlan::fromJson(keyCachePlan().toJson());
  CHECK(back.kClusters());
  CHECK(back.kCluster == 8);
  CHECK(back.reduction.arg == 1);
  // A plan whose keys are never split says why, in its description and its JSON.
  LaunchPlan never = attentionPlan();
  never.noKeySplits = "a select's mask is not comparisons of index tiles";
  CHECK_THAT(never.str(), Contains("(keys never split: a select's mask is not comparisons of index tiles)"));
  CHECK(LaunchPlan::fromJson(never.toJson()).noKeySplits == never.noKeySplits);
  CHECK_FALSE(attentionPlan().toJson().contains("no_key_splits"));
  // So does one whose softmax does not overlap the product before it.
  CHECK_THAT(attentionPlan().str(), Contains("each step's softmax overlaps the product before it"));
  LaunchPlan apart = attentionPlan();
  apart.noOverlap = "the carried accumulator is read other than by the second product's acc operand";
  CHECK_THAT(apart.str(), Contains("each step's softmax after its products (the carried accumulator is read"));
  CHECK(LaunchPlan::fromJson(apart.toJson()).noOverlap == apart.noOverlap);
  CHECK_FALSE(attentionPlan().toJson().contains("no_overlap"));
  // launch_path's words for the cut the launch chose.
  CHECK(describe(keyCachePlan(), Split{96, 0, 0, 86, 3}) ==
        "96 CTAs, key splits in clusters of 3: each program's keys cut into 3 parts, merged in rank order");
  CHECK(describe(keyCachePlan(), Split{32, 0, 0, 256, 0}) == "32 CTAs");
}

TEST_CASE("grouped-query decode folds the query heads that share a K/V head into one program, as many as fit 64 rows",
          "[sm90]") {
  LaunchPlan folds = keyCachePlan();
  folds.params.push_back({LaunchParam::HeadFold, 1, 1, {}});
  REQUIRE(folds.foldsHeadsOf() == 1);
  // H / G = 4 heads a group: one query each, 4 to a program; 16 queries each, 4 (64 rows);
  // 20 each, 2 (3 would fit 60 rows but does not divide the group); 33 each, none.
  CHECK(headFold(folds, keyCacheArgs(1, 32, 8, 1, 4096)) == 4);
  CHECK(headFold(folds, keyCacheArgs(1, 32, 8, 16, 4096)) == 4);
  CHECK(headFold(folds, keyCacheArgs(1, 32, 8, 20, 4096)) == 2);
  CHECK(headFold(folds, keyCacheArgs(1, 32, 8, 33, 4096)) == 1);
  CHECK(headFold(folds, keyCacheArgs(1, 32, 32, 1, 4096)) == 1);  // a K/V head per query head
  CHECK(headFold(folds, keyCacheArgs(1, 32, 3, 1, 4096)) == 10);  // H / G = 10 (the last group short)
  CHECK(headFold(keyCachePlan(), keyCacheArgs(1, 32, 8, 1, 4096)) == 1); // a plan that cannot fold
  // B1 H32 G8, one query against 32k keys: 8 programs (not 32), each its group's K/V read
  // once, then cut in clusters of 8 (64 CTAs; 8 parts is the most).
  std::string why;
  Split work;
  REQUIRE(choose({folds}, keyCacheArgs(1, 32, 8, 1, 32768), LaunchConfig{132}, &why, &work) == 0);
  CHECK(work.fold == 4);
  CHECK(work.cluster == 8);
  CHECK(work.ctas == 64);
  CHECK(describe(folds, work) == "64 CTAs, 4 query heads to a program (their rows in one tile, one read of their K/V head), "
                                 "key splits in clusters of 8: each program's keys cut into 8 parts, merged in rank order");
  // B16 H32 G8 over 4096 keys: 128 programs fill the SMs unsplit.
  REQUIRE(choose({folds}, keyCacheArgs(16, 32, 8, 1, 4096), LaunchConfig{132}, &why, &work) == 0);
  CHECK(work.fold == 4);
  CHECK(work.ctas == 128);
  CHECK(work.cluster == 0);
  // The parameter survives JSON, and the plan says it folds.
  CHECK(LaunchPlan::fromJson(folds.toJson()).foldsHeadsOf() == 1);
  CHECK_THAT(folds.str(), Contains("query heads sharing a K/V head folded into one program"));
}

TEST_CASE("the attention twin is refused where TMA or O's paired stores cannot work, and the reason is named", "[sm90]") {
  std::string why;
  auto refused = [&](std::vector<TensorView> a, const char* reason) {
    INFO(reason);
    CHECK_FALSE(applies(attentionPlan(), a, &why));
    CHECK_THAT(why, Contains(reason));
    CHECK(choose({attentionPlan()}, a, LaunchConfig{132}, &why, nullptr) == -1);
  };
  auto a = attentionArgs(1, 2, 2, 64);
  a[0] = view(0, {1, 2, 64, 128}, {2 * 64 * 136, 64 * 136, 136, 2}); // Q's rows strided
  refused(a, "argument 0's rows are not contiguous");
  a = attentionArgs(1, 2, 2, 64);
  a[1] = view(256, {1, 2, 64, 128}, {2 * 64 * 129, 64 * 129, 129, 1}); // K's rows 258 bytes apart
  refused(a, "argument 1's row pitch is not a multiple of 16 bytes");
  a = attentionArgs(1, 2, 2, 64);
  a[2] = view(520, {1, 2, 64, 128});
  refused(a, "argument 2's address is not 16-byte aligned");
  a = attentionArgs(1, 2, 2, 64);
  a[2] = view(512, {2, 64, 128}); // V of rank 3
  refused(a, "argument 2 is not a 4-D 16-bit tensor");
  a = attentionArgs(1, 2, 2, 64);
  a[3] = view(770, {1, 2, 64, 128}); // O at an odd element
  refused(a, "O's element pairs are not 4-byte aligned");
  a = attentionArgs(1, 2, 2, 64);
  a[3] = view(768, {1, 2, 64, 128}, {2 * 64 * 129, 64 * 129, 129, 1});
  refused(a, "O's element pairs are not 4-byte aligned");
}
