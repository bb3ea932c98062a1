// The CUDA backend compiles every catalogue kernel to PTX and a cubin with no GPU present:
// what CI checks on every change (register use, no spills), before the H200 runs them.
#include <algorithm>
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <unistd.h>
#include <vector>

#include "../scoped_env.hpp"
#include "../sweep.hpp"
#include "../whole_program.hpp"
#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"
#include "kiln/error.hpp"
#include "kiln/runtime.hpp"

#include "dsl_attention.hpp"
#include "dsl_gemms.hpp"
#include "unary_ops.hpp"

using namespace kiln;
using kiln::testing::ScopedEnv;
using kiln::testing::sweep;
using kiln::testing::wholeProgramLog;
using Catch::Matchers::Contains;

namespace {

Runtime offline(const std::string& arch, int warps = 4) {
  return Runtime::create(Backend::cuda, {.compile_only = true, .arch = arch, .num_warps = warps});
}

/// A catalogue kernel in a dtype: a case of a sweep (test/sweep.hpp).
struct Case {
  const char* name;
  DType dtype;
};

/// Each of `names` in bf16 and f16, name by name.
std::vector<Case> inBf16AndF16(std::initializer_list<const char*> names) {
  std::vector<Case> cases;
  for (const char* name : names)
    for (DType d : {DType::bf16, DType::f16}) cases.push_back({name, d});
  return cases;
}

/// The spill bytes (stores + loads) of `entry` in a whole-program compile (wholeProgramLog);
/// -1 when its report does not say.
int wholeProgramSpills(const std::string& ptx, const std::string& entry) {
  const std::string log = wholeProgramLog(ptx);
  auto at = log.find("Function properties for " + entry + "\n");
  if (at == std::string::npos) return -1;
  int stack = 0, stores = 0, loads = 0;
  if (std::sscanf(log.c_str() + log.find('\n', at) + 1, " %*s %d bytes stack frame, %d bytes spill stores, %d bytes spill loads",
                  &stack, &stores, &loads) != 3 &&
      std::sscanf(log.c_str() + log.find('\n', at) + 1, " %d bytes stack frame, %d bytes spill stores, %d bytes spill loads",
                  &stack, &stores, &loads) != 3)
    return -1;
  return stores + loads;
}

void compilesWithoutSpills(const std::string& name) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    Runtime rt = offline(arch);
    for (DType d : {DType::f32, DType::bf16, DType::f16}) {
      CompiledKernel ck = rt.compile(catalogue::find(name).make(d));
      const KernelReport& r = ck.report();
      INFO(name << " " << to_string(d) << ": " << r.str());
      CHECK(r.target == arch);
      CHECK(r.registers > 0);
      CHECK(r.registers <= 255);
      CHECK(r.spill_bytes == 0);
      CHECK(r.threads == 128);
      // Attention keeps Q and two slots of K and V in shared memory (85 KiB at D = 128): two
      // CTAs still fit an H100/H200 SM. The rest stay under the 48 KiB of a default launch.
      CHECK(r.shared_bytes <= (name.rfind("attention", 0) == 0 ? 100 : 48) * 1024);
      CHECK_THAT(r.compiler, Contains("nvJitLink"));
      CHECK(ck.times().codegen_ms > 0);
      CHECK(ck.times().assemble_ms > 0);
      REQUIRE(ck.binary().size() > 4);
      CHECK(ck.binary().substr(0, 4) == "\x7f" "ELF");
    }
  }
}

} // namespace

TEST_CASE("gemm compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") { compilesWithoutSpills("gemm"); }
TEST_CASE("gemm_bias_relu compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") { compilesWithoutSpills("gemm_bias_relu"); }
TEST_CASE("gemm_bias_gelu compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") { compilesWithoutSpills("gemm_bias_gelu"); }
TEST_CASE("gemm_bias_residual compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") { compilesWithoutSpills("gemm_bias_residual"); }
TEST_CASE("softmax compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") { compilesWithoutSpills("softmax"); }
TEST_CASE("add compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") { compilesWithoutSpills("add"); }
TEST_CASE("rmsnorm compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") { compilesWithoutSpills("rmsnorm"); }
TEST_CASE("swiglu compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") { compilesWithoutSpills("swiglu"); }
TEST_CASE("rope compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") { compilesWithoutSpills("rope"); }
TEST_CASE("attention compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") { compilesWithoutSpills("attention"); }
TEST_CASE("attention_causal compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") {
  compilesWithoutSpills("attention_causal");
}
TEST_CASE("attention_padded compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") {
  compilesWithoutSpills("attention_padded");
}
TEST_CASE("attention_padded_causal compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") {
  compilesWithoutSpills("attention_padded_causal");
}
TEST_CASE("attention_packed compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") {
  compilesWithoutSpills("attention_packed");
}
TEST_CASE("attention_packed_causal compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") {
  compilesWithoutSpills("attention_packed_causal");
}

TEST_CASE("attention for sm_90a gets the TMA + wgmma twin, at 128 keys a step (three programs a CTA at head dim 64); elsewhere 64", "[cuda][compile]") {
  for (const char* name : {"attention", "attention_causal"}) {
    const catalogue::Entry& e = catalogue::find(name);
    Runtime hopper = offline("sm_90a");
    for (DType d : {DType::bf16, DType::f16}) {
      CompiledKernel ck = hopper.compile(catalogue::kernel_for(e, d, {1, 8, 2, 512, 128}, "sm_90a"));
      INFO(name << " " << to_string(d) << ": " << ck.report().str());
      CHECK_THAT(ck.report().sm90, Contains("__sm90_attn: attention: 128 query rows (2 programs) x 128 keys a step, head dim 128"));
      CHECK_THAT(ck.report().sm90, Contains("runs when Q, K and V have contiguous rows"));
      // The portable kernel beside it, the fallback where TMA's rules do not hold, is at the
      // edge of the registers at 128 keys: 255 and a few spilled bytes (48, causal 80).
      CHECK(ck.report().spill_bytes <= 128);
    }
    // Head dim 64: 128 keys a step too, three programs a CTA.
    CompiledKernel d64 = hopper.compile(catalogue::kernel_for(e, DType::bf16, {1, 8, 2, 512, 64}, "sm_90a"));
    CHECK_THAT(d64.report().sm90, Contains("__sm90_attn: attention: 192 query rows (3 programs) x 128 keys a step, head dim 64"));
    CHECK_THAT(d64.report().sm90, Contains("512 threads"));
    // The tiles follow the target: 64 keys a step for any other (the portable kernel's).
    CHECK(catalogue::kernel_for(e, DType::bf16, {1, 8, 2, 512, 128}, "sm_80").signature().args.at(0).dims.back().extent == 128);
    CompiledKernel other = offline("sm_80").compile(catalogue::kernel_for(e, DType::bf16, {1, 8, 2, 512, 128}, "sm_80"));
    CHECK(other.report().shared_bytes <= 100 * 1024);
    CHECK(other.report().sm90.empty());
    // Head dim 32 (64-byte rows: not the twin's 128-byte swizzle) and f32 keep the portable
    // kernel, and the report says why.
    CompiledKernel d32 = hopper.compile(catalogue::kernel_for(e, DType::bf16, {1, 8, 2, 512, 32}, "sm_90a"));
    CHECK_THAT(d32.report().sm90, Contains("not attention: the head dim is not a constant 64 or 128"));
    CompiledKernel f32 = hopper.compile(catalogue::kernel_for(e, DType::f32, {1, 8, 2, 512, 128}, "sm_90a"));
    CHECK_THAT(f32.report().sm90, Contains("not attention: O is not bf16 or f16"));
  }
}

// setmaxnreg only moves registers within the CTA's pool (threads x ptxas's per-thread count
// at that block size): a warpgroup asking for more than the pool holds waits forever, a hang
// no test on a GPU could tell from a slow kernel.
TEST_CASE("every attention twin asks setmaxnreg for no more registers than its CTA holds, and ptxas keeps its "
          "wgmmas pipelined without spills", "[cuda][compile]") {
  Runtime hopper = offline("sm_90a");
  struct Case {
    const char* name;
    std::vector<int64_t> shape;
    int consumers;
  };
  for (const Case& c : {Case{"attention", {1, 8, 2, 512, 128}, 2}, Case{"attention", {1, 8, 2, 512, 64}, 3},
                        Case{"attention_causal", {1, 8, 2, 512, 64}, 3}, Case{"attention_lse", {1, 8, 2, 512, 64}, 3},
                        Case{"attention_decode", {1, 8, 2, 1, 512, 128}, 2},
                        Case{"attention_decode", {1, 8, 2, 1, 512, 64}, 2},
                        Case{"attention_padded", {1, 8, 2, 512, 128}, 2},
                        Case{"attention_padded_causal", {1, 8, 2, 512, 64}, 3},
                        Case{"attention_packed", {4, 8, 2, 512, 128}, 2},
                        Case{"attention_packed_causal", {4, 8, 2, 512, 64}, 3}}) {
    INFO(c.name << " " << c.shape.back());
    const std::string ptx =
        hopper.emit(catalogue::kernel_for(catalogue::find(c.name), DType::bf16, c.shape, "sm_90a"), Stage::ptx);
    const std::string entry = std::string(c.name) + "__sm90_attn";
    const size_t at = ptx.find(".entry " + entry + "(");
    REQUIRE(at != std::string::npos);
    const std::string body = ptx.substr(at, ptx.find(".entry ", at + 1) - at);
    auto number = [&](const std::string& key) {
      const size_t k = body.find(key);
      REQUIRE(k != std::string::npos);
      return std::atoi(body.c_str() + body.find_first_of("0123456789", k + key.size()));
    };
    const int threads = number(".maxntid"), producer = number("setmaxnreg.dec.sync.aligned.u32"),
              consumer = number("setmaxnreg.inc.sync.aligned.u32");
    CHECK(threads == 128 * (1 + c.consumers));
    const int pool = 65536 / threads / 8 * 8 * threads;
    CHECK(128 * producer + (threads - 128) * consumer <= pool);
    CHECK(consumer % 8 == 0);
    const std::string log = wholeProgramLog(ptx);
    CHECK_THAT(log, !Contains("serialized"));
    CHECK(wholeProgramSpills(ptx, entry) == 0);
  }
}

