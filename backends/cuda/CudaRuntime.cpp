// The CUDA backend behind kiln::Runtime: compile (PTX -> cubin), load, check, launch.
#include "Runtime/Log.h"
#include "Runtime/Nvtx.h"
#include "CudaCompiler.h"
#include "BackgroundModule.h"
#include "Cublas.h"
#include "Cudnn.h"
#include "Driver.h"
#include "NvJitLink.h"
#include "PtxModules.h"
#include "Ptxas.h"
#include "Target.h"
#include "Nvrtc.h"
#include "hopper/Sm90Launch.h"
#include "CacheFlush.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <tuple>
#include <mutex>
#include <thread>

#include "kiln/error.hpp"
#include "Runtime/JsonInt.h"
#include "Runtime/RuntimeImpl.h"

// kiln::cuda has a detail namespace of its own (Driver.h); name kiln's plainly.
namespace kd = ::kiln::detail;

namespace kiln::cuda {

namespace {

// Every kernel with dynamic shared memory opts in to exactly what it uses: the default
// limit (48 KiB) is not a safe threshold to test against (static shared memory and the
// per-CTA reservation count too: a kernel asking for exactly 48 KiB failed to launch on
// the H200 without the opt-in), and setting the attribute costs nothing.
const char* kDefaultOfflineArch = "sm_90a";

struct CudaState {
  RuntimeOptions options;
  bool compile_only = false;
  DeviceInfo device;
  Context context;
  std::string arch;
  /// KILN_HOPPER_PERSISTENT=off: launch the sm_90a twin with one CTA per tile (A/B runs).
  bool hopperPersistent = true;
  /// KILN_HOPPER_MAP_CACHE=off: encode every tensor map at every launch (A/B runs of the
  /// kernels' TensorMapCache).
  bool keepTensorMaps = true;
  /// Compiling for deploy, or on a GPU where twinsByPtxas(): the toolkit's ptxas
  /// (KILN_PTXAS; of nvJitLink's release), which makes the machine code of a kernel with twins
  /// instead of the GPU's driver; none: its entry stays PTX (`ptxasWhy` says why).
  std::optional<PtxasTool> ptxas;
  std::string ptxasWhy;
  /// The decode twins beside kiln's tiles: of 16, 32, ... up to this many rows
  /// (KILN_HOPPER_DECODE=off: none, for A/B runs; =16|32|48|64: up to that many; in the
  /// cache key where not the default).
  int hopperDecodeRows = hopper::kDecodeRows;
  /// The swapped twins of 128 columns beside kiln's tiles, up to this many rows
  /// (KILN_HOPPER_WIDE=off: none, for A/B runs; in the cache key where not the default).
  int hopperWideRows = hopper::kWideRows;
  /// Who compiles a module with an sm_90a twin on a GPU, from KILN_HOPPER_JIT. As a whole
  /// program (see compile()), by the toolkit's ptxas (the cache keeps machine code: a disk
  /// hit needs no JIT, 7 ms against 1.2 s for a GEMM's, H100, 2026-12-05; the cold compile
  /// costs the same) or by the driver's JIT (the cache keeps PTX). Auto (the default): ptxas
  /// where one of nvJitLink's release is found, looked for at the first such compile (not in
  /// Runtime::create), else the driver; Ptxas: Runtime::create fails without one; NvJitLink:
  /// nvJitLink like the rest (A/B runs; not a whole program).
  enum class TwinJit { Auto, Driver, Ptxas, NvJitLink } twinJit = TwinJit::Auto;
  std::once_flag ptxasLookup;
  /// Whether twins go to ptxas on this GPU runtime; the first call looks for it (thread-safe).
  bool twinsByPtxas() {
    if (twinJit != TwinJit::Auto) return twinJit == TwinJit::Ptxas;
    std::call_once(ptxasLookup, [this] {
      try {
        lookForPtxas();
      } catch (const Error& e) { // a KILN_PTXAS that does not serve: the driver's JIT, said once
        ptxas.reset();
        ptxasWhy = e.what();
        kd::logWarn(std::string("the driver's JIT compiles sm_90a twins, not ptxas: ") + e.what());
      }
    });
    return ptxas.has_value();
  }
  /// Sets `ptxas` (or `ptxasWhy`): KILN_PTXAS, else the toolkit's or PATH's, of nvJitLink's
  /// release (the machine code must be the release the entry's key names).
  bool lookForPtxas() {
    std::string why;
    const std::string linker = nvJitLinkAvailable(&why) ? nvJitLinkVersionString() : "";
    const std::string release = linker.rfind("nvJitLink ", 0) == 0 ? linker.substr(10) : "";
    const char* setting = std::getenv("KILN_PTXAS");
    ptxas = findPtxas(setting ? setting : "", release, &ptxasWhy);
    return ptxas.has_value();
  }
  /// KILN_HOPPER_SPLIT_K=off|auto|on (or a number: hopper_split_k): split-K never (the default: on the H200 it was
  /// slower wherever it cut tiles but on a decode shape), where the cost model says it pays,
  /// or wherever tiles leave the last round of CTAs part-empty. EXPERIMENTAL. The modes are
  /// the GEMM's; attention's key splits follow the number only (1: never).
  hopper::SplitK hopperSplitK = hopper::SplitK::Off;
  /// Counts the workspaces below in Runtime::memory().
  std::shared_ptr<kd::MemoryMeter> meter;
  // reference::gpu_gemm's cuBLASLt handle and workspace: made on first use, reused, and
  // destroyed before the context is released (members are destroyed in reverse order).
  std::mutex cublas_mutex;
  std::unique_ptr<CublasLtGemm> cublas;
  std::mutex cudnn_mutex;
  std::unique_ptr<CudnnAttention> cudnn;
  // The twins' split-K workspaces, one per stream (launches on one stream run in order, so
  // they share it; two streams never do). Grown, never shrunk, until the runtime goes.
  std::mutex workspace_mutex;
  std::map<CUstream, DeviceBuffer> workspaces;

