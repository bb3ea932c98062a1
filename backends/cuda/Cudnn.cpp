#include "Cudnn.h"
#include "Runtime/Log.h"
#include "DynamicLibrary.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace kiln::cuda {
namespace {

using cudnn::Api;
using LoadResult = LoadedLibrary<Api>;

// Where cuDNN may be: $KILN_CUDNN_LIBRARY (a file), the loader's own search (LD_LIBRARY_PATH,
// the system's cuDNN packages), then the toolkit's lib64 (where NVIDIA's tarball is often
// unpacked). PyTorch's wheels carry their own copy (site-packages/nvidia/cudnn/lib): name it
// with KILN_CUDNN_LIBRARY or LD_LIBRARY_PATH.
std::vector<std::string> candidates() {
  std::vector<std::string> c;
  if (const char* file = std::getenv("KILN_CUDNN_LIBRARY"); file && *file) c.push_back(file);
  for (auto& p : toolkitCandidates({"libcudnn.so.9"}, "libcudnn.so.9")) c.push_back(p);
  return c;
}

LoadResult loadCudnn() {
  auto api = std::make_unique<Api>();
  std::string tried;
  void* h = openFirst(candidates(),
                      [&](void* handle) {
                        SymbolResolver resolve{handle};
#define KILN_CUDNN_RESOLVE(name, ret, params) api->name = reinterpret_cast<decltype(api->name)>(resolve(#name));
                        KILN_CUDNN_SYMBOLS(KILN_CUDNN_RESOLVE)
#undef KILN_CUDNN_RESOLVE
                        return resolve.missing;
                      },
                      api->path, tried);
  LoadResult r;
  if (!h) {
    r.error = "cuDNN not found: the framework route for attention (reference::gpu_attention) runs cuDNN 9's "
              "fused attention from libcudnn.so.9, and no candidate loaded:" +
              tried +
              "\n  install cuDNN 9, or point KILN_CUDNN_LIBRARY at a libcudnn.so.9 (PyTorch's wheels carry one "
              "under site-packages/nvidia/cudnn/lib)";
    return r;
  }
  api->version = api->cudnnGetVersion(); // major*10000 + minor*100 + patch
  api->versionString = "cuDNN " + std::to_string(api->version / 10000) + "." +
                       std::to_string(api->version / 100 % 100) + "." + std::to_string(api->version % 100) + " (" +
                       api->path + ")";
  if (api->version < 90000) {
    r.error = api->versionString + " is older than cuDNN 9, whose graph API kiln calls";
    return r;
  }
  r.api = std::move(api);
  return r;
}

const LoadResult& loaded() { return loadOnce(&loadCudnn); }
const Api& dnn() { return loaded().get(); }

// See Cublas.cpp's note: a library handle destroyed after the library's own exit-time
// teardown frees freed memory; once the process is exiting, handles are left alone.
std::atomic<bool> gExiting{false};
void markExiting() { gExiting.store(true); }

// One backend descriptor, destroyed with its owner.
struct Desc {
  cudnn::Descriptor d = nullptr;
  Desc() = default;
  Desc(int type, const std::string& what) {
    KILN_CUDNN_CHECK_CTX(dnn().cudnnBackendCreateDescriptor(type, &d), what);
  }
  Desc(Desc&& o) noexcept : d(o.d) { o.d = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d, o.d);
    return *this;
  }
  Desc(const Desc&) = delete;
  ~Desc() {
    if (d && !gExiting.load()) dnn().cudnnBackendDestroyDescriptor(d);
  }
  void set(int name, int type, int64_t count, const void* values, const std::string& what) {
    KILN_CUDNN_CHECK_CTX(dnn().cudnnBackendSetAttribute(d, name, type, count, values), what);
  }
  void setDesc(int name, const Desc& other, const std::string& what) {
    set(name, cudnn::kTypeBackendDescriptor, 1, &other.d, what);
  }
  void setInt(int name, int type, int64_t value, const std::string& what) {
    // Enums travel as 4-byte ints, INT64 attributes as 8 bytes.
    if (type == cudnn::kTypeInt64) return set(name, type, 1, &value, what);
    const int32_t v = int32_t(value);
    set(name, type, 1, &v, what);
  }
  void finalize(const std::string& what) { KILN_CUDNN_CHECK_CTX(dnn().cudnnBackendFinalize(d), what); }
};