TEST_CASE("the attention twin overlaps each step's softmax with the product before it where the loop allows, and "
          "says why not where it does not", "[cuda][compile]") {
  Runtime hopper = offline("sm_90a");
  const Kernel plain = catalogue::attention(DType::bf16, 128, /*causal=*/true, {64, 128});
  CompiledKernel ck = hopper.compile(plain);
  CHECK_THAT(ck.report().sm90, Contains("each step's softmax overlaps the product before it"));
  // The softmax runs between a wait for the scores alone and the wait for the product.
  const std::string ptx = hopper.emit(plain, Stage::ptx);
  CHECK_THAT(ptx, Contains("wgmma.wait_group.sync.aligned 1;"));
  CHECK(wholeProgramSpills(ptx, "attention_causal__sm90_attn") == 0);
  // P is rounded to bf16 once, in pairs: no conversion to bf16 and back per value (a step's
  // P is 64 values a thread; the epilogue's rounding of O makes the 32 there are).
  const size_t entry = ptx.find(".entry attention_causal__sm90_attn");
  REQUIRE(entry != std::string::npos);
  size_t widened = 0;
  for (size_t at = ptx.find("cvt.f32.bf16", entry); at != std::string::npos; at = ptx.find("cvt.f32.bf16", at + 1))
    ++widened;
  CHECK(widened <= 32);
  // A loop whose running sum reads the accumulator keeps each step's softmax after both of
  // its products.
  const Kernel readsAcc = test::groupedAttention(DType::bf16, 64, true, 2, 64, /*readsAcc=*/true);
  CompiledKernel other = hopper.compile(readsAcc);
  CHECK_THAT(other.report().sm90, Contains("each step's softmax after its products (the carried accumulator is read "
                                           "other than by the second product's acc operand)"));
  const std::string otherPtx = hopper.emit(readsAcc, Stage::ptx);
  CHECK_THAT(otherPtx, Contains(".entry grouped_attention_reads_acc__sm90_attn"));
  CHECK_THAT(otherPtx, !Contains("wgmma.wait_group.sync.aligned 1;"));
  CHECK(wholeProgramSpills(otherPtx, "grouped_attention_reads_acc__sm90_attn") == 0);
}

TEST_CASE("attention over padded or packed sequences compiles for sm_80 and sm_90a without spills, and the sm_90a "
          "twin takes both: K and V windowed to each length, Q and O too when packed",
          "[cuda][compile]") {
  // Padded: each sequence's length read from an i32 input, K and V windowed to it. Packed:
  // sequences end to end, every tensor windowed to its sequence by i32 offsets.
  const std::vector<std::pair<std::string, std::function<Kernel(bool)>>> kernels = {
      {"padded", [](bool causal) { return test::paddedAttention(DType::bf16, 64, causal, 2); }},
      {"packed", [](bool causal) { return test::packedAttention(DType::bf16, 64, causal, 2); }}};
  for (const auto& [name, make] : kernels)
    for (const char* arch : {"sm_80", "sm_90a"})
      for (bool causal : {false, true}) {
        CompiledKernel ck = offline(arch, 8).compile(make(causal));
        INFO(name << " " << arch << (causal ? " causal: " : ": ") << ck.report().str());
        CHECK(ck.binary().substr(0, 4) == "\x7f" "ELF");
        if (std::string(arch) == "sm_80") {
          CHECK(ck.report().spill_bytes == 0);
        } else {
          // The twin reads each length or offset (tile.read) and zeroes K's and V's rows past
          // it in the tile that holds its end (fence.proxy.async: for wgmma to see the zeros).
          const std::string entry = name + "_attention__sm90_attn";
          CHECK_THAT(ck.report().sm90, Contains(entry + ": attention:"));
          const std::string ptx = offline(arch, 8).emit(make(causal), Stage::ptx);
          CHECK_THAT(ptx, Contains("fence.proxy.async.shared::cta"));
          CHECK_THAT(ptx, Contains("ld.global"));
          CHECK(wholeProgramSpills(ptx, entry) == 0);
          if (name == "packed") { // 3-D tensor maps; no key splits, which the grid alone makes needless
            CHECK_THAT(ptx, Contains("cp.async.bulk.tensor.3d"));
            CHECK_THAT(ck.report().sm90, Contains("queries are windowed"));
          }
        }
      }
  // Without the windows the twin takes it too: K and V read the padding as the portable
  // kernel does, and the program's masks keep those keys out.
  for (bool causal : {false, true}) {
    const Kernel bare = test::paddedAttention(DType::bf16, 64, causal, 2, 64, /*windowKV=*/false);
    CHECK_THAT(offline("sm_90a", 8).compile(bare).report().sm90, Contains("padded_attention__sm90_attn: attention:"));
    CHECK_THAT(offline("sm_90a", 8).emit(bare, Stage::ptx), !Contains("fence.proxy.async.shared::cta"));
  }
}

TEST_CASE("attention with its log-sum-exp output gets the sm_90a twin, which stores the row values too", "[cuda][compile]") {
  Runtime hopper = offline("sm_90a");
  for (bool causal : {false, true}) {
    CompiledKernel ck = hopper.compile(catalogue::attention_lse(DType::bf16, 128, causal, {64, 128}));
    INFO(ck.report().str());
    CHECK_THAT(ck.report().sm90, Contains("__sm90_attn: attention: 128 query rows (2 programs) x 128 keys a step"));
    CHECK_THAT(ck.report().sm90, Contains("one f32 value per query row stored to argument 4"));
    CHECK_THAT(ck.report().sm90, Contains("keys split in clusters")); // the merge gives the row values too
    const std::string ptx = hopper.emit(catalogue::attention_lse(DType::bf16, 128, causal, {64, 128}), Stage::ptx);
    CHECK(wholeProgramSpills(ptx, std::string(causal ? "attention_causal_lse" : "attention_lse") + "__sm90_attn") == 0);
  }
  CompiledKernel dec = hopper.compile(catalogue::attention_decode_lse(DType::bf16, 64, {64, 128}));
  INFO(dec.report().str());
  CHECK_THAT(dec.report().sm90, Contains("one f32 value per query row stored to argument 4"));
  CHECK_THAT(dec.report().sm90, Contains("query heads sharing a K/V head folded"));
  CHECK(wholeProgramSpills(hopper.emit(catalogue::attention_decode_lse(DType::bf16, 64, {64, 128}), Stage::ptx),
                           "attention_decode_lse__sm90_attn") == 0);
  // Other second stores keep the portable kernel, and the report says why.
  using namespace kiln::dsl;
  Kernel wrongType = kernel("attention_f16_rows", [](Builder& k) {
    auto [B, H, S] = k.dims("B", "H", "S");
    auto Q = k.input("Q", {B, H, S, 64}, bf16), K = k.input("K", {B, H, S, 64}, bf16), V = k.input("V", {B, H, S, 64}, bf16);
    auto O = k.output("O", {B, H, S, 64}, bf16);
    auto L = k.output("L", {B, H, S}, f16);
    k.grid({cdiv(S, 64), H, B}, [&](Index i, Index h, Index b) {
      Index z = k.constant(0);
      Tile q = k.load(Q.tile({b, h, i, z}, {64, 64}));
      auto r = k.loop(cdiv(S, 64), 1, {k.full({64}, -1e30), k.zeros({64}), k.zeros({64, 64})},
                      [&](Index j, const std::vector<Tile>& run) {
        Tile s = dot(q, transpose(k.load(K.tile({b, h, j, z}, {64, 64}))), k.zeros({64, 64}));
        Tile m = max(run[0], row_max(s));
        Tile p = exp2(s - cols(m));
        Tile a = exp2(run[0] - m);
        return std::vector<Tile>{m, run[1] * a + row_sum(p),
                                 dot(cast(p, bf16), k.load(V.tile({b, h, j, z}, {64, 64})), run[2] * cols(a))};
      });
      k.store(O.tile({b, h, i, z}, {64, 64}), cast(r[2] / cols(r[1]), bf16));
      k.store(L.tile({b, h, i}, {64}), cast(r[0], f16));
    });
  });
  CHECK_THAT(hopper.compile(wrongType).report().sm90,
             Contains("not attention: the second store is not of one f32 value per query row into a 3-D f32 output"));
}

TEST_CASE("attention_decode compiles to cubins for sm_90a and sm_80 without spills", "[cuda][compile]") {
  compilesWithoutSpills("attention_decode");
}