  hopper::LaunchConfig launchConfig() const {
    return {hopperPersistent ? device.sm_count : 0, hopperSplitK, options.hopper_split_k};
  }
  CUdeviceptr splitKWorkspace(CUstream stream, size_t bytes) {
    std::lock_guard<std::mutex> lock(workspace_mutex);
    DeviceBuffer& ws = workspaces[stream];
    if (ws.size() < bytes) {
      // Work already queued on this stream may still use the old buffer.
      if (ws.size())
        KILN_CU_CHECK_CTX(driver().cuStreamSynchronize(stream), "waiting for a stream before growing its workspace");
      DeviceBuffer grown(bytes);
      grown.fillBytes(0); // the arrival counters start at zero (and partial sums are never read unwritten)
      if (meter) meter->add(int64_t(bytes) - int64_t(ws.size()));
      ws = std::move(grown);
    }
    return ws.ptr();
  }
  ~CudaState() {
    if (meter)
      for (auto& [stream, ws] : workspaces) meter->sub(int64_t(ws.size()));
  }
};

// `who` ("kernel 'gemm': argument 'A'") must be memory of the runtime's device, aligned to
// its element size, and lie inside memory CUDA has allocated: a view larger than its
// allocation would fault the kernel, and a fault leaves the engine's whole context unusable.
// `who()` makes that name, called only for a message: a launch checks every argument.
template <class Who>
void checkDevicePointer(const CudaState& state, const TensorView& v, int64_t span, const Who& who) {
  if (span == 0) return;
  auto p = reinterpret_cast<CUdeviceptr>(v.data);
  const PointerInfo at = pointerInfo(p);
  if (at.ordinal != state.device.ordinal)
    throw Error(ErrorKind::InvalidArgument,
                who() + " is not memory of CUDA device " + std::to_string(state.device.ordinal) +
                    (at.ordinal < 0 ? " (a host pointer, or not allocated by CUDA)" : " (it is on device " + std::to_string(at.ordinal) + ")"));
  if (p % size_of(v.dtype) != 0)
    throw Error(ErrorKind::InvalidArgument,
                who() + " is misaligned: its address must be a multiple of " + std::to_string(size_of(v.dtype)) + " bytes");
  const uint64_t end = uint64_t(p) + uint64_t(span); // one past the view's last byte
  if (at.size == 0 || end <= uint64_t(at.start) + at.size) return;
  // Past the allocation the first byte lies in. Memory an engine maps itself (cuMemMap) can
  // continue in a neighbouring allocation: the last byte then decides.
  if (pointerInfo(CUdeviceptr(end - 1)).ordinal == state.device.ordinal) return;
  throw Error(ErrorKind::InvalidArgument,
              who() + " (" + v.describe() + ", " + std::to_string(span) + " bytes from its first element to its last) " +
                  "ends " + std::to_string(end - (uint64_t(at.start) + at.size)) +
                  " bytes past the device allocation it starts in (" + std::to_string(at.size) + " bytes at " +
                  std::to_string(uint64_t(at.start)) + "): its dims or strides claim more memory than was allocated");
}

// The same for a view no signature check has measured (hand-written kernels, cuBLASLt).
void checkDevicePointer(const CudaState& state, const TensorView& v, const std::string& who) {
  const std::optional<int64_t> span = kd::spanBytes(v);
  if (!span)
    throw Error(ErrorKind::InvalidArgument,
                who + " (" + v.describe() + ") spans more bytes than an int64 counts: its dims or strides are too large");
  checkDevicePointer(state, v, *span, [&] { return who; });
}

/// KernelReport::compiler's note when the driver's JIT found the machine code in its own
/// disk cache (~/.nv/ComputeCache): an earlier process on this machine compiled this PTX.
constexpr const char* kDriverCacheHit =
    "machine code from the driver's JIT cache (compiled by an earlier process on this machine; "
    "CUDA_CACHE_DISABLE=1 measures a first compile)";

class CudaKernel : public kd::CompiledImpl {
public:
  std::shared_ptr<CudaState> state;
  DeviceCode code;
  Module module;
  CUfunction function = nullptr; ///< the portable kernel, unless it is `portable`'s
  /// code.sm90's entries, one per twin (none when the device cannot host any).
  std::vector<CUfunction> sm90;
  /// With twin modules: the twins past the first, a module each, in code.sm90's order.
  std::vector<Module> moreModules;
  /// With a twin, the portable kernel in a module of its own, compiled on a thread (empty:
  /// it is `function`, in `module`).
  BackgroundModule portable;
  std::once_flag settled;

  /// The report's portable-kernel figures and times.fallback_ms, once its thread is done
  /// (report() and times() wait here).
  void settle() override {
    if (!portable) return;
    std::call_once(settled, [&] {
      const BackgroundModule::Loaded& l = portable.wait();
      times.fallback_ms = l.ms;
      if (l.error) {
        try {
          std::rethrow_exception(l.error);
        } catch (const std::exception& e) {
          report.compiler += "; its portable fallback failed to compile: " + std::string(e.what());
        }
        return;
      }
      report.compiler += "; its portable fallback built by " + l.compiler;
      report.registers = l.registers;
      report.spill_bytes = l.spill_bytes;
      if (!l.notes.empty()) report.ptxas_notes += (report.ptxas_notes.empty() ? "" : "; ") + l.notes;
    });
  }

  /// The twin that runs `args` (index into code.sm90) and how it divides them, or -1
  /// (`why` says why not).
  int twinFor(const std::vector<TensorView>& args, std::string* why, hopper::Split* work) const {
    if (sm90.empty()) return -1;
    return choices.choose(code.sm90, args, state->launchConfig(), why, work);
  }
  /// The twins' plans and the runtime's launch config are fixed once loaded: choices stay right.
  mutable hopper::ChoiceCache choices;
  hopper::TensorMapCache tensorMaps;

  void launch(const std::vector<TensorView>& args, void* stream, bool wait) override {
    if (state->compile_only)
      throw Error(ErrorKind::Unsupported, "kernel '" + sig.name + "' was compiled by a compile-only "
                                          "CUDA runtime (no GPU): it cannot be launched");
    kd::Spans spans(args.size());
    kd::Bindings bound = kd::checkLaunchArgs(sig, args, &spans);
    state->context.makeCurrent(); // pointer queries need it too (an engine's worker thread may have none)
    for (size_t i = 0; i < args.size(); ++i)
      checkDevicePointer(*state, args[i], spans[i],
                         [&] { return "kernel '" + sig.name + "': argument '" + sig.args[i].name + "'"; });
    const std::array<int64_t, 3> grid = code.grid.evaluate(bound, sig.name);
    for (int64_t g : grid)
      if (g <= 0) return; // an empty problem: nothing to run (as on the CPU)
    auto s = static_cast<CUstream>(stream);
    hopper::Split work;
    if (int t = twinFor(args, /*why=*/nullptr, &work); t >= 0) { // (a copied reason would allocate)
      hopper::launch(sm90[size_t(t)], code.sm90[size_t(t)], args, s, sig.name, work,
                     [&](size_t bytes) { return state->splitKWorkspace(s, bytes); },
                     state->keepTensorMaps ? &tensorMaps : nullptr);
    } else {
      // The portable kernel's grid (the twin's is 1-D and checked by applies()).
      const int64_t limits[3] = {(1ll << 31) - 1, 65535, 65535};
      for (int d = 0; d < 3; ++d)
        if (grid[d] < 0 || grid[d] > limits[d])
          throw Error(ErrorKind::InvalidArgument, "kernel '" + sig.name + "': grid " + code.grid.str() + " = " +
                                                      std::to_string(grid[d]) + " CTAs in dim " + std::to_string(d) +
                                                      ", over CUDA's limit of " + std::to_string(limits[d]));
      kd::PackedArgs packed(args);
      launchKernel(portable ? portable.function() : function, sig.name, {unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2])},
                   {unsigned(code.threads), 1, 1}, unsigned(code.shared_bytes), s, packed.ptrs.data());
    }
    if (wait) KILN_CU_CHECK_CTX(driver().cuStreamSynchronize(s), "running kernel '" + sig.name + "'");
  }

  std::string launchPath(const std::vector<TensorView>& args) override {
    kd::checkLaunchArgs(sig, args);
    if (code.sm90.empty()) return "portable kernel '" + sig.name + "'";
    std::string why;
    hopper::Split work;
    if (state->compile_only) { // no device: which twin would run is the GPU's to say
      if (hopper::applies(code.sm90[0], args, &why)) return "sm_90a twin '" + code.sm90[0].entry + "'";
    } else if (int t = twinFor(args, &why, &work); t >= 0) {
      return "sm_90a twin '" + code.sm90[size_t(t)].entry + "' (" + hopper::describe(code.sm90[size_t(t)], work) + ")";
    }
    return "portable kernel '" + sig.name + "' (the sm_90a twin does not apply: " + why + ")";
  }
};