std::string lastMessage() {
  char buf[1024] = {0};
  if (const Api* a = loaded().api.get()) a->cudnnGetLastErrorString(buf, sizeof buf);
  return buf;
}

// The alignment a plan may assume of an operand (cuDNN's kernels ask for 16 at most).
int64_t alignmentOf(CUdeviceptr p) { return int64_t(cuda::alignmentOf(p, 16)); }

} // namespace

bool cudnnAvailable(std::string* why) {
  const LoadResult& r = loaded();
  if (!r.api && why) *why = r.error;
  return r.api != nullptr;
}

std::string cudnnVersionString() { return dnn().versionString; }


namespace detail {

void throwCudnnError(cudnn::Status s, const char* expr, const char* file, int line, const std::string& context) {
  std::string msg = context.empty() ? std::string() : context + ": ";
  msg += std::string(expr) + " failed: ";
  const LoadResult& r = loaded();
  const char* name = r.api ? r.api->cudnnGetErrorString(s) : nullptr;
  msg += name && *name ? std::string(name) : "cudnnStatus_t " + std::to_string(s);
  if (std::string last = lastMessage(); !last.empty()) msg += " (" + last + ")";
  msg += " at " + shortPath(file) + ":" + std::to_string(line);
  ErrorKind kind = ErrorKind::Runtime;
  if (s >= 3000 && s < 4000) kind = ErrorKind::Unsupported;
  if (s >= 2000 && s < 3000) kind = ErrorKind::InvalidArgument;
  throw Error(kind, msg);
}

} // namespace detail

/// A finalized execution plan, the descriptors it was built from (kept alive with it), and
/// the variant pack's fixed part: the uids, and the by-value scalars' host storage.
struct CudnnAttention::Plan {
  std::vector<Desc> keep;
  Desc plan;
  int64_t workspace = 0;
  std::vector<int64_t> scalarUids;
  std::vector<uint32_t> scalarBits; ///< one 4-byte value per scalar uid (f32 or i32), never resized
  bool stats = false;
};