TEST_CASE("attention over a K/V cache gets the sm_90a twin too: its queries are O's rows, its keys K's", "[cuda][compile]") {
  const catalogue::Entry& e = catalogue::find("attention_decode");
  Runtime hopper = offline("sm_90a");
  CompiledKernel ck = hopper.compile(catalogue::kernel_for(e, DType::bf16, {1, 32, 8, 1, 32768, 128}, "sm_90a"));
  INFO(ck.report().str());
  CHECK_THAT(ck.report().sm90, Contains("attention_decode__sm90_attn: attention: 128 query rows (2 programs) x 128 keys a step"));
  // One new query of a 64-byte aligned cache: the twin's rules hold (TMA reads K and V).
  catalogue::Problem p = e.problem({1, 4, 2, 1, 300, 128}, DType::bf16, 3);
  CHECK(ck.launch_path(p.views()).rfind("sm_90a twin", 0) == 0);
}

TEST_CASE("every CUDA stage can be printed without a GPU", "[cuda][compile]") {
  Runtime rt = offline("sm_90a");
  Kernel k = catalogue::gemm_bias_relu(DType::bf16);
  std::string mlir = rt.emit(k, Stage::mlir);
  CHECK_THAT(mlir, Contains("gpu.func @gemm_bias_relu"));
  CHECK_THAT(mlir, Contains("gpu.barrier"));
  // No tile op is left (the twins keep their layouts as attributes: kiln.layouts = {#tile...}).
  CHECK_THAT(mlir, !Contains("tile.kernel") && !Contains("tile.loop") && !Contains("tile.dot") && !Contains("tile.load"));
  CHECK_THAT(mlir, Contains("kiln.layouts = {a = #tile.nvmma_shared"));
  CHECK_THAT(rt.emit(k, Stage::llvm), Contains("ptx_kernel void @gemm_bias_relu"));
  std::string ptx = rt.emit(k, Stage::ptx);
  CHECK_THAT(ptx, Contains(".target sm_90a"));
  CHECK_THAT(ptx, Contains(".entry gemm_bias_relu"));
  CHECK_THAT(ptx, !Contains("__nv_")); // self-contained: no libdevice
  std::string cubin = rt.emit(k, Stage::cubin);
  REQUIRE(cubin.size() > 4);
  CHECK(cubin.substr(0, 4) == "\x7f" "ELF");
}

TEST_CASE("the launch grid is derived from the dims", "[cuda][compile]") {
  CompiledKernel ck = offline("sm_80").compile(catalogue::gemm(DType::f16, {.m = 32, .n = 128, .k = 16}));
  CHECK(ck.report().grid == "(ceildiv(M, 32), ceildiv(N, 128))");
}

TEST_CASE("warps per CTA are a runtime option", "[cuda][compile]") {
  CHECK(offline("sm_90a", 8).compile(catalogue::add(DType::f32)).report().threads == 256);
  CHECK_THROWS_WITH(offline("sm_90a", 0).compile(catalogue::add(DType::f32)), Contains("num_warps must be 1..32"));
}

TEST_CASE("an unsupported CUDA architecture is named", "[cuda][errors]") {
  try {
    offline("sm_70");
    FAIL("sm_70 should be rejected");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(std::string(e.what()), Contains("unsupported CUDA architecture 'sm_70'"));
  }
}

TEST_CASE("a compile-only CUDA runtime refuses to launch or allocate", "[cuda][errors]") {
  Runtime rt = offline("sm_90a");
  CompiledKernel ck = rt.compile(catalogue::add(DType::f32));
  HostTensor x(DType::f32, {4, 4});
  CHECK_THROWS_WITH(ck.launch({x.view(), x.view(), x.view()}), Contains("compile-only"));
  CHECK_THROWS_WITH(rt.upload(x), Contains("compile-only"));
}

TEST_CASE("a kernel with two grids is refused by the CUDA backend", "[cuda][errors]") {
  using namespace kiln::dsl;
  Kernel k = kernel("two_grids", [](Builder& b) {
    auto [M] = b.dims("M");
    auto Y = b.output("Y", {M}, f32);
    for (int g = 0; g < 2; ++g)
      b.grid({cdiv(M, 4)}, [&](Index i) { b.store(Y.tile({i}, {4}), b.zeros({4})); });
  });
  CHECK_THROWS_WITH(offline("sm_90a").compile(k), Contains("launches one grid per kernel"));
}

TEST_CASE("every elementwise math op compiles to self-contained PTX for sm_80 and sm_90a", "[cuda]") {
  // ScalarMath.h emits each op once for every backend; on CUDA it must need no libdevice.
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Runtime rt = offline(arch);
    for (const auto& [name, op] : test::unaryOps()) {
      INFO(arch << " " << name);
      std::string ptx = rt.emit(test::unaryKernel(name, op), Stage::ptx);
      CHECK_THAT(ptx, Contains(".entry unary_" + name));
      CHECK_THAT(ptx, !Contains("__nv_"));
    }
  }
}

TEST_CASE("masks, transposes and a DSL attention compile for sm_80 and sm_90a without spills", "[cuda]") {
  // Attention at 8 warps: at 4, its 64 x 64 scores, accumulator and per-row statistics,
  // all in registers, take 255 registers a thread and spill 32 bytes on sm_90a.
  for (const char* arch : {"sm_80", "sm_90a"})
    for (const auto& [k, warps] : {std::pair{test::causalMask(DType::bf16), 4}, {test::transposeCopy(DType::f16), 4},
                                   {test::attention(DType::bf16, 64, true), 8}, {test::attention(DType::f16, 64, false), 8},
                                   {test::groupedAttention(DType::bf16, 64, true, 4), 8}}) {
      CompiledKernel ck = offline(arch, warps).compile(k);
      INFO(arch << " " << k.name() << ": " << ck.report().str());
      CHECK(ck.report().spill_bytes == 0);
      CHECK(ck.binary().substr(0, 4) == "\x7f" "ELF");
    }
  // A mask with two users (over two dots' results) is made again for each.
  Kernel twice = dsl::kernel("mask_twice", [](dsl::Builder& b) {
    auto [M, N] = b.dims("M", "N");
    auto A = b.input("A", {M, N}, DType::bf16);
    auto C = b.output("C", {M, N}, DType::f32);
    b.grid({cdiv(M, 32), cdiv(N, 32)}, [&](dsl::Index i, dsl::Index j) {
      dsl::Tile a = b.load(A.tile({i, j}, {32, 32}));
      dsl::Tile d = dsl::dot(a, a, b.zeros({32, 32})), e = dsl::dot(a, dsl::transpose(a), b.zeros({32, 32}));
      dsl::Tile keep = b.iota({32, 32}, 1) <= b.iota({32, 32}, 0);
      b.store(C.tile({i, j}, {32, 32}), dsl::where(keep, d, e) + dsl::where(keep, e, d));
    });
  });
  for (const char* arch : {"sm_80", "sm_90a"}) {
    std::string layouts = offline(arch).emit(twice, Stage::layouts);
    CHECK_THAT(layouts, Contains("tile.iota dim 1 : <32x32xf32, #tile.mma"));
    CHECK(offline(arch).compile(twice).report().spill_bytes == 0);
  }
  // The mask over the scores is made in the tensor cores' layout, not moved into it.
  std::string layouts = offline("sm_80").emit(test::attention(DType::bf16, 64, true), Stage::layouts);
  CHECK_THAT(layouts, Contains("tile.iota dim 1 : <64x64xf32, #tile.mma"));
}

// The sm_90a twin of GEMM-shaped kernels: what CI can check without a GPU.

TEST_CASE("a sweep takes every case, or with KILN_TEST_SWEEP=ends its first and last", "[sm90][sweep]") {
  const std::vector<Case> all = inBf16AndF16({"gemm", "gemm_bias_relu", "gemm_bias_gelu"});
  auto names = [](const std::vector<Case>& cases) {
    std::string s;
    for (auto [name, d] : cases) s += std::string(name) + ":" + to_string(d) + " ";
    return s;
  };
  {
    ScopedEnv every("KILN_TEST_SWEEP", "all");
    CHECK(names(sweep(all)) == names(all));
  }
  {
    ScopedEnv ends("KILN_TEST_SWEEP", "ends");
    CHECK(names(sweep(all)) == "gemm:bf16 gemm_bias_gelu:f16 ");
    CHECK(sweep(std::vector<int>{1, 2}) == std::vector<int>{1, 2});
  }
  ScopedEnv typo("KILN_TEST_SWEEP", "end");
  CHECK_THROWS_WITH(sweep(all), Contains("KILN_TEST_SWEEP is 'end'; expected all or ends"));
}

