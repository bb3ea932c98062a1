// An NVTX injection library for the tests: what Nsight Systems does when it attaches,
// reduced to writing each range kiln pushes to a file. Loaded by NVTX itself when
// NVTX_INJECTION64_PATH names it; KILN_NVTX_LOG names the file. Each push is a line
// "push <domain>: <message>", each pop "pop <domain>".
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

std::mutex mu;
FILE* out = nullptr;

const char* domainName(nvtxDomainHandle_t d) { return d ? reinterpret_cast<const char*>(d) : "(default)"; }

nvtxDomainHandle_t NVTX_API domainCreateA(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(strdup(name)); // the handle is its name
}
int NVTX_API rangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  std::lock_guard<std::mutex> lock(mu);
  const char* text = a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "(not ascii)";
  std::fprintf(out, "push %s: %s\n", domainName(d), text);
  std::fflush(out);
  return 0;
}
int NVTX_API rangePop(nvtxDomainHandle_t d) {
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(out, "pop %s\n", domainName(d));
  std::fflush(out);
  return 0;
}

} // namespace

extern "C" __attribute__((visibility("default"))) int NVTX_API
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
  const char* path = std::getenv("KILN_NVTX_LOG");
  if (!path || !(out = std::fopen(path, "w"))) return 0; // 0: NVTX stays off
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(getExportTable(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
      size <= NVTX_CBID_CORE2_DomainCreateA)
    return 0;
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(domainCreateA);
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(rangePushEx);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(rangePop);
  return 1;
}
