#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/cache.hpp"
#include "kiln/export.hpp"
#include "kiln/kernel.hpp"
#include "kiln/tensor.hpp"

namespace kiln {

enum class Backend { automatic, cpu, cuda };
KILN_API const char* to_string(Backend b);
/// "auto", "cpu", "cuda" -> Backend; throws kiln::Error(NotFound) otherwise.
KILN_API Backend parse_backend(const std::string& name);

/// A stage of the compile pipeline whose output can be printed.
enum class Stage {
  tile,  ///< tile IR as traced from the DSL
  /// CUDA: the tile IR with the backend's layouts (tile encodings, tile.convert_layout),
  /// beside the sm_90a twins, before the lowering to GPU kernels
  layouts,
  mlir,  ///< after kiln's tile passes and the backend's lowering to upstream dialects
  llvm,  ///< LLVM IR handed to code generation
  ptx,   ///< CUDA: PTX text
  cubin, ///< CUDA: the cubin (ELF bytes)
};
KILN_API Stage parse_stage(const std::string& name);

struct KILN_API RuntimeOptions {
  int device = 0;            ///< CUDA device ordinal
  /// CUDA: compile to PTX and cubin without a GPU (CI, ahead-of-time checks); launching
  /// is then an error.
  bool compile_only = false;
  /// With compile_only (CUDA): compile each kernel as a runtime on a GPU of `arch` would, so
  /// the disk-cache entries written are the very ones such a runtime looks up: a cache made
  /// at deploy time on a machine without a GPU (`kiln warm`), used on the GPU machines with
  /// the same kiln build and CUDA toolkit (docs/cache.md). sm_90a kernels with a TMA/wgmma
  /// twin are then kept as PTX, as on a GPU, for the driver to compile when it loads them,
  /// so their report gives no register counts (nvJitLink's cubin, the default, does).
  bool deploy_entries = false;
  /// CUDA target: "sm_90a", "sm_80", ... Default: the device's (Hopper and newer get the
  /// arch-specific 'a' variant), or sm_90a when compiling without a GPU.
  std::string arch;
  int num_warps = 4;         ///< CUDA: warps per CTA
  /// The most threads one compile works on at once (0: one per CPU core): LLVM making the
  /// PTX of a kernel's modules (an sm_90a kernel has one per twin), and on a GPU the CUDA
  /// driver's PTX JIT (CU_JIT_SPLIT_COMPILE: the machine code is the same, made sooner).
  /// 1 does each on one thread. An engine that compiles while it serves can keep kiln to a
  /// few cores; each of compile_all's threads may use this many. (Compiling for deploy, the
  /// toolkit's ptxas splits a kernel over a fixed 8 threads where this is 0 or 8 and more,
  /// so its machine code is the same bytes on every build machine; docs/cache.md.)
  int compile_threads = 0;
  /// CUDA sm_90a: give a GEMM-shaped kernel (a k-loop of dot on A and B tiles, then an
  /// elementwise epilogue), and an attention-shaped one (docs/cuda.md), a TMA + wgmma twin
  /// that runs whenever the arguments allow (KernelReport::sm90 says which kernel it is and
  /// when). Off: the portable kernel only. When true, KILN_HOPPER_GEMM=off in the
  /// environment turns it off.
  bool hopper_gemm = true;
  /// The twin's columns of C per CTA: 128 or 256 (that width alone), or 192 (128 x 192 and,
  /// EXPERIMENTAL, 64 x 192 tiles); 0 compiles kiln's own widths (128, 192 and 256: the
  /// 128 x 192 tile alone) and lets each launch take the one that suits the shape
  /// (docs/cuda.md), or KILN_HOPPER_TILE_N when set.
  int hopper_tile_n = 0;
  /// The twin's rows of C per CTA: 128 (two consumer warpgroups; 128 x 128 and 128 x 256
  /// tiles) or 64 (one; a 64 x 128 tile, for shapes with too few 128-row tiles to fill the
  /// GPU); 0 compiles both (and the tall tile below) and lets each launch choose, or
  /// KILN_HOPPER_TILE_M when set.
  /// (With both this and hopper_tile_n 0, kiln also compiles its decode twins, for C of at
  /// most 128 rows, and swapped twins of 128 columns, for C of 129 to 512: docs/cuda.md.)
  /// 64 with hopper_tile_n 256 (EXPERIMENTAL): a ping-pong 64 x 256 tile, two consumer
  /// warpgroups taking the CTA's tiles in turn (one's epilogue beside the other's main
  /// loop); not for kernels whose epilogue reads a residual. About 10% slower than the
  /// default on the H200 (docs/cuda.md). 256: the tall 256 x 128 tile alone, two consumer
  /// warpgroups of 128 rows each (hopper_tile_n 0 or 128, no clusters); kiln's own choice
  /// takes it where it needs fewer rounds of CTAs than the 128 x 256 tile.
  int hopper_tile_m = 0;
  /// The twin's ring of shared-memory stages (TMA loads in flight): 2 up to what fits in
  /// 227 KiB (6 at 128 x 128, 4 at 128 x 256, 8 at 64 x 128; 4 at 128 x 192, 6 at 64 x 192,
  /// 4 at 64 x 256; the least of the tiles compiled); 0 lets kiln choose (the most that fit), or
  /// KILN_HOPPER_STAGES when set.
  int hopper_stages = 0;
  /// The twin's CTAs per thread-block cluster: 1 (none), 2 or 4 (the CTAs take adjacent tiles
  /// and share A's tile by TMA multicast, each loading its share of the rows; with 2 and
  /// hopper_cluster_m, B's); 0 lets kiln choose (every tile alone; the 128 x 128 and 64-row
  /// tiles also in stacked pairs sharing B, and the 128 x 128 one in fours sharing A; each
  /// launch taking what suits its shape), or KILN_HOPPER_CLUSTER when set. EXPERIMENTAL: 2
  /// or 4 for every tile is correct but no faster on most shapes (docs/cuda.md); leave it at
  /// 0 in production.
  int hopper_cluster = 0;
  /// With hopper_cluster 2: a cluster takes vertically adjacent tiles and shares B's tile by
  /// multicast (what cuBLASLt's 64 x 128 kernels do), instead of horizontally adjacent ones
  /// sharing A's. EXPERIMENTAL; KILN_HOPPER_CLUSTER_M=on|off when false.
  bool hopper_cluster_m = false;
  /// The order the twin's persistent CTAs take C's tiles in: in groups of this many tile
  /// rows, column by column inside a group (CTAs running at once then share A and B tiles
  /// in L2). 1 walks C row by row; a group as tall as C, column by column. 1..64; 0 lets
  /// kiln choose (8), or KILN_HOPPER_RASTER when set.
  int hopper_raster = 0;
  /// How the twin cuts tiles along K (split-K; a launch-time choice, not part of the code):
  /// 0 lets kiln choose (the decode twins, for C of at most 64 rows, share each tile among
  /// the 2 or 4 CTAs of a thread-block cluster where the tiles fill under half the SMs; the
  /// others take whole tiles; KILN_HOPPER_SPLIT_K changes that); 1 never cuts; 2..16: the
  /// decode twins in clusters of 2 or 4 (the largest up to it; chunks of at least 4 k-steps),
  /// the others cut the tiles of the last, part-empty round of CTAs into that many chunks
  /// where each keeps 4 k-steps and the workspace holds them (docs/cuda.md). The tuner tries
  /// 1, 2, 4 and 8. The attention twin reads it for its key splits (each program's keys cut
  /// among the CTAs of a cluster of 2, 4 or 8 where its CTAs alone would leave SMs idle, as
  /// in decode): 1 never, 2..16 at most that many parts.
  int hopper_split_k = 0;
  /// CPU backend: the x86-64 CPU the JIT generates code for. Empty means $KILN_CPU, and
  /// when that is unset too, "host" (this machine's CPU and every feature it has). Else a
  /// baseline ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4") or an LLVM CPU name
  /// ("znver3", "sapphirerapids"), to get on this machine the code another one would run.
  /// Runtime::create refuses a CPU that needs instructions this host lacks.
  std::string cpu;
  /// CUDA: if an earlier kernel fault left the device's primary context unusable, reset
  /// it (freeing every allocation in it — the embedding engine's too) rather than refuse.
  /// The driver may still refuse; then the process must restart.
  bool reset_after_fault = false;
  /// The disk kernel cache's directory (kiln/cache.hpp): empty means cache::default_dir()
  /// ($KILN_CACHE_DIR, else ~/.cache/kiln); "off" turns the disk cache off (so does
  /// KILN_CACHE_DIR=off when this is empty).
  std::string cache_dir;
  int64_t cache_max_bytes = int64_t(2) << 30; ///< the disk cache's size limit (LRU eviction)
  bool memory_cache = true;                   ///< reuse kernels this Runtime compiled before
  /// Read the disk cache, never write it: entries are loaded, a kernel it lacks is compiled
  /// and kept in memory only, nothing there is refreshed, evicted or replaced (a cache
  /// shipped with a deploy: `kiln warm`, docs/cache.md). Also in force when
  /// KILN_CACHE_READ_ONLY=1, or when the directory exists and this process may not write
  /// it (a read-only mount): then without a warning per compile.
  bool cache_read_only = false;