TEST_CASE("on sm_90a every catalogue GEMM in bf16 and f16 gets a TMA + wgmma twin with no spills", "[cuda][sm90]") {
  Runtime rt = offline("sm_90a");
  for (auto [name, d] : sweep(inBf16AndF16({"gemm", "gemm_bias_relu", "gemm_bias_gelu", "gemm_bias_residual"}))) {
    INFO(name << " " << to_string(d));
    Kernel k = catalogue::find(name).make(d);
    std::string ptx = rt.emit(k, Stage::ptx);
    CHECK_THAT(ptx, Contains(".entry " + std::string(name) + "__sm90("));
    CHECK_THAT(ptx, Contains("wgmma.mma_async.sync.aligned.m64n128k16.f32." + std::string(to_string(d))));
    CHECK_THAT(ptx, Contains("cp.async.bulk.tensor.2d.shared::cluster.global"));
    CHECK_THAT(ptx, Contains("mbarrier.try_wait.parity"));
    CHECK_THAT(ptx, Contains("setmaxnreg.dec.sync.aligned.u32") && Contains("setmaxnreg.inc.sync.aligned.u32"));
    // The tensor maps are read in place from the parameter space (__grid_constant__).
    CHECK_THAT(ptx, Contains(".param .align 64 .b8 " + std::string(name) + "__sm90_param_0[128]"));
    CompiledKernel ck = rt.compile(k);
    CHECK_THAT(ck.report().sm90, Contains("128x128x64 tiles, 6 stages, 384 threads"));
    // Compiled as the runtime compiles it on a GPU (a whole program: setmaxnreg holds):
    // every tile.
    CHECK(wholeProgramSpills(ptx, std::string(name) + "__sm90") == 0);
    CHECK(wholeProgramSpills(ptx, std::string(name) + "__sm90x2") == 0);
    CHECK(wholeProgramSpills(ptx, std::string(name) + "__sm90_n256") == 0);
    CHECK(wholeProgramSpills(ptx, std::string(name) + "__sm90_m64") == 0);
    CHECK(wholeProgramSpills(ptx, std::string(name) + "__sm90_m64x2") == 0);
    CHECK(wholeProgramSpills(ptx, std::string(name) + "__sm90_n192") == 0);
    CHECK(wholeProgramSpills(ptx, std::string(name) + "__sm90_dec") == 0);
    // Every TMA load of A and B names an L2 policy (the operand read by more CTAs stays).
    size_t loads = 0, hinted = 0;
    for (size_t at = ptx.find("cp.async.bulk.tensor.2d.shared::cluster"); at != std::string::npos;
         at = ptx.find("cp.async.bulk.tensor.2d.shared::cluster", at + 1)) {
      ++loads;
      hinted += ptx.substr(at, ptx.find(' ', at) - at).ends_with(".L2::cache_hint");
    }
    CHECK(loads > 0);
    CHECK(hinted == loads);
    // ptxas neither serialises the wgmma chain nor warns (its notes are in the report).
    CHECK_THAT(ck.report().ptxas_notes, !Contains("serializ") && !Contains("warning"));
  }
}

TEST_CASE("f32 GEMMs, row kernels and sm_80 get no twin, and the report says why", "[cuda][sm90]") {
  CHECK_THAT(offline("sm_90a").compile(catalogue::gemm(DType::f32)).report().sm90,
             Contains("none: kernel 'gemm': A and B are not both bf16 or both f16"));
  CHECK_THAT(offline("sm_90a").compile(catalogue::softmax(DType::bf16)).report().sm90, Contains("none:"));
  Runtime sm80 = offline("sm_80");
  CHECK(sm80.compile(catalogue::gemm(DType::bf16)).report().sm90.empty());
  CHECK_THAT(sm80.emit(catalogue::gemm(DType::bf16), Stage::ptx), !Contains("wgmma"));
}

TEST_CASE("the twin can be turned off, and its tile width chosen", "[cuda][sm90]") {
  Runtime off = Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_gemm = false});
  CHECK(off.compile(catalogue::gemm(DType::bf16)).report().sm90.empty());
  CHECK_THAT(off.emit(catalogue::gemm(DType::bf16), Stage::ptx), !Contains("wgmma"));
  Runtime wide = Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_tile_n = 256});
  CHECK_THAT(wide.compile(catalogue::gemm_bias_relu(DType::bf16)).report().sm90, Contains("128x256x64 tiles"));
  for (auto [name, d] : sweep(inBf16AndF16({"gemm", "gemm_bias_relu", "gemm_bias_gelu", "gemm_bias_residual"}))) {
    INFO(name << " " << to_string(d));
    CHECK(wholeProgramSpills(wide.emit(catalogue::find(name).make(d), Stage::ptx), std::string(name) + "__sm90") == 0);
  }
  CHECK_THAT(wide.emit(catalogue::gemm(DType::bf16), Stage::ptx), Contains("wgmma.mma_async.sync.aligned.m64n256k16"));
  Runtime bad = Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_tile_n = 96});
  CHECK_THROWS_WITH(bad.compile(catalogue::gemm(DType::bf16)), Contains("hopper_tile_n must be 0, 128, 192 or 256, got 96"));
}

TEST_CASE("a twin loads its bias before the main loop, and no twin spills for it", "[cuda][sm90]") {
  Runtime rt = offline("sm_90a");
  const std::string ptx = rt.emit(catalogue::gemm_bias_relu(DType::bf16), Stage::ptx);
  // The 128 x 128 twin's body: each thread's 32 bias values (16 column groups of 2), loaded
  // once, before the first wgmma (the main loop), not chunk by chunk in the epilogue.
  const size_t begin = ptx.find(".entry gemm_bias_relu__sm90(");
  REQUIRE(begin != std::string::npos);
  const std::string body = ptx.substr(begin, ptx.find(".entry", begin + 1) - begin);
  size_t loads = 0;
  for (size_t at = body.find("ld.global"); at != std::string::npos; at = body.find("ld.global", at + 1)) ++loads;
  CHECK(loads == 32);
  CHECK(body.find("ld.global") < body.find("wgmma.mma_async"));
  // The 128 x 256 twin: 48 of its 64 before the main loop (all would spill), 16 in the
  // epilogue of its last box, whose code is there twice: inside C, two adjacent columns a
  // load (8 loads), and at its edge, one by one (16).
  const size_t wideAt = ptx.find(".entry gemm_bias_relu__sm90_n256(");
  REQUIRE(wideAt != std::string::npos);
  const std::string wide = ptx.substr(wideAt, ptx.find(".entry", wideAt + 1) - wideAt);
  size_t before = 0, all = 0;
  for (size_t at = wide.find("ld.global"); at != std::string::npos; at = wide.find("ld.global", at + 1))
    ++all, before += at < wide.find("wgmma.mma_async");
  CHECK(before == 48);
  CHECK(all == 48 + 8 + 16);
  // Preloaded values live through the main loop: still no spills in any default twin.
  for (auto [name, d] : sweep(inBf16AndF16({"gemm_bias_relu", "gemm_bias_gelu", "gemm_bias_residual"}))) {
    const std::string code = rt.emit(catalogue::find(name).make(d), Stage::ptx);
    for (const char* twin : {"__sm90", "__sm90x2", "__sm90_n256", "__sm90_m64", "__sm90_m64x2", "__sm90_n192"}) {
      INFO(name << twin << " " << to_string(d));
      CHECK(wholeProgramSpills(code, std::string(name) + twin) == 0);
    }
  }
}

TEST_CASE("two products sharing A with a bias, a residual and an f32 output get the two-product twins without spills",
          "[cuda][sm90]") {
  // Beyond the catalogue's swiglu (no epilogue inputs, a 16-bit H stored by TMA): a bias
  // along columns, an f32 residual along rows and columns (read in pairs), H stored from
  // registers.
  using namespace kiln::dsl;
  Kernel gated = kernel("gated_bias", [](Builder& k) {
    auto [M, N, K] = k.dims("M", "N", "K");
    auto X = k.input("X", {M, K}, bf16), Wg = k.input("Wg", {K, N}, bf16), Wu = k.input("Wu", {K, N}, bf16);
    auto Bias = k.input("Bias", {N}, bf16);
    auto R = k.input("R", {M, N}, f32);
    auto H = k.output("H", {M, N}, f32);
    k.grid({cdiv(M, 64), cdiv(N, 64)}, [&](Index i, Index j) {
      auto acc = k.loop(cdiv(K, 32), 3, {k.zeros({64, 64}), k.zeros({64, 64})}, [&](Index kk, const std::vector<Tile>& c) {
        Tile x = k.load(X.tile({i, kk}, {64, 32}));
        return std::vector<Tile>{dot(x, k.load(Wg.tile({kk, j}, {32, 64})), c[0]),
                                 dot(x, k.load(Wu.tile({kk, j}, {32, 64})), c[1])};
      });
      Tile b = cast(k.load(Bias.tile({j}, {64})), f32);
      k.store(H.tile({i, j}, {64, 64}), silu(acc[0] + rows(b)) * acc[1] + k.load(R.tile({i, j}, {64, 64})));
    });
  });
  const std::string ptx = offline("sm_90a").emit(gated, Stage::ptx);
  CHECK(ptx.find("ld.global.v2.b32") != std::string::npos); // the f32 residual, two columns a load
  for (const char* twin : {"__sm90", "__sm90_n256", "__sm90_m64"}) {
    INFO(twin);
    CHECK(ptx.find(std::string(".entry gated_bias") + twin + "(") != std::string::npos);
    CHECK(wholeProgramSpills(ptx, std::string("gated_bias") + twin) == 0);
  }
}