class CudaHandwritten : public kd::HandwrittenImpl {
public:
  std::shared_ptr<CudaState> state;
  Module module;
  CUfunction function = nullptr;
  std::vector<size_t> param_sizes; // from the driver, in parameter order
  int max_threads = 0;
  int static_smem = 0;             // the kernel's own __shared__ arrays
  std::mutex launchMu;             // launches may come from several threads; the attribute is shared
  int64_t optedIn = 0;             // the dynamic shared memory the function is allowed now
  std::string label;               // "hand-written kernel 'gemm' (gemm.cu)"

  void launch(Dim3 grid, Dim3 block, size_t smem, const std::vector<KernelArg>& args, void* stream) override {
    if (state->compile_only)
      throw Error(ErrorKind::Unsupported, label + " was compiled by a compile-only CUDA runtime (no GPU): it "
                                                  "cannot be launched");
    if (args.size() != param_sizes.size())
      throw Error(ErrorKind::InvalidArgument, label + " takes " + std::to_string(param_sizes.size()) +
                                                  " parameters, got " + std::to_string(args.size()) + " arguments");
    state->context.makeCurrent();
    std::vector<void*> params;
    for (size_t i = 0; i < args.size(); ++i) {
      const KernelArg& a = args[i];
      if (a.size() != param_sizes[i])
        throw Error(ErrorKind::InvalidArgument, label + ": parameter " + std::to_string(i) + " is " +
                                                    std::to_string(param_sizes[i]) + " bytes, argument " +
                                                    std::to_string(i) + " is a " + a.describe() + " (" +
                                                    std::to_string(a.size()) + " bytes)");
      if (a.is_tensor())
        checkDevicePointer(*state, a.view(), label + ": argument " + std::to_string(i) + " (" + a.describe() + ")");
      params.push_back(const_cast<void*>(a.data()));
    }
    const unsigned threads = block.x * block.y * block.z;
    if (threads == 0 || int64_t(block.x) * block.y * block.z > max_threads)
      throw Error(ErrorKind::InvalidArgument, label + ": a block of " + std::to_string(block.x) + "x" +
                                                  std::to_string(block.y) + "x" + std::to_string(block.z) +
                                                  " threads; this kernel allows 1 to " + std::to_string(max_threads));
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return; // nothing to run
    if (grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu)
      throw Error(ErrorKind::InvalidArgument, label + ": grid " + std::to_string(grid.x) + "x" + std::to_string(grid.y) +
                                                  "x" + std::to_string(grid.z) + " is over CUDA's limits");
    if (int64_t(smem) + static_smem > state->device.max_smem_per_block_optin)
      throw Error(ErrorKind::InvalidArgument, label + " asks for " + std::to_string(smem) +
                                                  " bytes of dynamic shared memory on top of its " +
                                                  std::to_string(static_smem) + " static; " + state->device.name +
                                                  " allows " + std::to_string(state->device.max_smem_per_block_optin) +
                                                  " in all");
    std::lock_guard<std::mutex> lock(launchMu);
    if (smem > 0 && int64_t(smem) != optedIn) {
      setMaxDynamicSharedMemory(function, int(smem), label);
      optedIn = int64_t(smem);
    }
    report.threads = int(threads);
    report.shared_bytes = int64_t(smem) + static_smem;
    launchKernel(function, label, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z}, unsigned(smem),
                 static_cast<CUstream>(stream), params.data());
  }
};

struct CudaTensor : kd::DeviceTensorImpl {
  DeviceBuffer buffer;
};

class CudaRuntime : public kd::RuntimeImpl {
public:
  std::shared_ptr<CudaState> state;

  CompileOptions compileOptions() const {
    CompileOptions o{state->arch,
            state->options.num_warps,
            state->options.hopper_gemm,
            state->options.hopper_tile_n,
            state->options.hopper_tile_m,
            state->options.hopper_stages,
            state->options.hopper_cluster,
            state->options.hopper_cluster_m,
            state->options.hopper_raster,
            state->hopperDecodeRows,
            state->hopperWideRows};
    o.threads = state->options.compile_threads;
    return o;
  }

  /// KernelReport::sm90 for `code`.
  /// Per twin: its registers and spill bytes (-1: unknown). `relocatable`: the counts are
  /// nvJitLink's, whose relocatable compile drops setmaxnreg.
  static std::string describeSm90(const DeviceCode& code, const std::vector<std::pair<int, int>>& counts,
                                  bool relocatable = false) {
    if (code.sm90.empty()) return code.sm90_why_not.empty() ? std::string() : "none: " + code.sm90_why_not;
    std::string s;
    for (size_t i = 0; i < code.sm90.size(); ++i) {
      s += (i ? "; " : "") + code.sm90[i].entry + ": " + code.sm90[i].str();
      auto [registers, spills] = i < counts.size() ? counts[i] : std::pair{-1, -1};
      if (registers >= 0) s += ", " + std::to_string(registers) + " registers";
      if (spills >= 0) s += ", " + std::to_string(spills) + " spill bytes";
    }
    if (relocatable && !counts.empty())
      s += " (nvJitLink's relocatable compile, without setmaxnreg; on a GPU the driver compiles it as a whole program)";
    if (code.sm90[0].kind == hopper::LaunchPlan::Attention)
      return s + "; runs when Q, K and V have contiguous rows at 16-byte aligned addresses and strides, and O's "
                 "element pairs are 4-byte aligned";
    if (code.sm90.size() > 1) s += "; each launch takes the tile that leaves the busiest SM least work";
    return s + "; runs when A and B have contiguous rows at 16-byte aligned addresses and pitches";
  }

  /// Registers and spill bytes (stores + loads) of `entry` in a ptxas report; -1 where it
  /// does not say.
  static std::pair<int, int> countsIn(const std::string& log, const std::string& entry) {
    CubinResult c;
    parsePtxasInfo(log, entry, c);
    return {c.registers, c.spillBytes()};
  }
  static void addNotes(KernelReport& r, const std::string& log) {
    appendPtxasNotes(r.ptxas_notes, log);
  }
  /// The report's figures from ptxas's report in `c` (the portable kernel's registers and
  /// spills, its notes); each twin's registers and spill bytes, in code.sm90's order.
  static std::vector<std::pair<int, int>> reportFrom(KernelReport& r, const CubinResult& c, const DeviceCode& code) {
    r.registers = c.registers;
    r.spill_bytes = c.spillBytes();
    addNotes(r, c.info_log);
    std::vector<std::pair<int, int>> counts;
    for (const hopper::LaunchPlan& plan : code.sm90) counts.push_back(countsIn(c.info_log, plan.entry));
    return counts;
  }

  /// Whether a module with an sm_90a twin is kept as PTX for the driver's whole-program JIT
  /// (on a GPU, and compiling for deploy), rather than made a cubin by nvJitLink.
  bool twinsForDriver() const {
    return state->twinJit != CudaState::TwinJit::NvJitLink && (!state->compile_only || state->options.deploy_entries);
  }