namespace {

// The graph's tensors and operations as finalized backend descriptors, into plan->keep
// (none of them needs a handle or a GPU); returns the operations, in order.
std::vector<cudnn::Descriptor> describe(const cudnn::Graph& g, CudnnAttention::Plan& planRef, const std::string& what) {
  using namespace cudnn;
  CudnnAttention::Plan* plan = &planRef;
  std::map<int64_t, size_t> tensorAt; // uid -> index into plan->keep
  for (const TensorSpec& t : g.tensors) {
    Desc d(kTensorDescriptor, what);
    const int rank = int(t.dims.size());
    d.setInt(kTensorDataType, kTypeDataType, t.type, what);
    d.set(kTensorDimensions, kTypeInt64, rank, t.dims.data(), what);
    d.set(kTensorStrides, kTypeInt64, rank, t.strides.data(), what);
    d.setInt(kTensorUniqueId, kTypeInt64, t.uid, what);
    d.setInt(kTensorByteAlignment, kTypeInt64, t.alignment, what);
    const bool isVirtual = t.isVirtual, byValue = t.byValue;
    d.set(kTensorIsVirtual, kTypeBoolean, 1, &isVirtual, what);
    if (byValue) d.set(kTensorIsByValue, kTypeBoolean, 1, &byValue, what);
    if (t.ragged) d.setDesc(kTensorRaggedOffsetDesc, plan->keep[tensorAt.at(t.ragged)], what);
    d.finalize(what + ": tensor " + t.name);
    tensorAt[t.uid] = plan->keep.size();
    plan->keep.push_back(std::move(d));
    if (byValue) {
      plan->scalarUids.push_back(t.uid);
      uint32_t bits;
      if (t.type == kDataInt32) std::memcpy(&bits, &t.i32, 4);
      else std::memcpy(&bits, &t.f32, 4);
      plan->scalarBits.push_back(bits);
    }
  }
  auto tensor = [&](int64_t uid) -> const Desc& { return plan->keep[tensorAt.at(uid)]; };

  std::vector<cudnn::Descriptor> ops;
  // Each operation is two descriptors: what it does (`how`, finalized first) and the
  // operation naming its tensors and `how` under `link`; both kept with the plan.
  auto add = [&](Desc how, Desc o, int link, const std::string& at) {
    how.finalize(at);
    o.setDesc(link, how, at);
    o.finalize(at);
    plan->keep.push_back(std::move(how));
    ops.push_back(o.d);
    plan->keep.push_back(std::move(o));
  };
  for (const OpSpec& op : g.ops) {
    const std::string at = what + ": operation " + op.name;
    if (op.kind == OpKind::matmul) {
      Desc how(kMatmulDescriptor, at), o(kOperationMatmulDescriptor, at);
      how.setInt(kMatmulCompType, kTypeDataType, op.compute, at);
      if (op.zeroPadding) {
        const double zero = 0;
        how.set(kMatmulPaddingValue, kTypeDouble, 1, &zero, at);
      }
      o.setDesc(kOperationMatmulADesc, tensor(op.x), at);
      o.setDesc(kOperationMatmulBDesc, tensor(op.b), at);
      o.setDesc(kOperationMatmulCDesc, tensor(op.y), at);
      if (op.mOverride) o.setDesc(kOperationMatmulGemmMOverrideDesc, tensor(op.mOverride), at);
      if (op.nOverride) o.setDesc(kOperationMatmulGemmNOverrideDesc, tensor(op.nOverride), at);
      if (op.kOverride) o.setDesc(kOperationMatmulGemmKOverrideDesc, tensor(op.kOverride), at);
      add(std::move(how), std::move(o), kOperationMatmulDesc, at);
    } else if (op.kind == OpKind::reduction) {
      Desc how(kReductionDescriptor, at), o(kOperationReductionDescriptor, at);
      how.setInt(kReductionOperator, kTypeReductionOperatorType, op.mode, at);
      how.setInt(kReductionCompType, kTypeDataType, op.compute, at);
      o.setDesc(kOperationReductionXDesc, tensor(op.x), at);
      o.setDesc(kOperationReductionYDesc, tensor(op.y), at);
      add(std::move(how), std::move(o), kOperationReductionDesc, at);
    } else {
      Desc how(kPointwiseDescriptor, at), o(kOperationPointwiseDescriptor, at);
      how.setInt(kPointwiseMode, kTypePointwiseMode, op.mode, at);
      how.setInt(kPointwiseMathPrec, kTypeDataType, op.compute, at);
      if (op.axis >= 0) how.setInt(kPointwiseAxis, kTypeInt64, op.axis, at);
      o.setDesc(kOperationPointwiseXDesc, tensor(op.x), at);
      if (op.b) o.setDesc(kOperationPointwiseBDesc, tensor(op.b), at);
      if (op.t) o.setDesc(kOperationPointwiseTDesc, tensor(op.t), at);
      o.setDesc(kOperationPointwiseYDesc, tensor(op.y), at);
      add(std::move(how), std::move(o), kOperationPointwisePwDescriptor, at);
    }
  }
  return ops;
}

std::unique_ptr<CudnnAttention::Plan> buildPlan(cudnn::Handle handle, const cudnn::AttentionShape& shape) {
  using namespace cudnn;
  const Graph g = attentionGraph(shape);
  auto plan = std::make_unique<CudnnAttention::Plan>();
  plan->stats = shape.stats;
  const std::string what = "cuDNN attention " + shape.key();
  std::vector<cudnn::Descriptor> ops = describe(g, *plan, what);
  Desc graph(kOperationGraphDescriptor, what);
  graph.set(kOperationGraphHandle, kTypeHandle, 1, &handle, what);
  graph.set(kOperationGraphOps, kTypeBackendDescriptor, int64_t(ops.size()), ops.data(), what);
  try {
    graph.finalize(what + ": the operation graph");
  } catch (const Error& e) {
    throw Error(e.kind(), std::string(e.what()) + "\n  the graph:\n" + g.describe());
  }

  Desc heur(kEngineHeurDescriptor, what);
  heur.setDesc(kEngineHeurOperationGraph, graph, what);
  heur.setInt(kEngineHeurMode, kTypeHeurMode, kHeurModeA, what);
  heur.finalize(what + ": heuristics");
  int64_t count = 0;
  KILN_CUDNN_CHECK_CTX(dnn().cudnnBackendGetAttribute(heur.d, kEngineHeurResults, kTypeBackendDescriptor, 0, &count,
                                                      nullptr),
                       what + ": heuristics' results");
  std::vector<Desc> configs;
  std::vector<cudnn::Descriptor> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(kEngineCfgDescriptor, what);
    raw.push_back(configs.back().d);
  }
  int64_t got = 0;
  if (count > 0)
    KILN_CUDNN_CHECK_CTX(dnn().cudnnBackendGetAttribute(heur.d, kEngineHeurResults, kTypeBackendDescriptor, count,
                                                        &got, raw.data()),
                         what + ": heuristics' results");
  std::string refused;
  for (int64_t i = 0; i < got; ++i) {
    try {
      Desc p(kExecutionPlanDescriptor, what);
      p.set(kExecutionPlanHandle, kTypeHandle, 1, &handle, what);
      p.setDesc(kExecutionPlanEngineConfig, configs[size_t(i)], what);
      p.finalize(what + ": engine config " + std::to_string(i));
      int64_t one = 0;
      KILN_CUDNN_CHECK_CTX(dnn().cudnnBackendGetAttribute(p.d, kExecutionPlanWorkspaceSize, kTypeInt64, 1, &one,
                                                          &plan->workspace),
                           what + ": workspace size");
      plan->plan = std::move(p);
      break;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Unsupported && e.kind() != ErrorKind::InvalidArgument) throw;
      refused += "\n  " + std::string(e.what());
    }
  }
  if (!plan->plan.d)
    throw Error(ErrorKind::Unsupported,
                what + ": cuDNN has no engine for this attention (" + std::to_string(got) + " config(s) offered" +
                    (refused.empty() ? ")" : ", each refused:" + refused + ")") + "\n  the graph:\n" + g.describe());
  plan->keep.push_back(std::move(graph));
  plan->keep.push_back(std::move(heur));
  for (auto& c : configs) plan->keep.push_back(std::move(c));
  return plan;
}

} // namespace