TEST_CASE("hopper_tile_n 192 makes 192-wide twins of both heights; kiln's own choice has the 128 x 192 one alone, the 64 x 192 one in pairs", "[cuda][sm90]") {
  auto make = [](int tileM, int cluster, bool stacked = false) {
    return Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_tile_n = 192,
                                           .hopper_tile_m = tileM, .hopper_cluster = cluster,
                                           .hopper_cluster_m = stacked});
  };
  Kernel k = catalogue::gemm_bias_relu(DType::bf16);
  // Both heights, clusters left to kiln: 128 x 192 alone, 64 x 192 alone and in stacked pairs.
  const std::string ptx = make(0, 0).emit(k, Stage::ptx);
  CHECK_THAT(ptx, Contains(".entry gemm_bias_relu__sm90_n192(") && Contains(".entry gemm_bias_relu__sm90_m64n192(") &&
                      Contains(".entry gemm_bias_relu__sm90_m64n192x2(") && Contains("m64n192k16") &&
                      !Contains("m64n128k16") && !Contains("m64n256k16"));
  for (const char* twin : {"gemm_bias_relu__sm90_n192", "gemm_bias_relu__sm90_m64n192", "gemm_bias_relu__sm90_m64n192x2"}) {
    INFO(twin);
    CHECK(wholeProgramSpills(ptx, twin) == 0);
  }
  // 64 x 192 stacked pairs: three B boxes, two loaded (and multicast) by one CTA, one by the
  // other: per k-step a load of box rank, then one of box 2 + rank where it lies inside the
  // tile (two multicast loads in the PTX).
  Runtime stacked = make(64, 2, true);
  CHECK_THAT(stacked.compile(k).report().sm90,
             Contains("64x192x64 tiles, 6 stages, clusters of 2 (B multicast)"));
  const std::string stackedPtx = stacked.emit(k, Stage::ptx);
  size_t multicasts = 0;
  for (size_t at = stackedPtx.find(".multicast::cluster"); at != std::string::npos;
       at = stackedPtx.find(".multicast::cluster", at + 1))
    ++multicasts;
  CHECK(multicasts == 2);
  // Without the option: the 128 x 192 twin alone and the 64 x 192 one only in stacked pairs,
  // both built without spills.
  const std::string own = offline("sm_90a").emit(k, Stage::ptx);
  CHECK_THAT(own, Contains(".entry gemm_bias_relu__sm90_n192(") && Contains(".entry gemm_bias_relu__sm90_m64n192x2(") &&
                      !Contains(".entry gemm_bias_relu__sm90_m64n192(") && !Contains("_sm90_n192x2"));
  CHECK(wholeProgramSpills(own, "gemm_bias_relu__sm90_n192") == 0);
  CHECK(wholeProgramSpills(own, "gemm_bias_relu__sm90_m64n192x2") == 0);
}

TEST_CASE("hopper_tile_m 64 with hopper_tile_n 256 makes ping-pong twins: two consumers taking tiles in turn", "[cuda][sm90]") {
  auto make = [](int cluster) {
    return Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_tile_n = 256,
                                           .hopper_tile_m = 64, .hopper_cluster = cluster});
  };
  for (const char* name : {"gemm", "gemm_bias_relu", "gemm_bias_gelu"}) {
    INFO(name);
    Kernel k = catalogue::find(name).make(DType::bf16);
    // Clusters left to kiln: the tile alone and in stacked pairs sharing B.
    Runtime rt = make(0);
    const std::string ptx = rt.emit(k, Stage::ptx);
    const std::string alone = std::string(name) + "__sm90", pairs = std::string(name) + "__sm90_m64n256x2";
    CHECK_THAT(ptx, Contains(".entry " + alone + "(") && Contains(".entry " + pairs + "(") &&
                        Contains("m64n256k16") && Contains(".maxntid 384, 1, 1"));
    // The turn: one consumer's bar.sync pairs with the other's bar.arrive (256 threads).
    CHECK_THAT(ptx, Contains("bar.arrive") && Contains("setmaxnreg.inc.sync.aligned.u32"));
    CHECK(wholeProgramSpills(ptx, alone) == 0);
    CHECK(wholeProgramSpills(ptx, pairs) == 0);
    // Each consumer stages its own C boxes: 4 stages of 40 KiB fit beside two staging pairs.
    CHECK_THAT(make(1).compile(k).report().sm90,
               Contains("64x256x64 tiles, 4 stages, 384 threads") &&
                   Contains(std::to_string(4 * (40960 + 16) + 2 * 16384 + 16 + 1024) + " B smem"));
  }
  // Not beside a residual (it would spill): no twin, and the report says why.
  CHECK_THAT(make(0).compile(catalogue::gemm_bias_residual(DType::bf16)).report().sm90,
             Contains("none:") && Contains("ping-pong tile takes no residual"));
  // Never kiln's own choice.
  CHECK_THAT(offline("sm_90a").emit(catalogue::gemm(DType::bf16), Stage::ptx), !Contains("_m64n256"));
}

TEST_CASE("hopper_tile_m picks the twins' height: 64 rows by one consumer warpgroup, or 128 by two", "[cuda][sm90]") {
  // Clusters off: the tile alone (by default the 64-row tile runs in stacked pairs).
  auto make = [](int tileM, int tileN = 0, int stages = 0) {
    return Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_tile_n = tileN,
                                           .hopper_tile_m = tileM, .hopper_stages = stages, .hopper_cluster = 1});
  };
  Kernel k = catalogue::gemm_bias_relu(DType::bf16);
  // 64 alone: one twin, named as a lone twin is, 256 threads, no register hand-over.
  Runtime low = make(64);
  const std::string ptx = low.emit(k, Stage::ptx);
  CHECK_THAT(ptx, Contains(".entry gemm_bias_relu__sm90(") && Contains(".maxntid 256, 1, 1") &&
                      Contains("m64n128k16") && !Contains("_sm90_n256") && !Contains("_sm90_m64") &&
                      !Contains("setmaxnreg"));
  CHECK(wholeProgramSpills(ptx, "gemm_bias_relu__sm90") == 0);
  CHECK_THAT(low.compile(k).report().sm90, Contains("64x128x64 tiles, 8 stages, 256 threads"));
  CHECK_THAT(make(64, 0, 3).compile(k).report().sm90,
             Contains("3 stages") && Contains(std::to_string(3 * (24576 + 16) + 16384 + 16 + 1024) + " B smem"));
  CHECK_THROWS_WITH(make(64, 0, 9).compile(k), Contains("hopper_stages must be 0 or 2..8 at hopper_tile_n 0 and hopper_tile_m 64"));
  // 128: the three 128-row twins.
  const std::string tall = make(128).emit(k, Stage::ptx);
  CHECK_THAT(tall, Contains(".entry gemm_bias_relu__sm90(") && Contains(".entry gemm_bias_relu__sm90_n256(") &&
                       Contains(".entry gemm_bias_relu__sm90_n192(") && !Contains("_sm90_m64"));
  // With a width: the twins of that width.
  CHECK_THAT(make(0, 128).emit(k, Stage::ptx), Contains(".entry gemm_bias_relu__sm90(") &&
                                                   Contains(".entry gemm_bias_relu__sm90_m64(") && !Contains("_sm90_n256"));
  CHECK_THAT(make(0, 256).emit(k, Stage::ptx), Contains(".entry gemm_bias_relu__sm90(") && !Contains("_sm90_m64"));
  CHECK_THROWS_WITH(make(32).compile(k), Contains("hopper_tile_m must be 0, 64, 128 or 256, got 32"));
  // 256: the tall 256 x 128 twin alone, two consumer warpgroups (384 threads) of two m64n128
  // parts each, its 128 accumulators and the bias beside them in registers without a spill.
  Runtime tallest = make(256);
  const std::string ptx256 = tallest.emit(k, Stage::ptx);
  CHECK_THAT(ptx256, Contains(".entry gemm_bias_relu__sm90(") && Contains(".maxntid 384, 1, 1") &&
                         Contains("m64n128k16") && !Contains("m64n256k16") && !Contains("_sm90_n256"));
  CHECK(wholeProgramSpills(ptx256, "gemm_bias_relu__sm90") == 0);
  CHECK_THAT(tallest.compile(k).report().sm90, Contains("256x128x64 tiles, 4 stages, 384 threads"));
  CHECK_THROWS_WITH(make(256, 256).compile(k),
                    Contains("hopper_tile_n must be 0 or 128 at hopper_tile_m 256 (the tall tile is 256 x 128), got 256"));
  // KILN_HOPPER_TILE_M when the options leave it to kiln.
  ScopedEnv env("KILN_HOPPER_TILE_M", "64");
  CHECK_THAT(make(0).compile(k).report().sm90, Contains("64x128x64 tiles") && !Contains("128x256x64"));
}

TEST_CASE("the layouts stage shows the tile IR with its encodings and conversions, beside the twins", "[cuda][sm90]") {
  std::string ir = offline("sm_90a").emit(catalogue::gemm_bias_relu(DType::bf16), Stage::layouts);
  CHECK_THAT(ir, Contains("tile.dot") && Contains("#tile.mma<warps = [2, 2], frags = [2, 4]>"));
  CHECK_THAT(ir, Contains("tile.convert_layout") && Contains("#tile.blocked"));
  CHECK_THAT(ir, Contains("gpu.func @gemm_bias_relu__sm90("));
  CHECK_THAT(ir, Contains("kiln.layouts = {a = #tile.nvmma_shared<swizzle = 128, major = \"k\">, acc = #tile.wgmma<m = 64, n = 128>"));
  CHECK(parse_stage("layouts") == Stage::layouts);
  Runtime cpu = Runtime::create(Backend::cpu, {});
  CHECK_THROWS_WITH(cpu.emit(catalogue::gemm(DType::f32), Stage::layouts), Contains("are CUDA stages"));
}