  std::unique_ptr<kd::CompiledImpl> compile(const Kernel& kernel) override {
    std::vector<std::pair<int, int>> twinCounts; // registers, spill bytes per twin
    auto out = std::make_unique<CudaKernel>();
    out->state = state;
    out->sig = kernel.signature();
    out->backend = Backend::cuda;
    CompileOptions options = compileOptions();
    // A module the driver JIT-compiles whole (below) leaves its portable fallback to a
    // module of its own, compiled on a thread while the twin loads and runs.
    options.splitPortable = twinsForDriver();
    out->code = compileToPtx(kernel, options);
    out->times = out->code.times;
    KernelReport& r = out->report;
    r.target = state->arch;
    r.shared_bytes = out->code.shared_bytes;
    r.threads = int(out->code.threads);
    r.grid = out->code.grid.str();

    auto t0 = std::chrono::steady_clock::now();
    kd::NvtxRange phase("assemble", kernel.name());
    std::string why;
    std::vector<char> image;
    // The twin's setmaxnreg (producer down to 24 registers, consumers up to 240) holds only
    // in a whole-program compile: nvJitLink, like the driver's cuLink, compiles PTX as
    // relocatable code and drops it (C7504), and a 128 x 256 tile then spills. With a GPU,
    // a module with a twin goes to the driver's JIT (cuModuleLoadDataEx compiles whole
    // programs); the kernel cache keeps its PTX, and the driver caches the machine code.
    // (Compiling for deploy without a GPU, the same: those are the entries a GPU runtime
    // looks up, and its driver compiles them when it loads them.)
    const bool wholeProgram = !out->code.sm90.empty() && twinsForDriver();
    if (wholeProgram) {
      r.compiler = (state->compile_only ? std::string("CUDA driver PTX JIT at load")
                                        : "CUDA driver PTX JIT " + formatDriverVersion(state->device.driver_version)) +
                   " (whole program, for the sm_90a twin's register split)";
      if (out->code.portable_ptx.valid())
        r.compiler += "; its portable fallback compiled on a second thread, waited for when a launch needs it";
      if (state->compile_only && !state->ptxas) r.compiler += "; no machine code ahead of time: " + state->ptxasWhy;
    } else if (nvJitLinkAvailable(&why)) {
      CubinResult cubin = ptxToCubin(out->code.ptx, state->arch, kernel.name());
      image = std::move(cubin.cubin);
      r.compiler = cubin.compiler;
      twinCounts = reportFrom(r, cubin, out->code);
    } else if (state->compile_only) {
      throw Error(ErrorKind::Unsupported, "kernel '" + kernel.name() + "': no cubin without nvJitLink (" + why + ")");
    } else {
      r.compiler = "CUDA driver PTX JIT (nvJitLink unavailable: " + why + ")";
    }
    out->times.assemble_ms = kd::msSince(t0);
    out->binary.assign(image.begin(), image.end());
    r.sm90 = describeSm90(out->code, twinCounts, !wholeProgram);
    out->cacheMeta = {{"entry", kernel.name()}, {"threads", out->code.threads},
                      {"shared_bytes", out->code.shared_bytes}, {"grid", out->code.grid.toJson()},
                      {"payload", image.empty() ? "ptx" : "cubin"}};
    if (!out->code.sm90.empty()) {
      nlohmann::json twins = nlohmann::json::array();
      for (const hopper::LaunchPlan& plan : out->code.sm90) twins.push_back(plan.toJson());
      out->cacheMeta["sm90"] = twins;
    }
    if (image.empty()) out->binary = out->code.ptx; // what the cache keeps: the driver JITs it
    std::function<std::string()> fallback; // the portable kernel's PTX, when LLVM has made it
    if (out->code.portable_ptx.valid())
      fallback = [made = out->code.portable_ptx, name = kernel.name(), arch = state->arch] {
        const std::optional<std::string>& ptx = made.get();
        if (!ptx)
          throw Error(ErrorKind::CompileFailed, "kernel '" + name + "': PTX generation for " + arch +
                                                    " failed for its portable kernel");
        return *ptx;
      };
    if (state->compile_only) { // for deploy: machine code where ptxas can make it, else what a GPU runtime keeps (below)
      if (wholeProgram && state->ptxas && machineCodeAhead(*out, fallback, kernel.name())) return out;
      joinCachedModules(*out, fallback);
      return out;
    }

    // The toolkit's ptxas in place of the driver's JIT where there is one (twinsByPtxas):
    // the cache keeps its machine code, which a disk hit loads without a JIT, whatever the
    // driver's own cache holds.
    const bool machineCode = wholeProgram && state->twinsByPtxas() && machineCodeAhead(*out, fallback, kernel.name());
    const bool jit = image.empty() && !machineCode;

    t0 = std::chrono::steady_clock::now();
    phase.next("load");
    state->context.makeCurrent();
    if (out->code.shared_bytes > state->device.max_smem_per_block_optin)
      throw Error(ErrorKind::Unsupported,
                  "kernel '" + kernel.name() + "' needs " + std::to_string(out->code.shared_bytes) +
                      " bytes of shared memory per CTA; " + state->device.name + " allows " +
                      std::to_string(state->device.max_smem_per_block_optin) +
                      " (smaller tiles or fewer pipeline stages need less)");
    if (machineCode) // one cubin: the twins and the portable kernel
      loadModule(*out, out->binary, /*isPtx=*/false, kernel.name());
    else
      loadModule(*out, out->binary, jit, kernel.name(), out->code.more_ptx, fallback, /*firstCompile=*/true);
    if (jit) {
      // The driver's JIT compiled it. Its log has ptxas's report, unless the driver found
      // the machine code in its own cache (then the log is empty): no local memory then
      // still proves no spills. (Each module's log names its own entries.)
      std::string log = out->module.jitLog();
      for (const Module& more : out->moreModules) log += "\n" + more.jitLog();
      if (out->module.jitLog().empty()) log.clear();
      // An empty log: nothing was compiled now. Say so, or a cold compile's figures (its
      // load phase) would pass for a first compile on this GPU.
      if (log.empty()) r.compiler += "; " + std::string(kDriverCacheHit);
      auto fromFunction = [](std::pair<int, int> c, CUfunction f) {
        FunctionInfo fi = queryFunction(f);
        if (c.first < 0) c.first = fi.registers;
        if (c.second < 0 && fi.local_bytes == 0) c.second = 0;
        return c;
      };
      if (out->function) std::tie(r.registers, r.spill_bytes) = fromFunction(countsIn(log, kernel.name()), out->function);
      addNotes(r, log);
      twinCounts.clear();
      for (size_t i = 0; i < out->code.sm90.size(); ++i) {
        std::pair<int, int> c = countsIn(log, out->code.sm90[i].entry);
        twinCounts.push_back(i < out->sm90.size() ? fromFunction(c, out->sm90[i]) : c);
      }
      if (!out->code.sm90.empty()) r.sm90 = describeSm90(out->code, twinCounts);
    }
    if (r.registers < 0 && out->function) r.registers = queryFunction(out->function).registers;
    out->times.load_ms = kd::msSince(t0);
    if (!machineCode) joinCachedModules(*out, fallback); // (the fallback's PTX is made by now, as a rule)
    return out;
  }