  bool operator==(const RuntimeOptions&) const = default;
};

/// Wall-clock milliseconds of each compile phase, from one steady clock.
struct KILN_API CompileTimes {
  double tile_passes_ms = 0;  ///< verify + kiln-expand-composites + canonicalize
  double lowering_ms = 0;     ///< tile -> loops or GPU kernels -> LLVM dialect
  double codegen_ms = 0;      ///< LLVM codegen (CPU: + JIT; CUDA: -> PTX)
  double assemble_ms = 0;     ///< CUDA: PTX -> cubin (nvJitLink)
  double load_ms = 0;         ///< CUDA: module load
  /// CUDA, a kernel with an sm_90a twin on a GPU: its portable fallback's compile and load,
  /// on a thread of its own beside the above. Not in total_ms: the first call does not wait
  /// for it (a launch the twin cannot take does). times() and report() wait for it.
  double fallback_ms = 0;
  double total_ms() const { return tile_passes_ms + lowering_ms + codegen_ms + assemble_ms + load_ms; }
};

/// What the compiled machine code uses: kept with the kernel.
struct KILN_API KernelReport {
  std::string target;        ///< "sm_90a", or the host CPU
  std::string compiler;      ///< "nvJitLink 13.0", "LLVM ORC JIT"
  int registers = -1;        ///< per thread (CUDA), -1 when unknown
  int spill_bytes = -1;      ///< spill stores + loads in bytes (CUDA), -1 when unknown
  int64_t shared_bytes = 0;  ///< shared memory per CTA (CUDA)
  int threads = 1;           ///< threads per CTA (CUDA)
  std::string grid;          ///< the launch grid as a function of the dims
  /// sm_90a: the kernel's TMA + wgmma twin, which runs whenever the arguments allow
  /// ("128x128x64 tiles, 384 threads, ..., 168 registers, 0 spill bytes; runs when ..."),
  /// or why the kernel has none ("none: ..."). Empty on other targets.
  std::string sm90;
  /// CUDA: ptxas's warnings and performance notes for the module ("; "-separated), e.g.
  /// a wgmma serialisation warning. Empty when there are none.
  std::string ptxas_notes;
  std::string str() const;   ///< "sm_90a: 40 registers, 0 spill bytes, 16384 B smem, 128 threads"
};

namespace detail { struct CompiledImpl; struct RuntimeImpl; struct DeviceTensorImpl; struct RuntimeAccess; }

/// What a measurement depends on besides the kernel: recorded with tuning results so a
/// choice is never reused on another device or toolchain without saying so.
struct KILN_API Fingerprint {
  std::string backend;   ///< "cuda", "cpu"
  std::string device;    ///< "NVIDIA H200", or the host CPU
  int sm_count = 0;      ///< CUDA: multiprocessors; CPU: hardware threads
  std::string driver;    ///< CUDA driver version ("13.0"); empty on the CPU
  std::string target;    ///< "sm_90a", or the host CPU name
  std::string compiler;  ///< "nvJitLink 13.0", "LLVM ORC JIT"
  std::string kiln;      ///< kiln's version
  std::string llvm;      ///< LLVM/MLIR version
  /// The fields that differ from `other`, "field: mine vs theirs; ..."; empty when equal.
  std::string diff(const Fingerprint& other) const;
};

/// A kernel ready to run on one backend. Move-only (a memory-cache hit shares the
/// compiled code with the kernel it came from).
class KILN_API CompiledKernel {
public:
  explicit CompiledKernel(std::unique_ptr<detail::CompiledImpl> impl);
  CompiledKernel(std::shared_ptr<detail::CompiledImpl> impl, CacheInfo cache);
  CompiledKernel(CompiledKernel&&) noexcept;
  CompiledKernel& operator=(CompiledKernel&&) noexcept;
  ~CompiledKernel();