TEST_CASE("by default a GEMM gets every twin kiln picks from, and the report names each", "[cuda][sm90]") {
  Runtime rt = offline("sm_90a");
  std::string ptx = rt.emit(catalogue::gemm_bias_relu(DType::bf16), Stage::ptx);
  CHECK_THAT(ptx, Contains(".entry gemm_bias_relu__sm90(") && Contains(".entry gemm_bias_relu__sm90x2(") &&
                      Contains(".entry gemm_bias_relu__sm90x4(") && Contains(".entry gemm_bias_relu__sm90_n256(") &&
                      Contains(".entry gemm_bias_relu__sm90_m64(") && Contains(".entry gemm_bias_relu__sm90_m64x2(") &&
                      Contains(".entry gemm_bias_relu__sm90_n192(") && Contains(".entry gemm_bias_relu__sm90_m64n192x2(") &&
                      Contains(".entry gemm_bias_relu__sm90_dec(") && Contains(".entry gemm_bias_relu__sm90_dec32(") &&
                      Contains(".entry gemm_bias_relu__sm90_dec48(") && Contains(".entry gemm_bias_relu__sm90_dec64("));
  CHECK_THAT(ptx, Contains("m64n128k16") && Contains("m64n256k16") && Contains("m64n192k16"));
  std::string report = rt.compile(catalogue::gemm_bias_relu(DType::bf16)).report().sm90;
  CHECK_THAT(report, Contains("gemm_bias_relu__sm90: 128x128x64 tiles, 6 stages, 384 threads") &&
                         Contains("gemm_bias_relu__sm90x2: 128x128x64 tiles, 6 stages, clusters of 2 (B multicast), 384 threads") &&
                         Contains("gemm_bias_relu__sm90x4: 128x128x64 tiles, 5 stages, clusters of 4 (A multicast), 384 threads") &&
                         Contains("gemm_bias_relu__sm90_n256: 128x256x64 tiles, 4 stages, 384 threads") &&
                         Contains("gemm_bias_relu__sm90_m64: 64x128x64 tiles, 8 stages, 256 threads") &&
                         Contains("gemm_bias_relu__sm90_m64x2: 64x128x64 tiles, 8 stages, clusters of 2 (B multicast), 256 threads") &&
                         Contains("gemm_bias_relu__sm90_n192: 128x192x64 tiles, 4 stages, 384 threads") &&
                         Contains("gemm_bias_relu__sm90_m64n192x2: 64x192x64 tiles, 6 stages, clusters of 2 (B multicast), 256 threads") &&
                         Contains("gemm_bias_relu__sm90_dec: 16x64x64 tiles, 8 stages, 256 threads") &&
                         Contains("gemm_bias_relu__sm90_dec32: 32x64x64 tiles, 8 stages, 256 threads") &&
                         Contains("gemm_bias_relu__sm90_dec48: 48x64x64 tiles, 8 stages, 256 threads") &&
                         Contains("gemm_bias_relu__sm90_dec64: 64x64x64 tiles, 8 stages, 256 threads") &&
                         Contains("(split along K in clusters of up to 4)") &&
                         Contains("each launch takes the tile"));
  for (const char* entry :
       {"gemm_bias_relu__sm90", "gemm_bias_relu__sm90x2", "gemm_bias_relu__sm90x4", "gemm_bias_relu__sm90_n256", "gemm_bias_relu__sm90_m64",
        "gemm_bias_relu__sm90_m64x2", "gemm_bias_relu__sm90_n192", "gemm_bias_relu__sm90_m64n192x2", "gemm_bias_relu__sm90_dec",
        "gemm_bias_relu__sm90_dec32", "gemm_bias_relu__sm90_dec48", "gemm_bias_relu__sm90_dec64"}) {
    INFO(entry);
    CHECK(wholeProgramSpills(ptx, entry) == 0);
  }
}

TEST_CASE("the decode twin multiplies the weight's columns as wgmma's rows and stores C from registers", "[cuda][sm90]") {
  Runtime rt = offline("sm_90a");
  for (auto [name, d] : sweep(inBf16AndF16({"gemm", "gemm_bias_relu", "gemm_bias_residual"}))) {
    INFO(name << " " << to_string(d));
    std::string ptx = rt.emit(catalogue::find(name).make(d), Stage::ptx);
    const size_t at = ptx.find(".entry " + std::string(name) + "__sm90_dec(");
    REQUIRE(at != std::string::npos);
    const std::string body = ptx.substr(at, ptx.find("\n}", at) - at);
    // C^T = B^T A^T: m64n16k16, wgmma's A (B's box) read transposed, its B (A's rows)
    // K-major: imm-trans-a 1, imm-trans-b 0.
    CHECK_THAT(body, Contains("wgmma.mma_async.sync.aligned.m64n16k16.f32." + std::string(to_string(d))));
    // (scale-d p, imm-scale-a 1, imm-scale-b 1, then the transposes; spacing is the emitter's.)
    std::string args = body;
    args.erase(std::unique(args.begin(), args.end(), [](char x, char y) { return x == ' ' && y == ' '; }), args.end());
    CHECK_THAT(args, Contains("p, 1, 1, 1, 0;"));
    CHECK_THAT(body, !Contains("m64n128k16") && !Contains("cp.async.bulk.tensor.2d.global.shared"));
    CHECK_THAT(body, Contains("cp.async.bulk.tensor.2d.shared::cluster.global"));
    CHECK(wholeProgramSpills(ptx, std::string(name) + "__sm90_dec") == 0);
    // K-clusters: the launch's cluster size read at run time; a peer's sums stored into rank
    // 0's shared memory and released at cluster scope, acquired there; no workspace (no
    // global atomics, no parameter past K).
    const std::string whole = ptx.substr(at, ptx.find(".entry", at + 1) - at);
    CHECK_THAT(whole, Contains("%cluster_nctarank") && Contains("%cluster_ctarank") &&
                          Contains("mapa.shared::cluster") && Contains("st.shared::cluster.v4") &&
                          Contains("mbarrier.arrive.release.cluster.shared::cluster.b64") &&
                          Contains("mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64") &&
                          !Contains("atom.global") && !Contains("membar.gl"));
    // The 32-row one: m64n32k16.
    const size_t at32 = ptx.find(".entry " + std::string(name) + "__sm90_dec32(");
    REQUIRE(at32 != std::string::npos);
    CHECK_THAT(ptx.substr(at32, ptx.find("\n}", at32) - at32), Contains("m64n32k16") && !Contains("m64n16k16"));
    CHECK(wholeProgramSpills(ptx, std::string(name) + "__sm90_dec32") == 0);
    // The 64-row one: m64n64k16.
    const size_t at64 = ptx.find(".entry " + std::string(name) + "__sm90_dec64(");
    REQUIRE(at64 != std::string::npos);
    CHECK_THAT(ptx.substr(at64, ptx.find("\n}", at64) - at64), Contains("m64n64k16") && !Contains("m64n32k16"));
    CHECK(wholeProgramSpills(ptx, std::string(name) + "__sm90_dec64") == 0);
  }
  // hopper_split_k is 0, 1 or 2..16, checked when the runtime is made.
  CHECK_THROWS_WITH(Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_split_k = 17}),
                    Contains("hopper_split_k must be 0 (kiln's choice), 1 (never) or 2..16 chunks, got 17"));
  CHECK_THROWS_AS(Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_split_k = -1}),
                  kiln::Error);
  // KILN_HOPPER_DECODE=32 keeps the 16- and 32-row ones, =off none (A/B runs), each under
  // another cache key; other heights are refused.
  {
    ScopedEnv upTo32("KILN_HOPPER_DECODE", "32");
    const std::string ptx32 = offline("sm_90a").emit(catalogue::gemm(DType::bf16), Stage::ptx);
    CHECK_THAT(ptx32, Contains("__sm90_dec32(") && !Contains("__sm90_dec48(") && !Contains("__sm90_dec64("));
  }
  {
    ScopedEnv bad("KILN_HOPPER_DECODE", "40");
    CHECK_THROWS_WITH(offline("sm_90a"), Contains("KILN_HOPPER_DECODE is '40'; expected on, off, 16, 32, 48 or 64"));
  }
  ScopedEnv off("KILN_HOPPER_DECODE", "off");
  Runtime without = offline("sm_90a");
  CHECK_THAT(without.emit(catalogue::gemm(DType::bf16), Stage::ptx), !Contains("__sm90_dec"));
}