  /// Compiling for deploy (or on a GPU, where twinsByPtxas) with the toolkit's ptxas:
  /// the twins' modules and the portable fallback's joined into one and compiled as a whole
  /// program (as the driver's JIT would on the GPU: the twins keep their register split), so
  /// the entry holds machine code a GPU runtime loads in milliseconds instead of JIT-compiling
  /// its PTX (about a second for a GEMM's). False, leaving the entry PTX, where the modules
  /// cannot be joined or ptxas fails (then with a warning).
  /// The threads ptxas splits a deploy entry over (fewer where compile_threads says so).
  static constexpr int kDeploySplit = 8;
  bool machineCodeAhead(CudaKernel& k, const std::function<std::string()>& fallback, const std::string& name) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> more = k.code.more_ptx;
    if (fallback) more.push_back(fallback());
    std::optional<std::string> joined = joinForJit(k.binary, more);
    if (!joined) {
      k.report.compiler += "; no machine code ahead of time: its PTX modules do not join into one for ptxas";
      return false;
    }
    // For deploy, ptxas splits the entries over a fixed number of threads: its split compile
    // lays the ELF out by that count (never by the machine), so an entry is the same bytes on
    // every build machine for the same compile_threads. The machine code is the same for any
    // count (each entry's .text byte for byte, 1 and 8 threads, 2026-12-05). On a GPU: as
    // many as compile_threads (0: every core), as the driver's JIT would.
    const int threads = state->options.compile_threads;
    const int split = !state->compile_only ? threads : threads > 0 && threads < kDeploySplit ? threads : kDeploySplit;
    CubinResult c;
    try {
      c = ptxasCompile(*state->ptxas, *joined, state->arch, name, split);
    } catch (const Error& e) { // the PTX entry still serves: the GPU's driver compiles it
      kd::logWarn("kernel '" + name + "': ptxas failed, so its PTX goes to the " +
                  (state->compile_only ? "GPU's driver" : "driver's JIT") + ": " + e.what());
      k.report.compiler += (state->compile_only ? "; no machine code ahead of time: " : "; ptxas failed, the driver's JIT instead: ") +
                           std::string(e.what());
      return false;
    }
    KernelReport& r = k.report;
    r.compiler = c.compiler + (state->compile_only ? " ahead of time (whole program, for the sm_90a twin's register "
                                                     "split; machine code a GPU runtime loads without a JIT)"
                                                   : " (whole program, for the sm_90a twin's register split; "
                                                     "in place of the driver's JIT: the cache keeps machine code)");
    r.ptxas_notes.clear();
    r.sm90 = describeSm90(k.code, reportFrom(r, c, k.code));
    k.binary.assign(c.cubin.begin(), c.cubin.end());
    k.cacheMeta["payload"] = "cubin";
    k.times.assemble_ms += kd::msSince(t0);
    return true;
  }

  /// What the cache keeps of a kernel split into modules for the driver: the first twin's
  /// PTX, the other twins', then the fallback's (waited for), each at the byte its
  /// metadata names. A kernel of one module keeps its image as it is.
  static void joinCachedModules(CudaKernel& k, const std::function<std::string()>& fallback) {
    if (k.code.more_ptx.empty() && !fallback) return;
    k.binary = joinPtxModules({k.binary, k.code.more_ptx, fallback ? std::optional<std::string>(fallback()) : std::nullopt},
                              k.cacheMeta);
  }

  Fingerprint fingerprint() override {
    Fingerprint f;
    f.backend = "cuda";
    f.target = state->arch;
    std::string why;
    f.compiler = nvJitLinkAvailable(&why) ? nvJitLinkVersionString() : "driver PTX JIT";
    if (state->compile_only) {
      f.device = "none (compile-only)";
      return f;
    }
    f.device = state->device.name;
    f.sm_count = state->device.sm_count;
    f.driver = formatDriverVersion(state->device.driver_version);
    return f;
  }

  nlohmann::json cacheKeyInputs() override {
    std::string why;
    // The PTX compiler decides the machine code: nvJitLink's version, or the driver's when
    // it JIT-compiles (then the cache holds PTX and the driver's version is part of the key).
    std::string ptxCompiler = nvJitLinkAvailable(&why) ? nvJitLinkVersionString()
                              : state->compile_only ? std::string("none")
                                                    : "driver JIT " + formatDriverVersion(state->device.driver_version);
    // Modules with a twin are kept as PTX, for the driver's JIT (see compile()). Not its
    // version: the entry holds PTX, which any driver of the PTX's ISA loads, so an entry
    // made for deploy without a GPU (RuntimeOptions::deploy_entries) serves every GPU
    // machine with the same kiln and toolkit. (A driver too old for the PTX fails the
    // load, and the entry is then recompiled and replaced.)
    if (twinsForDriver() && cudaTarget(state->arch).wgmma && state->options.hopper_gemm)
      ptxCompiler += "; twins: PTX for the driver's JIT";
    nlohmann::json key = {{"backend", "cuda"}, {"arch", state->arch}, {"num_warps", state->options.num_warps},
                          {"hopper_gemm", state->options.hopper_gemm}, {"hopper_tile_n", state->options.hopper_tile_n},
                          {"hopper_stages", state->options.hopper_stages},
                          {"hopper_cluster", state->options.hopper_cluster},
                          {"ptx_compiler", ptxCompiler}};
    // Only when set: the keys of cache entries made before the option existed stay valid.
    if (state->options.hopper_raster) key["hopper_raster"] = state->options.hopper_raster;
    if (state->options.hopper_tile_m) key["hopper_tile_m"] = state->options.hopper_tile_m;
    if (state->options.hopper_cluster_m) key["hopper_cluster_m"] = true;
    if (state->hopperDecodeRows != hopper::kDecodeRows) key["hopper_decode_rows"] = state->hopperDecodeRows;
    if (state->hopperWideRows != hopper::kWideRows) key["hopper_wide_rows"] = state->hopperWideRows;
    return key;
  }

  std::unique_ptr<kd::CompiledImpl> loadCached(const KernelSignature& sig, const std::string& payload,
                                               const nlohmann::json& meta) override {
    auto out = std::make_unique<CudaKernel>();
    out->state = state;
    out->code.name = meta.at("entry").get<std::string>();
    out->code.threads = kd::jsonInt<int64_t>(meta.at("threads"));
    out->code.shared_bytes = kd::jsonInt<int64_t>(meta.at("shared_bytes"));
    out->code.grid = kd::GridPlan::fromJson(meta.at("grid"));
    out->code.arch = state->arch;
    if (meta.contains("sm90")) { // one plan (entries before twins came in widths) or a list
      const nlohmann::json& twins = meta.at("sm90");
      if (twins.is_array())
        for (const nlohmann::json& plan : twins) out->code.sm90.push_back(hopper::LaunchPlan::fromJson(plan));
      else
        out->code.sm90.push_back(hopper::LaunchPlan::fromJson(twins));
    }
    if (out->code.name != sig.name)
      throw Error(ErrorKind::InvalidArgument, "cache entry holds kernel '" + out->code.name + "', not '" + sig.name + "'");
    if (state->compile_only) return out;
    state->context.makeCurrent();
    if (out->code.shared_bytes > state->device.max_smem_per_block_optin)
      throw Error(ErrorKind::Unsupported, "cached kernel '" + sig.name + "' needs more shared memory than " +
                                              state->device.name + " has");
    const bool isPtx = meta.value("payload", "cubin") == "ptx";
    PtxModules modules = splitPtxModules(payload, meta, isPtx, sig.name);
    std::function<std::string()> fallback;
    if (modules.portable) fallback = [ptx = std::move(*modules.portable)] { return ptx; };
    loadModule(*out, modules.first, isPtx, sig.name, modules.twins, fallback);
    return out;
  }

  std::unique_ptr<kd::HandwrittenImpl> compileCuda(const CudaSource& src) override {
    auto out = std::make_unique<CudaHandwritten>();
    out->state = state;
    out->entry = src.entry;
    out->label = "hand-written kernel '" + src.entry + "' (" + src.name + ")";
    NvrtcResult r = compileCudaSource(src.name, src.code, src.entry, state->arch, src.options);
    out->times.nvrtc_ms = r.ms;
    out->log = r.log;
    out->binary.assign(r.cubin.begin(), r.cubin.end());
    out->report.target = state->arch;
    out->report.compiler = r.compiler;
    out->report.threads = 0;
    if (state->compile_only) return out;
    auto t0 = std::chrono::steady_clock::now();
    state->context.makeCurrent();
    out->module = Module(r.cubin, src.name);
    out->function = out->module.getFunction(src.entry);
    FunctionInfo fi = queryFunction(out->function);
    out->report.registers = fi.registers;
    out->max_threads = fi.max_threads_per_block;
    out->static_smem = fi.static_smem_bytes;
    for (size_t i = 0;; ++i) {
      size_t offset = 0, size = 0;
      CUresult rc = driver().cuFuncGetParamInfo(out->function, i, &offset, &size);
      if (rc == CUDA_ERROR_INVALID_VALUE) break; // past the last parameter
      KILN_CU_CHECK_CTX(rc, out->label + ": reading its parameter list");
      out->param_sizes.push_back(size);
    }
    out->times.load_ms = kd::msSince(t0);
    return out;
  }

  // Loads the cubin (or PTX for the driver's JIT) and finds the entries; a context is
  // current. With `portablePtx`, the image holds the twins only, and the portable kernel
  // is compiled from that PTX on a thread of its own, started first.
  // (A first compile hands it to nvJitLink, a cache hit to the driver, whose own disk cache
  // then answers in later processes: BackgroundModule::Compiler.)
  // With `more` (PTX), the twins past the first are in modules of their own, one each
  // (LLVM made them on threads of their own); the driver's JIT gets them joined into one
  // module, which its split compile spreads over compile_threads (separate modules it
  // compiles one at a time whatever the threads: H200, 2026-12-03, nine modules on nine
  // threads took as long as one module of nine), or, where they cannot be joined, in turn.
  void loadModule(CudaKernel& k, const std::string& image, bool isPtx, const std::string& name,
                  const std::vector<std::string>& more = {}, const std::function<std::string()>& portablePtx = {},
                  bool firstCompile = false) {
    // (The fallback's module holds one entry, which a split compile cannot spread.)
    if (portablePtx)
      k.portable = BackgroundModule([s = state] { s->context.makeCurrent(); }, portablePtx, state->arch, name,
                                    k.code.shared_bytes,
                                    firstCompile ? BackgroundModule::Compiler::NvJitLink : BackgroundModule::Compiler::Driver);
    const int jitThreads = state->options.compile_threads;
    if (std::optional<std::string> joined = isPtx && !more.empty() ? joinForJit(image, more) : std::nullopt) {
      k.module = Module(*joined, name, jitThreads);
    } else {
      k.module = isPtx ? Module(image, name, jitThreads) : Module(std::vector<char>(image.begin(), image.end()), name);
      for (const std::string& ptx : more) k.moreModules.push_back(Module(ptx, name, jitThreads));
    }
    if (!k.moreModules.empty() && k.moreModules.size() + 1 != k.code.sm90.size())
      throw Error(ErrorKind::InvalidArgument, "kernel '" + name + "': " + std::to_string(k.moreModules.size() + 1) +
                                                  " twin modules for " + std::to_string(k.code.sm90.size()) + " twins");
    if (!k.portable) {
      k.function = k.module.getFunction(name);
      if (k.code.shared_bytes > 0) setMaxDynamicSharedMemory(k.function, int(k.code.shared_bytes), name);
    }
    // A twin the device cannot host (too much shared memory) is simply not used.
    for (const hopper::LaunchPlan& plan : k.code.sm90)
      if (plan.sharedBytes > state->device.max_smem_per_block_optin) return;
    for (hopper::LaunchPlan& plan : k.code.sm90) {
      const size_t i = k.sm90.size(); // twin i is in module i where each has its own
      k.sm90.push_back((i == 0 || k.moreModules.empty() ? k.module : k.moreModules[i - 1]).getFunction(plan.entry));
      setMaxDynamicSharedMemory(k.sm90.back(), int(plan.sharedBytes), plan.entry);
      // K-clusters: how many of each size fit at once (a cluster lives in one GPC, whose
      // SMs need not divide by its size), so a persistent launch never leaves one waiting.
      // (A GEMM's split takes powers of two; attention's key splits any size.)
      if (plan.kClusters())
        for (int64_t s = 0; s <= plan.kCluster; ++s)
          plan.clusterSlots.push_back(s < 2 || (plan.kind != hopper::LaunchPlan::Attention && (s & (s - 1)))
                                          ? 0
                                          : maxActiveClusters(k.sm90.back(), unsigned(s), unsigned(plan.threads),
                                                              unsigned(plan.sharedBytes)));
      // A twin in clusters: how many of its clusters fit at once (its persistent grid).
      else if (plan.cluster > 1) {
        plan.clusterSlots.assign(size_t(plan.cluster) + 1, 0);
        plan.clusterSlots.back() =
            maxActiveClusters(k.sm90.back(), unsigned(plan.cluster), unsigned(plan.threads), unsigned(plan.sharedBytes));
      }
    }
  }

  std::string emit(const Kernel& kernel, Stage stage) override {
    if (stage == Stage::tile) return kernel.tile_ir();
    std::string dump;
    DeviceCode code = compileToPtx(kernel, compileOptions(), stage, &dump);
    if (stage == Stage::mlir || stage == Stage::llvm || stage == Stage::layouts) return dump;
    if (stage == Stage::ptx) return code.ptx;
    CubinResult cubin = ptxToCubin(code.ptx, state->arch, kernel.name());
    return std::string(cubin.cubin.begin(), cubin.cubin.end());
  }

  std::unique_ptr<kd::DeviceTensorImpl> allocate(DType dt, const std::vector<int64_t>& dims) override {
    needDevice("allocate device memory");
    auto t = std::make_unique<CudaTensor>();
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    state->context.makeCurrent();
    t->buffer = DeviceBuffer(size_t(n * size_of(dt)));
    if (n > 0) t->buffer.fillBytes(0);
    t->view = TensorView{reinterpret_cast<void*>(t->buffer.ptr()), dt, dims, {}};
    return t;
  }
  void upload(const HostTensor& from, kd::DeviceTensorImpl& to) override {
    state->context.makeCurrent();
    auto& t = static_cast<CudaTensor&>(to);
    if (from.numel() > 0) t.buffer.upload(from.data(), size_t(from.numel() * size_of(from.dtype())));
  }
  void download(const kd::DeviceTensorImpl& from, HostTensor& to) override {
    state->context.makeCurrent();
    auto& t = static_cast<const CudaTensor&>(from);
    if (to.numel() > 0) t.buffer.download(to.data(), size_t(to.numel() * size_of(to.dtype())));
  }
  void synchronize() override {
    needDevice("synchronize");
    state->context.synchronize();
  }
  std::vector<double> time(const std::function<void()>& run, int reps, int warmup, bool flushCache) override {
    needDevice("time kernels");
    state->context.makeCurrent();
    return timeOn(nullptr, run, reps, warmup, flushCache); // the legacy stream, where `run` enqueues
  }

  /// `once` timed `reps` times with CUDA events on `stream` (where it enqueues), after `warmup`
  /// untimed calls; with `flushCache`, a read of 512 MiB empties the GPU's L2 and leaves it
  /// clean before each (CacheFlush.h), ordered before the events on the same stream.
  std::vector<double> timeOn(CUstream stream, const std::function<void()>& once, int reps, int warmup,
                             bool flushCache) {
    std::optional<L2Flush> flush;
    if (flushCache) flush.emplace(state->device.sm_count);
    for (int i = 0; i < warmup; ++i) once();
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      if (flush) flush->run(stream);
      Event a, b;
      a.record(stream);
      once();
      b.record(stream);
      b.synchronize();
      ms.push_back(Event::elapsedMs(a, b));
    }
    return ms;
  }

  std::vector<double> timeStream(const std::function<void(void*)>& run, int reps, int warmup, bool flushCache,
                                 bool graph) override {
    needDevice("time kernels");
    state->context.makeCurrent();
    Stream stream(CU_STREAM_NON_BLOCKING);
    CUstream s = stream.get();
    const Driver& d = driver();
    // The graph: run() captured once (global mode: anything in it that synchronises or
    // allocates ends the capture with an error, which is the point of measuring it).
    Handle<CUgraph, DestroyGraph> captured;
    Handle<CUgraphExec, DestroyGraphExec> exec;
    if (graph) {
      run(s); // once outside the capture: lazy loads and first-use allocations happen here
      KILN_CU_CHECK_CTX(d.cuStreamSynchronize(s), "profile::time_stream: the run before capturing");
      KILN_CU_CHECK_CTX(d.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), "profile::time_stream: capturing");
      std::exception_ptr failed;
      try {
        run(s);
      } catch (...) {
        failed = std::current_exception();
      }
      const CUresult ended = d.cuStreamEndCapture(s, captured.out());
      if (failed) std::rethrow_exception(failed);
      KILN_CU_CHECK_CTX(ended, "profile::time_stream: ending the capture (something in the work cannot be captured)");
      KILN_CU_CHECK_CTX(d.cuGraphInstantiateWithFlags(exec.out(), captured.get(), 0),
                        "profile::time_stream: instantiating the graph");
    }
    return timeOn(s, [&] {
      if (exec) KILN_CU_CHECK_CTX(d.cuGraphLaunch(exec.get(), s), "profile::time_stream: launching the graph");
      else run(s);
    }, reps, warmup, flushCache);
  }

  void gpuGemm(const kd::GpuGemmArgs& g) override {
    needDevice("run cuBLASLt");
    state->context.makeCurrent();
    auto matrix = [&](const char* name, const kd::GemmOperand& m) {
      const TensorView v{m.data, g.dtype, {m.rows, m.cols}, {m.ld, 1}};
      checkDevicePointer(*state, v, std::string("reference::gpu_gemm: argument '") + name + "'");
      return RowMajorMatrix{reinterpret_cast<CUdeviceptr>(m.data), m.rows, m.cols, m.ld};
    };
    GemmProblem p;
    p.dtype = g.dtype;
    p.a = matrix("A", g.a);
    p.b = matrix("B", g.b);
    p.d = matrix("C", g.c);
    p.epilogue = g.epilogue == reference::Epilogue::none        ? GemmEpilogue::none
                 : g.epilogue == reference::Epilogue::bias_relu ? GemmEpilogue::bias_relu
                 : g.epilogue == reference::Epilogue::bias_gelu ? GemmEpilogue::bias_gelu
                                                                : GemmEpilogue::bias;
    if (g.residual.data) p.residual = matrix("residual", g.residual);
    if (p.epilogue != GemmEpilogue::none) p.bias = matrix("bias", {const_cast<void*>(g.bias), 1, g.c.cols, g.c.cols}).ptr;

    std::lock_guard<std::mutex> lock(state->cublas_mutex);
    if (!state->cublas) {
      state->cublas = std::make_unique<CublasLtGemm>();
      meter->add(int64_t(CublasLtGemm::kWorkspaceBytes)); // held until the runtime goes
    }
    auto stream = static_cast<CUstream>(g.stream); // nullptr: the legacy stream, as CompiledKernel::launch(args)
    state->cublas->run(p, stream);
    if (g.wait)
      KILN_CU_CHECK_CTX(driver().cuStreamSynchronize(stream), "running the cuBLASLt GEMM of reference::gpu_gemm");
  }

  void gpuAttention(const kd::GpuAttentionArgs& a) override {
    needDevice("run cuDNN");
    state->context.makeCurrent();
    const std::string who = std::string(a.offsets.data ? "reference::gpu_attention_packed"
                                        : a.lens.data  ? "reference::gpu_attention_padded"
                                                       : "reference::gpu_attention") +
                            ": argument '";
    checkDevicePointer(*state, a.q, who + "Q'");
    checkDevicePointer(*state, a.k, who + "K'");
    checkDevicePointer(*state, a.v, who + "V'");
    checkDevicePointer(*state, a.o, who + "O'");
    if (a.lse.data) checkDevicePointer(*state, a.lse, who + "LSE'");
    if (a.lens.data) checkDevicePointer(*state, a.lens, who + "lens'");
    if (a.offsets.data) checkDevicePointer(*state, a.offsets, who + "offsets'");
    const bool packed = a.offsets.data != nullptr;
    // Packed [heads, T, D] as cuDNN's [B, heads, max_len, D]: each sequence from its ragged
    // offset, so the batch stride is never used (max_len rows of the sequence dim's stride).
    auto strides = [&](const TensorView& v) {
      const std::vector<int64_t> s = v.effective_strides();
      if (packed) return std::array<int64_t, 4>{a.maxLen * s[1], s[0], s[1], s[2]};
      return std::array<int64_t, 4>{s[0], s[1], s[2], s[3]};
    };
    cudnn::AttentionShape shape;
    shape.dtype = a.q.dtype;
    if (packed) {
      shape.B = a.offsets.dims[0] - 1, shape.H = a.q.dims[0], shape.T = a.maxLen, shape.D = a.q.dims[2];
      shape.G = a.k.dims[0], shape.S = a.maxLen;
    } else {
      shape.B = a.q.dims[0], shape.H = a.q.dims[1], shape.T = a.q.dims[2], shape.D = a.q.dims[3];
      shape.G = a.k.dims[1], shape.S = a.k.dims[2];
    }
    shape.q = strides(a.q), shape.k = strides(a.k), shape.v = strides(a.v), shape.o = strides(a.o);
    shape.causal = a.causal;
    shape.padded = a.lens.data != nullptr || packed;
    shape.ragged = packed;
    shape.stats = a.lse.data != nullptr;
    shape.scale = float(1.0 / std::sqrt(double(shape.D)));
    auto ptr = [](const TensorView& v) { return reinterpret_cast<CUdeviceptr>(v.data); };
    CudnnAttention::Pointers p{ptr(a.q), ptr(a.k), ptr(a.v), ptr(a.o), ptr(a.lse), ptr(a.lens)};
    p.offsets = ptr(a.offsets);
    p.tokens = packed ? a.q.dims[1] : 0;

    std::lock_guard<std::mutex> lock(state->cudnn_mutex);
    if (!state->cudnn) state->cudnn = std::make_unique<CudnnAttention>();
    const size_t held = state->cudnn->workspaceBytes();
    auto stream = static_cast<CUstream>(a.stream);
    state->cudnn->run(shape, p, stream);
    meter->add(int64_t(state->cudnn->workspaceBytes()) - int64_t(held)); // held until the runtime goes
    if (a.wait) KILN_CU_CHECK_CTX(driver().cuStreamSynchronize(stream), "running cuDNN's attention");
  }