  const KernelSignature& signature() const;
  Backend backend() const;
  /// The compile that produced this code (for a cache hit: the original compile's, as
  /// recorded in the entry); what this Runtime::compile call itself cost is cache().
  const CompileTimes& times() const;
  /// What the kernel cache did for the Runtime::compile that returned this kernel.
  const CacheInfo& cache() const;
  const KernelReport& report() const;
  /// The machine code that was loaded. CUDA: a cubin (PTX when the driver JIT-compiled it).
  /// CPU: the host's object code (an ELF relocatable object, what the disk cache stores),
  /// never a cubin. For shipping ahead-of-time builds and for caches.
  const std::string& binary() const;
  /// Runs the kernel on `args` (one per signature argument, in order) and waits for it.
  /// Dims and strides are launch values; every argument is checked first (rank, dtype,
  /// symbol agreement, constants, strides, sizes that fit in int64, outputs apart from
  /// themselves and from the inputs; on CUDA, device pointers, alignment, and views that
  /// stay inside the allocation they start in) and a
  /// kiln::Error names the argument and the rule broken. An output may be the very same view
  /// as an input only where the kernel declares it (dsl::Builder::allow_in_place).
  void launch(const std::vector<TensorView>& args) const;
  /// Enqueues the kernel on `stream` (a CUstream, e.g. the engine's own) and returns.
  /// The CPU backend runs it at once. Errors from the kernel's execution surface at the
  /// next synchronisation.
  void launch(const std::vector<TensorView>& args, void* stream) const;
  /// Which of the kernel's machine code a launch on `args` runs, and why: "sm_90a twin
  /// 'gemm__sm90'", or "portable kernel 'gemm' (the sm_90a twin does not apply: argument
  /// 0's row pitch is not a multiple of 16 bytes)". Checks the arguments like launch (not
  /// the pointers), launches nothing, works on a compile-only runtime.
  std::string launch_path(const std::vector<TensorView>& args) const;

private:
  std::shared_ptr<detail::CompiledImpl> impl_;
  CacheInfo cache_;
};

/// Memory on a runtime's backend: device memory on CUDA, host memory on the CPU.
/// Move-only; freed when destroyed.
class KILN_API DeviceTensor {
public:
  DeviceTensor();
  explicit DeviceTensor(std::unique_ptr<detail::DeviceTensorImpl> impl);
  DeviceTensor(DeviceTensor&&) noexcept;
  DeviceTensor& operator=(DeviceTensor&&) noexcept;
  ~DeviceTensor();
  /// Row-major view of the memory (a device pointer on CUDA).
  TensorView view() const;

private:
  friend class Runtime;
  std::unique_ptr<detail::DeviceTensorImpl> impl_;
};

/// Memory a runtime holds on its backend (device memory on CUDA): its tensors and
/// library workspaces (cuBLASLt's, once reference::gpu_gemm ran). Not counted: the
/// profiler's cache-flush buffer, loaded code, the CUDA context itself, or memory the
/// engine allocates outside kiln.
struct KILN_API MemoryStats {
  int64_t in_use_bytes = 0;
  int64_t peak_bytes = 0; ///< high-water mark since creation or reset_peak_memory()
};

/// A compile running on a thread of its own (Runtime::compile_async): start a model's
/// kernels compiling at start-up, wait for each where it is first needed. Move-only.
/// Destroying one that is still compiling waits for the compile to end (the kernel is in
/// the runtime's caches all the same).
class KILN_API PendingKernel {
public:
  PendingKernel(PendingKernel&&) noexcept;
  PendingKernel& operator=(PendingKernel&&) noexcept;
  ~PendingKernel();
  /// The compile has ended: get() returns (or throws) at once.
  bool ready() const;
  /// Waits for the compile, then gives the kernel, or throws what the compile threw (a
  /// kiln::Error naming the kernel). Once: a second call throws kiln::Error(InvalidArgument).
  CompiledKernel get();

private:
  friend class Runtime;
  struct State;
  explicit PendingKernel(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Where kernels compile and run. `Backend::automatic` picks CUDA when a GPU and its
/// driver are present and the CPU otherwise, and says which (and why) in describe().
class KILN_API Runtime {
public:
  static Runtime create(Backend backend = Backend::automatic, const RuntimeOptions& options = {});
  Backend backend() const;
  /// e.g. "cuda: NVIDIA H200 (sm_90a, 132 SMs, driver 13.0)" or
  /// "cpu (x86_64-pc-linux-gnu sapphirerapids JIT, f16c); cuda: <why not>"
  const std::string& describe() const;
  /// Compiles `kernel`, or takes it from the kernel cache (memory, then disk): see
  /// CompiledKernel::cache().
  CompiledKernel compile(const Kernel& kernel) const;
  /// compile() on a thread of its own; the handle waits for it (PendingKernel::get).
  PendingKernel compile_async(const Kernel& kernel) const;
  /// compile() of every kernel, `threads` at a time (0: one per core), the results in the
  /// order given. If any fails, waits for the others (which stay in the caches), then
  /// throws the first failure in that order.
  std::vector<CompiledKernel> compile_all(const std::vector<Kernel>& kernels, int threads = 0) const;
  /// This runtime's cache counters: compiles done, memory and disk hits, writes, corrupt
  /// entries replaced, evictions.
  CacheStats cache_stats() const;
  /// The disk cache's directory, or "" when the disk cache is off.
  std::string cache_dir() const;
  /// The output of one stage for this runtime's backend (Stage::cubin: the ELF bytes).
  std::string emit(const Kernel& kernel, Stage stage) const;

  DeviceTensor upload(const HostTensor& host) const;
  /// An uninitialised (CPU) / zero-filled (CUDA) tensor of `dims`.
  DeviceTensor allocate(DType dtype, const std::vector<int64_t>& dims) const;
  void download(const DeviceTensor& from, HostTensor& to) const;
  void synchronize() const;
  MemoryStats memory() const;
  Fingerprint fingerprint() const;
  /// Restarts the high-water mark at the bytes in use now (to measure one phase).
  void reset_peak_memory() const;

private:
  friend struct detail::RuntimeAccess; // kiln's own code (e.g. reference::gpu_gemm)
  explicit Runtime(std::shared_ptr<detail::RuntimeImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::RuntimeImpl> impl_;
};

} // namespace kiln