size_t cudnnDescribeAttention(const cudnn::AttentionShape& shape) {
  CudnnAttention::Plan plan;
  return describe(cudnn::attentionGraph(shape), plan, "cuDNN attention " + shape.key()).size();
}

CudnnAttention::CudnnAttention() {
  KILN_CUDNN_CHECK_CTX(dnn().cudnnCreate(&handle_), "creating a cuDNN handle");
  static const bool registered = std::atexit(markExiting) == 0;
  (void)registered;
}

CudnnAttention::~CudnnAttention() {
  if (gExiting.load()) return; // the library is going: its descriptors skip their destroy too
  plans_.clear(); // the plans' descriptors before the handle they were made with
  if (handle_) {
    const cudnn::Status s = dnn().cudnnDestroy(handle_);
    if (s != cudnn::kSuccess) kiln::detail::logWarn("cudnnDestroy failed: status " + std::to_string(s));
  }
}

void CudnnAttention::run(const cudnn::AttentionShape& given, const Pointers& ptrs, CUstream stream) {
  const Api& api = dnn();
  cudnn::AttentionShape shape = given;
  shape.maskWithLowest = api.version < 91000;
  shape.alignment = {alignmentOf(ptrs.q),
                     alignmentOf(ptrs.k),
                     alignmentOf(ptrs.v),
                     alignmentOf(ptrs.o),
                     shape.stats ? alignmentOf(ptrs.lse) : 16,
                     shape.padded && !shape.ragged ? alignmentOf(ptrs.lens) : 16};
  const std::string key = shape.key();
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    it = plans_.emplace(key, buildPlan(handle_, shape)).first;
    // Again after the first plan: after whatever cuDNN sets up lazily there (see markExiting).
    static const bool registered = std::atexit(markExiting) == 0;
    (void)registered;
  }
  Plan& plan = *it->second;
  if (size_t(plan.workspace) > workspace_.size()) {
    // A launch still in flight may be using the old buffer.
    KILN_CU_CHECK_CTX(driver().cuCtxSynchronize(), "growing cuDNN's workspace");
    workspace_ = DeviceBuffer(size_t(plan.workspace));
  }

  // Packed: the lengths and each tensor's element offsets, made on the stream before the
  // attention (as frameworks do before a varlen call), into ragged_.
  CUdeviceptr lens = ptrs.lens, raggedAt[4] = {0, 0, 0, 0};
  if (shape.ragged) {
    const uint32_t n = uint32_t(shape.B);
    const size_t bytes = RaggedOffsets::values(n) * 4;
    if (bytes > ragged_.size()) {
      KILN_CU_CHECK_CTX(driver().cuCtxSynchronize(), "growing cuDNN's packed-sequence offsets");
      ragged_ = DeviceBuffer(bytes);
    }
    if (!raggedKernel_) raggedKernel_ = std::make_unique<RaggedOffsets>();
    const uint32_t perToken[4] = {uint32_t(shape.q[2]), uint32_t(shape.k[2]), uint32_t(shape.v[2]), uint32_t(shape.o[2])};
    raggedKernel_->run(ptrs.offsets, ragged_.ptr(), n, uint32_t(ptrs.tokens), perToken, uint32_t(shape.S), stream);
    lens = RaggedOffsets::at(ragged_.ptr(), n, 0);
    for (int i = 0; i < 4; ++i) raggedAt[i] = RaggedOffsets::at(ragged_.ptr(), n, i + 1);
  }

  std::vector<int64_t> uids = {cudnn::kQ, cudnn::kK, cudnn::kV, cudnn::kO};
  std::vector<void*> data = {reinterpret_cast<void*>(ptrs.q), reinterpret_cast<void*>(ptrs.k),
                             reinterpret_cast<void*>(ptrs.v), reinterpret_cast<void*>(ptrs.o)};
  if (plan.stats) {
    uids.push_back(cudnn::kStats);
    data.push_back(reinterpret_cast<void*>(ptrs.lse));
  }
  if (shape.padded) // one length a sequence, its queries' and its keys'
    for (int64_t uid : {cudnn::kSeqLenQ, cudnn::kSeqLenKV}) {
      uids.push_back(uid);
      data.push_back(reinterpret_cast<void*>(lens));
    }
  if (shape.ragged)
    for (int i = 0; i < 4; ++i) {
      uids.push_back(cudnn::kRaggedQ + i);
      data.push_back(reinterpret_cast<void*>(raggedAt[i]));
    }
  for (size_t i = 0; i < plan.scalarUids.size(); ++i) {
    uids.push_back(plan.scalarUids[i]);
    data.push_back(&plan.scalarBits[i]);
  }
  const std::string what = "running cuDNN attention " + key;
  Desc pack(cudnn::kVariantPackDescriptor, what);
  pack.set(cudnn::kVariantPackUniqueIds, cudnn::kTypeInt64, int64_t(uids.size()), uids.data(), what);
  pack.set(cudnn::kVariantPackDataPointers, cudnn::kTypeVoidPtr, int64_t(data.size()), data.data(), what);
  void* ws = reinterpret_cast<void*>(workspace_.ptr());
  pack.set(cudnn::kVariantPackWorkspace, cudnn::kTypeVoidPtr, 1, &ws, what);
  pack.finalize(what);
  KILN_CUDNN_CHECK_CTX(api.cudnnSetStream(handle_, stream), what);
  KILN_CUDNN_CHECK_CTX(api.cudnnBackendExecute(handle_, plan.plan.d, pack.d), what);
}

} // namespace kiln::cuda
