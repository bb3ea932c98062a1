#include "Runtime/Nvtx.h"

#include <nvtx3/nvToolsExt.h>

#include <string>

namespace kiln::detail {

namespace {
/// kiln's domain, made at the first range: null when no tool is attached (NVTX's stubs
/// return null until a tool's injection library has loaded, which NVTX tries once).
nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("kiln");
  return d;
}
} // namespace

void NvtxRange::push(std::string_view what, std::string_view kernel) {
  kernel_ = kernel;
  const nvtxDomainHandle_t d = domain();
  if (!d) return;
  const std::string name = std::string(what) + " " + std::string(kernel);
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name.c_str();
  nvtxDomainRangePushEx(d, &a);
  open_ = true;
}

void NvtxRange::end() {
  if (!open_) return;
  nvtxDomainRangePop(domain());
  open_ = false;
}

} // namespace kiln::detail