private:
  void needDevice(const char* what) {
    if (state->compile_only)
      throw Error(ErrorKind::Unsupported, std::string("cannot ") + what + ": this CUDA runtime is compile-only (no GPU)");
  }
};

/// A cubin for sm_XY runs on devices of the same major version and minor >= Y; an
/// arch-specific 'a' cubin only on exactly that compute capability.
void checkRunsOn(const std::string& arch, const DeviceInfo& dev) {
  int num = std::stoi(arch.substr(3, arch.size() - 3 - (arch.back() == 'a')));
  int major = num / 10, minor = num % 10;
  bool exact = arch.back() == 'a';
  bool ok = major == dev.cc_major && (exact ? minor == dev.cc_minor : minor <= dev.cc_minor);
  if (!ok)
    throw Error(ErrorKind::Unsupported, "code for " + arch + " cannot run on " + dev.name + " (compute capability " +
                                            std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor) +
                                            "); leave the arch unset to compile for the device (" + dev.arch() +
                                            "), or use a compile-only runtime");
}

} // namespace

} // namespace kiln::cuda

namespace kiln::detail {

bool cudaAvailable(std::string* why) {
  if (!cuda::available(why)) return false;
  if (cuda::deviceCount() == 0) {
    if (why) *why = "the CUDA driver sees no GPU";
    return false;
  }
  return true;
}

std::shared_ptr<RuntimeImpl> makeCudaRuntime(const RuntimeOptions& options) {
  // The PTX compiler belongs to import: it loads (~5 ms) while the driver and the context
  // come up, so neither the first compile nor a cache lookup (whose key names its version)
  // pays for it. Joined on every way out.
  struct Joiner {
    std::thread t;
    ~Joiner() {
      if (t.joinable()) t.join();
    }
  } preload{std::thread([] {
    std::string why;
    cuda::nvJitLinkAvailable(&why);
  })};
  if (options.hopper_split_k < 0 || options.hopper_split_k > 16)
    throw Error(ErrorKind::InvalidArgument,
                "RuntimeOptions::hopper_split_k must be 0 (kiln's choice), 1 (never) or 2..16 chunks, got " +
                    std::to_string(options.hopper_split_k));
  auto state = std::make_shared<cuda::CudaState>();
  state->options = options;
  // The environment can set the sm_90a twin where the options leave the defaults: A/B
  // comparisons without rebuilding the engine. Each variable takes one of a few words.
  auto env = [](const char* name, std::initializer_list<const char*> allowed) -> std::optional<std::string> {
    const char* e = std::getenv(name);
    if (!e) return std::nullopt;
    std::string list; // "a, b or c"
    for (const char* a : allowed) {
      if (std::string(e) == a) return std::string(e);
      list += std::string(list.empty() ? "" : a == *(allowed.end() - 1) ? " or " : ", ") + a;
    }
    throw Error(ErrorKind::InvalidArgument, std::string(name) + " is '" + e + "'; expected " + list);
  };
  if (auto v = env("KILN_HOPPER_GEMM", {"on", "off"}); v && options.hopper_gemm) state->options.hopper_gemm = *v == "on";
  if (const char* e = std::getenv("KILN_HOPPER_PERSISTENT")) state->hopperPersistent = std::string(e) != "off";
  if (auto v = env("KILN_HOPPER_MAP_CACHE", {"on", "off"})) state->keepTensorMaps = *v == "on";
  if (auto v = env("KILN_HOPPER_DECODE", {"on", "off", "16", "32", "48", "64"}))
    state->hopperDecodeRows = *v == "off" ? 0 : *v == "on" ? hopper::kDecodeRows : std::stoi(*v);
  if (auto v = env("KILN_HOPPER_WIDE", {"on", "off"})) state->hopperWideRows = *v == "off" ? 0 : hopper::kWideRows;
  using TwinJit = cuda::CudaState::TwinJit;
  if (auto v = env("KILN_HOPPER_JIT", {"auto", "driver", "nvjitlink", "ptxas"}))
    state->twinJit = *v == "auto" ? TwinJit::Auto : *v == "driver" ? TwinJit::Driver : *v == "ptxas" ? TwinJit::Ptxas : TwinJit::NvJitLink;
  // KILN_HOPPER_SPLIT_K: a mode, or as RuntimeOptions::hopper_split_k a number of chunks.
  if (auto v = env("KILN_HOPPER_SPLIT_K", {"auto", "off", "on", "1", "2", "3", "4", "8", "16"})) {
    if (std::isdigit(static_cast<unsigned char>((*v)[0]))) {
      if (options.hopper_split_k == 0) state->options.hopper_split_k = std::stoi(*v);
    } else {
      state->hopperSplitK = *v == "off" ? hopper::SplitK::Off : *v == "on" ? hopper::SplitK::On : hopper::SplitK::Auto;
    }
  }
  if (auto v = env("KILN_HOPPER_TILE_N", {"0", "128", "192", "256"}); v && options.hopper_tile_n == 0)
    state->options.hopper_tile_n = std::stoi(*v);
  if (auto v = env("KILN_HOPPER_CLUSTER_M", {"on", "off"}); v && !options.hopper_cluster_m)
    state->options.hopper_cluster_m = *v == "on";
  if (auto v = env("KILN_HOPPER_TILE_M", {"0", "64", "128", "256"}); v && options.hopper_tile_m == 0)
    state->options.hopper_tile_m = std::stoi(*v);
  if (auto v = env("KILN_HOPPER_CLUSTER", {"0", "1", "2", "4"}); v && options.hopper_cluster == 0)
    state->options.hopper_cluster = std::stoi(*v);
  if (auto v = env("KILN_HOPPER_RASTER", {"0", "1", "2", "4", "8", "16", "32", "64"}); v && options.hopper_raster == 0)
    state->options.hopper_raster = std::stoi(*v);
  if (auto v = env("KILN_HOPPER_STAGES", {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}); v && options.hopper_stages == 0)
    state->options.hopper_stages = std::stoi(*v);
  state->compile_only = options.compile_only;
  auto rt = std::make_shared<cuda::CudaRuntime>();
  rt->backend = Backend::cuda;
  rt->state = state;
  state->meter = rt->meter;
  if (options.compile_only) {
    state->arch = options.arch.empty() ? cuda::kDefaultOfflineArch : options.arch;
    cuda::checkArch(state->arch);
    if (options.deploy_entries) state->lookForPtxas();
    rt->description = "cuda compile-only (" + state->arch + ", no device)";
    return rt;
  }
  cuda::driver(); // throws kiln::Error(Unsupported) saying why there is no driver or GPU
  int count = cuda::deviceCount();
  if (options.device < 0 || options.device >= count)
    throw Error(ErrorKind::Unsupported, "CUDA device " + std::to_string(options.device) + " does not exist (" +
                                            std::to_string(count) + " visible)");
  state->device = cuda::queryDevice(options.device);
  if (state->device.cc_major < 8)
    throw Error(ErrorKind::Unsupported, state->device.name + " has compute capability " +
                                            std::to_string(state->device.cc_major) + "." +
                                            std::to_string(state->device.cc_minor) +
                                            "; kiln's CUDA backend needs 8.0 (Ampere) or newer");
  state->arch = options.arch.empty() ? state->device.arch() : options.arch;
  cuda::checkArch(state->arch);
  cuda::checkRunsOn(state->arch, state->device);
  state->context = cuda::Context(options.device, options.reset_after_fault);
  if (state->twinJit == TwinJit::Ptxas && !state->lookForPtxas())
    throw Error(ErrorKind::InvalidArgument, "KILN_HOPPER_JIT=ptxas, but " + state->ptxasWhy);
  rt->description = "cuda: " + state->device.name + " (" + state->arch + ", " +
                    std::to_string(state->device.sm_count) + " SMs, driver " +
                    cuda::formatDriverVersion(state->device.driver_version) + ")";
  return rt;
}

} // namespace kiln::detail
