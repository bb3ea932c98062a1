#include "BackgroundModule.h"
#include "NvJitLink.h"

#include <chrono>

namespace kiln::cuda {

namespace {

std::shared_ptr<const BackgroundModule::Loaded> build(const std::function<void()>& enter,
                                                      const std::function<std::string()>& source,
                                                      const std::string& arch, const std::string& name,
                                                      int64_t sharedBytes, BackgroundModule::Compiler compiler) {
  auto out = std::make_shared<BackgroundModule::Loaded>();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    enter();
    const std::string ptx = source();
    // (A portable kernel has no setmaxnreg for nvJitLink's relocatable compile to drop.)
    std::string why;
    if (compiler == BackgroundModule::Compiler::NvJitLink && nvJitLinkAvailable(&why)) {
      CubinResult cubin = ptxToCubin(ptx, arch, name);
      out->module = Module(cubin.cubin, name);
      out->compiler = cubin.compiler;
      out->registers = cubin.registers;
      out->spill_bytes = cubin.spillBytes();
      appendPtxasNotes(out->notes, cubin.info_log);
    } else {
      out->module = Module(ptx, name);
      out->compiler = why.empty() ? "the CUDA driver's PTX JIT" : "the CUDA driver's PTX JIT (nvJitLink unavailable: " + why + ")";
    }
    out->function = out->module.getFunction(name);
    if (sharedBytes > 0) setMaxDynamicSharedMemory(out->function, int(sharedBytes), name);
    const FunctionInfo fi = queryFunction(out->function);
    if (out->registers < 0) out->registers = fi.registers;
    if (out->spill_bytes < 0 && fi.local_bytes == 0) out->spill_bytes = 0;
  } catch (...) {
    out->function = nullptr;
    out->error = std::current_exception();
  }
  out->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

} // namespace

BackgroundModule::BackgroundModule(std::function<void()> enter, std::function<std::string()> ptx, std::string arch,
                                   std::string name, int64_t sharedBytes, Compiler compiler)
    : job_(std::async(std::launch::async, [enter = std::move(enter), ptx = std::move(ptx), arch = std::move(arch),
                                           name = std::move(name), sharedBytes, compiler] {
        return build(enter, ptx, arch, name, sharedBytes, compiler);
      }).share()) {}

const BackgroundModule::Loaded& BackgroundModule::wait() const { return *job_.get(); }

CUfunction BackgroundModule::function() const {
  const Loaded& l = wait();
  if (l.error) std::rethrow_exception(l.error);
  return l.function;
}

} // namespace kiln::cuda
