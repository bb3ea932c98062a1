#include "CpuTarget.h"
#include "Runtime/Throw.h"

#include "kiln/error.hpp"

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <algorithm>
#include <cstdlib>
#include <vector>
#include <mutex>

namespace kiln::cpu {

namespace {

void initLLVMOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

CpuTarget hostTarget(const llvm::StringMap<bool>& hostFeatures) {
  CpuTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = t.hostCpu = llvm::sys::getHostCPUName().str();
  // Sorted: the string is part of the kernel cache key, and a hash map's order is not.
  std::vector<std::string> fs;
  for (auto& [name, on] : hostFeatures) fs.push_back((on ? "+" : "-") + name.str());
  std::sort(fs.begin(), fs.end());
  for (auto& f : fs) t.features += (t.features.empty() ? "" : ",") + f;
  return t;
}

const char* kExamples = "host, x86-64, x86-64-v2, x86-64-v3, x86-64-v4, or an LLVM CPU name such as "
                        "znver3 or sapphirerapids";

} // namespace

CpuTarget chooseTarget(const std::string& option) {
  initLLVMOnce();
  std::string name = option, source = "RuntimeOptions::cpu";
  if (name.empty()) {
    const char* env = std::getenv("KILN_CPU");
    name = env ? env : "";
    source = "KILN_CPU";
  }
  const llvm::StringMap<bool> hostFeatures = llvm::sys::getHostCPUFeatures();
  CpuTarget host = hostTarget(hostFeatures);
  if (name.empty() || name == "host") return host;

  const std::string said = "CPU '" + name + "' (from " + source + ")";
  if (!llvm::Triple(host.triple).isX86())
    kiln::detail::throwError(ErrorKind::Unsupported, said + ": forcing a CPU is supported on x86-64 hosts only; this host is " +
                                            host.triple + " (use host)");
  if (llvm::X86::parseArchX86(name, /*Only64Bit=*/true) == llvm::X86::CK_None)
    kiln::detail::throwError(ErrorKind::InvalidArgument, said + " is not an x86-64 CPU LLVM knows; use " + kExamples);

  // Every instruction set the forced CPU implies must be one the host reports having, or
  // the JIT'd code could stop on an illegal instruction. A feature the host query does not
  // mention counts as missing (a newer LLVM may know features its host query does not),
  // except x87, which every x86-64 CPU has and the query never lists.
  llvm::SmallVector<llvm::StringRef, 64> implied;
  llvm::X86::getFeaturesForCPU(name, implied);
  std::string missing;
  for (llvm::StringRef f : implied) {
    auto it = hostFeatures.find(f);
    bool has = it != hostFeatures.end() ? it->second : f == "x87";
    if (!has) missing += (missing.empty() ? "" : ", ") + f.str();
  }
  if (!missing.empty())
    kiln::detail::throwError(ErrorKind::Unsupported, said + " needs " + missing + ", which this host (" + host.hostCpu +
                                            ") lacks: code made for it would not run here");
  CpuTarget t = host;
  t.cpu = name;
  t.features.clear();
  t.forcedBy = source;
  return t;
}

llvm::orc::JITTargetMachineBuilder CpuTarget::builder() const {
  initLLVMOnce();
  llvm::orc::JITTargetMachineBuilder b{llvm::Triple(triple)};
  b.setCPU(cpu);
  if (!features.empty()) {
    llvm::SubtargetFeatures fs(features);
    b.addFeatures(fs.getFeatures());
  }
  b.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  // Position-independent, small code model: JITLink may place the code anywhere in the
  // address space, where a static object's 32-bit absolute relocations (jump tables)
  // would not reach.
  b.setRelocationModel(llvm::Reloc::PIC_);
  b.setCodeModel(llvm::CodeModel::Small);
  return b;
}

std::unique_ptr<llvm::TargetMachine> CpuTarget::machine() const {
  auto tm = builder().createTargetMachine();
  if (!tm) kiln::detail::throwError(ErrorKind::Unsupported, "no LLVM target for " + describe() + ": " + llvm::toString(tm.takeError()));
  return std::move(*tm);
}

std::string CpuTarget::describe() const {
  std::string s = triple + " " + cpu;
  if (!forcedBy.empty()) s += " (forced by " + forcedBy + "; host " + hostCpu + ")";
  return s;
}

} // namespace kiln::cpu