TEST_CASE("hopper_cluster 2 makes twins that share A's tile across a pair of CTAs by TMA multicast", "[cuda][sm90]") {
  Runtime rt = Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_cluster = 2});
  Kernel k = catalogue::gemm_bias_relu(DType::bf16);
  std::string ptx = rt.emit(k, Stage::ptx);
  // The peer's stage is freed at CTA scope: a cluster-scope release is a full fence before
  // every arrive (measured 1.8-3x slower on the H200).
  CHECK_THAT(ptx, Contains(".multicast::cluster") && Contains("mapa.shared::cluster") &&
                      Contains("mbarrier.arrive.shared::cluster.b64") && !Contains("mbarrier.arrive.release.cluster") &&
                      Contains("barrier.cluster.wait") && Contains("barrier.cluster.arrive.relaxed") &&
                      !Contains("barrier.cluster.arrive;"));
  // Clusters take whole tiles: no split-K.
  CHECK_THAT(rt.compile(k).report().sm90, !Contains("split-K"));
  CHECK_THAT(rt.compile(k).report().sm90, Contains("clusters of 2 (A multicast)"));
  for (const char* entry : {"gemm_bias_relu__sm90", "gemm_bias_relu__sm90_n256"}) {
    INFO(entry);
    CHECK(wholeProgramSpills(ptx, entry) == 0);
  }
  // hopper_cluster 1: no cluster instruction in the tile twins (the decode twins' K-clusters
  // are the launch's to choose: theirs follow them in the PTX).
  Runtime none = Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_cluster = 1});
  const std::string nonePtx = none.emit(k, Stage::ptx);
  const std::string tileTwins = nonePtx.substr(0, nonePtx.find(".entry gemm_bias_relu__sm90_dec("));
  CHECK_THAT(tileTwins, Contains(".entry gemm_bias_relu__sm90_m64(") && !Contains("multicast") &&
                            !Contains("barrier.cluster") && !Contains("mapa"));
  // By default (0) the 128 x 128 and 64-row tiles have a second twin in clusters (stacked
  // pairs sharing B), the 128 x 128 one a third (fours side by side sharing A); the others
  // take none.
  const std::string byDefault = offline("sm_90a").emit(k, Stage::ptx);
  // (the PTX lists the twins in the order they are made)
  auto body = [&](const std::string& entry) {
    const size_t at = byDefault.find(".entry gemm_bias_relu" + entry + "(");
    return at == std::string::npos ? std::string() : byDefault.substr(at, byDefault.find(".entry", at + 1) - at);
  };
  CHECK_THAT(body("__sm90x2"), Contains(".multicast::cluster"));
  CHECK_THAT(body("__sm90_m64x2"), Contains(".multicast::cluster"));
  // (each of the four frees a ring slot in all four)
  CHECK_THAT(body("__sm90x4"), Contains(".multicast::cluster") && Contains("mapa.shared::cluster.u64") &&
                                   Contains(", 3;"));
  for (const char* alone : {"__sm90", "__sm90_n256", "__sm90_m64"}) {
    INFO(alone);
    CHECK_THAT(body(alone), Contains("cp.async.bulk.tensor") && !Contains("multicast"));
  }
  CHECK_THAT(offline("sm_90a").compile(k).report().sm90,
             Contains("__sm90: 128x128x64 tiles, 6 stages, 384 threads") &&
                 Contains("__sm90x2: 128x128x64 tiles, 6 stages, clusters of 2 (B multicast), 384 threads") &&
                 Contains("__sm90_m64: 64x128x64 tiles, 8 stages, 256 threads") &&
                 Contains("__sm90_m64x2: 64x128x64 tiles, 8 stages, clusters of 2 (B multicast)") &&
                 Contains("__sm90x4: 128x128x64 tiles, 5 stages, clusters of 4 (A multicast), 384 threads"));
  // hopper_cluster 4: every tile in fours sharing A, each CTA loading a quarter of its rows.
  Runtime fours = Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_cluster = 4});
  const std::string foursPtx = fours.emit(k, Stage::ptx);
  CHECK_THAT(fours.compile(k).report().sm90, Contains("__sm90: 128x128x64 tiles, 6 stages, clusters of 4 (A multicast)") &&
                                                 Contains("__sm90_m64: 64x128x64 tiles, 8 stages, clusters of 4 (A multicast)") &&
                                                 !Contains("x2:") && !Contains("x4:"));
  for (const char* entry : {"gemm_bias_relu__sm90", "gemm_bias_relu__sm90_n256", "gemm_bias_relu__sm90_m64"}) {
    INFO(entry);
    CHECK(wholeProgramSpills(foursPtx, entry) == 0);
  }
  Runtime bad = Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_cluster = 3});
  CHECK_THROWS_WITH(bad.compile(k), Contains("hopper_cluster must be 0, 1, 2 or 4, got 3"));
}

TEST_CASE("hopper_cluster_m pairs vertically adjacent tiles, which share B's boxes by multicast", "[cuda][sm90]") {
  Runtime rt = Runtime::create(Backend::cuda,
                               {.compile_only = true, .arch = "sm_90a", .hopper_cluster = 2, .hopper_cluster_m = true});
  Kernel k = catalogue::gemm_bias_relu(DType::bf16);
  const std::string ptx = rt.emit(k, Stage::ptx);
  // One multicast per twin at width 128 (a box each: 128 x 128, 64 x 128 and the tall
  // 256 x 128), two at 256, and two at 192 (three boxes: one CTA multicasts two, the other
  // one, in two loads).
  size_t multicasts = 0;
  for (size_t at = ptx.find(".multicast::cluster"); at != std::string::npos; at = ptx.find(".multicast::cluster", at + 1))
    ++multicasts;
  CHECK(multicasts == 7);
  CHECK_THAT(rt.compile(k).report().sm90, Contains("clusters of 2 (B multicast)") && !Contains("(A multicast)"));
  for (const char* entry : {"gemm_bias_relu__sm90", "gemm_bias_relu__sm90_n256", "gemm_bias_relu__sm90_m64",
                            "gemm_bias_relu__sm90_n192", "gemm_bias_relu__sm90_m256"}) {
    INFO(entry);
    CHECK(wholeProgramSpills(ptx, entry) == 0);
  }
  CHECK(ptx != Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_cluster = 2}).emit(k, Stage::ptx));
  Runtime alone = Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_cluster_m = true});
  CHECK_THROWS_WITH(alone.compile(k), Contains("hopper_cluster_m pairs tiles in clusters: it needs hopper_cluster 2, got 0"));
}

TEST_CASE("the twin's ring is as deep as shared memory allows unless hopper_stages says otherwise", "[cuda][sm90]") {
  auto twin = [](int tileN, int stages) {
    return Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_tile_n = tileN,
                                           .hopper_stages = stages})
        .compile(catalogue::gemm_bias_relu(DType::bf16));
  };
  // 128 x 64 A + 64 x N B tiles of 16-bit elements per stage, beside 32 KiB of C staging, within 227 KiB.
  CompiledKernel deep = twin(256, 0);
  CHECK_THAT(deep.report().sm90, Contains("128x256x64 tiles, 4 stages"));
  CHECK_THAT(deep.report().sm90, Contains(std::to_string(4 * (49152 + 16) + 32768 + 16 + 1024) + " B smem"));
  CHECK_THAT(twin(128, 0).report().sm90, Contains("128x128x64 tiles, 6 stages"));
  CompiledKernel shallow = twin(128, 3);
  CHECK_THAT(shallow.report().sm90, Contains("3 stages") && Contains(std::to_string(3 * (32768 + 16) + 32768 + 16 + 1024) + " B smem"));
  CHECK_THROWS_WITH(twin(256, 5), Contains("hopper_stages must be 0 or 2..4 at hopper_tile_n 256") &&
                                      Contains("got 5"));
  CHECK_THROWS_WITH(twin(128, 1), Contains("hopper_stages must be 0 or 2..6 at hopper_tile_n 128"));
}

TEST_CASE("hopper_raster sets the order the twin's CTAs take C's tiles in, a knob for the tuner", "[cuda][sm90]") {
  auto make = [](int raster) {
    return Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .hopper_raster = raster});
  };
  Kernel k = catalogue::gemm_bias_relu(DType::bf16);
  const std::string byDefault = make(0).emit(k, Stage::ptx);
  CHECK(make(8).emit(k, Stage::ptx) == byDefault); // 8 tile rows is the default order
  CHECK_THAT(make(0).compile(k).report().sm90, !Contains("in groups of"));
  for (int raster : {1, 32}) {
    INFO("hopper_raster " << raster);
    Runtime rt = make(raster);
    const std::string ptx = rt.emit(k, Stage::ptx);
    CHECK(ptx != byDefault);
    CHECK_THAT(rt.compile(k).report().sm90, Contains("in groups of " + std::to_string(raster) + " tile rows"));
    for (const char* entry : {"gemm_bias_relu__sm90", "gemm_bias_relu__sm90_n256"}) CHECK(wholeProgramSpills(ptx, entry) == 0);
  }
  CHECK_THROWS_WITH(make(65).compile(k), Contains("hopper_raster must be 0..64, got 65"));
  CHECK_THROWS_WITH(make(-1).compile(k), Contains("hopper_raster must be 0..64, got -1"));
  ScopedEnv env("KILN_HOPPER_RASTER", "16");
  CHECK_THAT(make(0).compile(k).report().sm90, Contains("in groups of 16 tile rows"));
  CHECK_THAT(make(4).compile(k).report().sm90, Contains("in groups of 4 tile rows")); // the option wins
  ::setenv("KILN_HOPPER_RASTER", "3", 1);
  CHECK_THROWS_WITH(make(0), Contains("KILN_HOPPER_RASTER is '3'; expected 0, 1, 2, 4, 8, 16, 32 or 64"));
}

TEST_CASE("a GEMM written in the DSL with its own epilogue gets the twin", "[cuda][sm90]") {
  // Nothing marks the kernel: the same program as on every backend. silu(acc * 0.5 + R) in f16.
  using namespace kiln::dsl;
  Kernel k = kernel("mine", [](Builder& b) {
    auto [M, N, K] = b.dims("M", "N", "K");
    auto A = b.input("A", {M, K}, f16), B = b.input("B", {K, N}, f16), R = b.input("R", {M, N}, f16);
    auto C = b.output("C", {M, N}, f16);
    b.grid({cdiv(M, 32), cdiv(N, 32)}, [&](Index i, Index j) {
      Tile acc = b.loop(cdiv(K, 16), 2, b.zeros({32, 32}), [&](Index kk, const Tile& c) {
        return dot(b.load(A.tile({i, kk}, {32, 16})), b.load(B.tile({kk, j}, {16, 32})), c);
      });
      b.store(C.tile({i, j}, {32, 32}), cast(silu(acc * 0.5f + cast(b.load(R.tile({i, j}, {32, 32})), f32)), f16));
    });
  });
  CompiledKernel ck = offline("sm_90a").compile(k);
  CHECK_THAT(ck.report().sm90, Contains("128x128x64 tiles"));
  CHECK(wholeProgramSpills(offline("sm_90a").emit(k, Stage::ptx), "mine__sm90") == 0);
}

TEST_CASE("KILN_HOPPER_* set the twin where the options leave the defaults", "[cuda][sm90]") {
  auto twinOf = [](RuntimeOptions o) {
    o.compile_only = true;
    o.arch = "sm_90a";
    return Runtime::create(Backend::cuda, o).compile(catalogue::gemm(DType::bf16)).report().sm90;
  };
  // Each variable: a value and what the twin then shows (empty: no twin), a bad value and
  // the error naming it.
  struct Case {
    const char *name, *value, *shows, *bad, *error;
  };
  for (const Case& c : {Case{"KILN_HOPPER_TILE_N", "256", "128x256x64 tiles", "300", "expected 0, 128, 192 or 256"},
                        Case{"KILN_HOPPER_TILE_M", "64", "64x128x64 tiles", "96", "expected 0, 64, 128 or 256"},
                        Case{"KILN_HOPPER_GEMM", "off", "", "maybe", "expected on or off"},
                        Case{"KILN_HOPPER_STAGES", "3", "3 stages", "many", "expected 0, 1, 2"},
                        Case{"KILN_HOPPER_CLUSTER", "4", "clusters of 4", "3", "expected 0, 1, 2 or 4"},
                        Case{"KILN_HOPPER_JIT", "ptxas", "128x128x64 tiles", "jit", "expected auto, driver, nvjitlink or ptxas"}}) {
    INFO(c.name);
    ScopedEnv env(c.name, c.value);
    if (*c.shows) CHECK_THAT(twinOf({}), Contains(c.shows));
    else CHECK(twinOf({}).empty());
    ::setenv(c.name, c.bad, 1); // restored by `env`
    CHECK_THROWS_WITH(twinOf({}), Contains(c.name + std::string(" is '") + c.bad + "'; " + c.error));
  }
  // The options win over the environment.
  {
    ScopedEnv env("KILN_HOPPER_TILE_N", "256");
    CHECK_THAT(twinOf({.hopper_tile_n = 128}), Contains("128x128x64 tiles"));
  }
  {
    ScopedEnv env("KILN_HOPPER_STAGES", "3");
    CHECK_THAT(twinOf({.hopper_stages = 2}), Contains("2 stages"));
  }
  CHECK_THAT(twinOf({}), Contains("128x128x64 tiles")); // and nothing is left set
}

TEST_CASE("every supported architecture compiles to PTX of the version it needs and to a cubin", "[cuda][compile]") {
  // sm_100 needs PTX 8.6 and sm_120 PTX 8.7: under PTX 8.0, LLVM would end the process.
  const std::vector<std::pair<std::string, std::string>> archs = {
      {"sm_80", "8.0"}, {"sm_86", "8.0"}, {"sm_87", "8.0"}, {"sm_89", "8.0"},    {"sm_90", "8.0"},
      {"sm_90a", "8.0"}, {"sm_100", "8.6"}, {"sm_100a", "8.6"}, {"sm_120", "8.7"}, {"sm_120a", "8.7"}};
  for (const auto& [arch, ptx] : archs) {
    INFO(arch);
    Runtime rt = offline(arch);
    std::string text = rt.emit(catalogue::gemm_bias_relu(DType::bf16), Stage::ptx);
    CHECK_THAT(text, Contains(".version " + ptx + "\n") && Contains(".target " + arch + "\n"));
    // The wgmma twin is sm_90a's alone ('a' features do not carry forward).
    CHECK((text.find("wgmma") != std::string::npos) == (arch == "sm_90a"));
    CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::bf16));
    CHECK(ck.report().spill_bytes == 0);
    CHECK(ck.binary().substr(0, 4) == "\x7f" "ELF");
  }
}


TEST_CASE("a twin whose epilogue divides or takes square roots keeps its wgmma asynchronous", "[cuda][sm90]") {
  // IEEE division and sqrt are ptxas subroutine calls, and any call serialises wgmma.
  Runtime rt = offline("sm_90a");
  for (auto [name, op] : std::vector<std::pair<std::string, std::function<dsl::Tile(const dsl::Tile&)>>>{
           {"with_rsqrt", [](const dsl::Tile& t) { return dsl::rsqrt(dsl::relu(t) * 2.0); }},
           {"with_sqrt", [](const dsl::Tile& t) { return dsl::sqrt(dsl::relu(t)); }},
           {"with_sigmoid", [](const dsl::Tile& t) { return dsl::sigmoid(t); }}}) {
    INFO(name);
    CompiledKernel ck = rt.compile(test::bf16Gemm(name, op));
    CHECK_THAT(ck.report().sm90, Contains("0 spill bytes"));
    CHECK_THAT(ck.report().ptxas_notes, !Contains("serializ"));
  }
}

TEST_CASE("a GEMM whose grid does not cover C gets no twin (the twin writes every tile)", "[cuda][sm90]") {
  // Only the first 64 columns of C are computed by this kernel: the twin would write all N.
  CompiledKernel ck = offline("sm_90a").compile(test::bf16Gemm("first_cols", {}, DType::bf16, 1));
  CHECK_THAT(ck.report().sm90, Contains("none:") && Contains("the grid does not cover C exactly"));
  CHECK_THAT(offline("sm_90a").compile(test::bf16Gemm("all_cols")).report().sm90,
             Contains("128x128x64 tiles"));
}

TEST_CASE("launch_path says which machine code a launch would run, and why", "[cuda][sm90]") {
  // Host memory is fine here: launch_path checks shapes and strides, not pointers.
  auto viewsFor = [](catalogue::Problem& p) { return p.views(); };
  CompiledKernel twin = offline("sm_90a").compile(catalogue::gemm_bias_relu(DType::bf16));
  catalogue::Problem aligned = catalogue::find("gemm_bias_relu").problem({64, 64, 64}, DType::bf16, 1);
  catalogue::Problem ragged = catalogue::find("gemm_bias_relu").problem({64, 64, 33}, DType::bf16, 1);
  // Host buffers come from operator new: 16-byte aligned on x86-64, as TMA needs.
  REQUIRE(reinterpret_cast<uintptr_t>(aligned.args[0].data()) % 16 == 0);
  REQUIRE(reinterpret_cast<uintptr_t>(aligned.args[1].data()) % 16 == 0);
  CHECK(twin.launch_path(viewsFor(aligned)) == "sm_90a twin 'gemm_bias_relu__sm90'");
  CHECK_THAT(twin.launch_path(viewsFor(ragged)),
             Contains("portable kernel 'gemm_bias_relu' (the sm_90a twin does not apply: ") && Contains("row pitch"));
  CHECK(offline("sm_80").compile(catalogue::gemm_bias_relu(DType::bf16)).launch_path(viewsFor(aligned)) ==
        "portable kernel 'gemm_bias_relu'");
  CHECK(Runtime::create(Backend::cpu).compile(catalogue::gemm(DType::f32)).launch_path(
            catalogue::find("gemm").problem({4, 4, 4}, DType::f32, 1).views()) == "kernel 'gemm'");
  // Wrong arguments are refused as by launch.
  auto wrong = viewsFor(aligned);
  wrong.pop_back();
  CHECK_THROWS_AS(twin.launch_path(wrong), Error);
}

TEST_CASE("a bf16 GEMM with an f32 output gets a twin that stores f32", "[cuda][sm90]") {
  Kernel k = test::bf16Gemm("to_f32", {}, DType::f32);
  Runtime rt = offline("sm_90a");
  CompiledKernel ck = rt.compile(k);
  CHECK_THAT(ck.report().sm90, Contains("128x128x64 tiles") && Contains(" 0 spill bytes"));
  std::string ptx = rt.emit(k, Stage::ptx);
  const auto twin = ptx.find(".entry to_f32__sm90("), portable = ptx.find(".entry to_f32(");
  REQUIRE(twin != std::string::npos);
  REQUIRE(portable != std::string::npos);
  std::string body = twin < portable ? ptx.substr(twin, portable - twin) : ptx.substr(twin);
  // f32 elements one by one (4-byte stores: no alignment beyond the element's assumed).
  CHECK(body.find("st.global.b32") != std::string::npos);
  CHECK(body.find("st.global.v2") == std::string::npos);
}

TEST_CASE("a kernel that needs more shared memory than its target allows fails to compile, naming both", "[cuda][errors]") {
  // f32 tiles staged once in shared memory: 256 x 64 of A and 64 x 256 of B, 128 KiB: within
  // sm_80's 163 KiB per CTA, past sm_86's 99. Checked before PTX is made (the LLVM stage).
  const Kernel k = catalogue::gemm(DType::f32, {256, 256, 64, 1});
  CHECK_NOTHROW(offline("sm_80").emit(k, Stage::llvm));
  CHECK_THROWS_WITH(offline("sm_86").emit(k, Stage::llvm),
                    Contains("kernel 'gemm' needs 131072 bytes of shared memory per CTA") &&
                        Contains("sm_86 allows at most 101376"));
  CHECK_THROWS_WITH(offline("sm_90a").emit(catalogue::gemm(DType::f32, {512, 512, 64, 1}), Stage::llvm),
                    Contains("sm_90a allows at most 232448"));
  try {
    offline("sm_86").emit(k, Stage::ptx);
    FAIL("the sm_86 compile should be refused");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported); // a config the target cannot run, not a compiler fault
  }
}
