// kiln/handwritten.hpp: the backend-independent parts (arguments, the kernel handle).
#include "kiln/handwritten.hpp"

#include <cstring>

#include "kiln/error.hpp"
#include "Runtime/RuntimeImpl.h"

namespace kiln {

namespace {
template <class T> void put(unsigned char* bytes, size_t& size, T v) {
  static_assert(sizeof(T) <= 8);
  std::memcpy(bytes, &v, sizeof(T));
  size = sizeof(T);
}
} // namespace

KernelArg::KernelArg(const TensorView& tensor) : tensor_(true), view_(tensor) { put(bytes_, size_, tensor.data); }
KernelArg::KernelArg(const DeviceTensor& tensor) : KernelArg(tensor.view()) {}
KernelArg::KernelArg(int32_t value) { put(bytes_, size_, value); }
KernelArg::KernelArg(int64_t value) { put(bytes_, size_, value); }
KernelArg::KernelArg(float value) { put(bytes_, size_, value); }
KernelArg::KernelArg(double value) { put(bytes_, size_, value); }

std::string KernelArg::describe() const {
  if (tensor_) return "tensor " + view_.describe();
  return std::to_string(size_) + "-byte scalar";
}

HandwrittenKernel::HandwrittenKernel(std::unique_ptr<detail::HandwrittenImpl> impl) : impl_(std::move(impl)) {}
HandwrittenKernel::HandwrittenKernel(HandwrittenKernel&&) noexcept = default;
HandwrittenKernel& HandwrittenKernel::operator=(HandwrittenKernel&&) noexcept = default;
HandwrittenKernel::~HandwrittenKernel() = default;
const std::string& HandwrittenKernel::entry() const { return impl_->entry; }
const HandwrittenTimes& HandwrittenKernel::times() const { return impl_->times; }
const KernelReport& HandwrittenKernel::report() const { return impl_->report; }
const std::string& HandwrittenKernel::binary() const { return impl_->binary; }
const std::string& HandwrittenKernel::log() const { return impl_->log; }

void HandwrittenKernel::launch(Dim3 grid, Dim3 block, size_t dynamic_shared_bytes, const std::vector<KernelArg>& args,
                               void* stream) const {
  impl_->launch(grid, block, dynamic_shared_bytes, args, stream);
}

HandwrittenKernel compile_cuda(const Runtime& rt, const CudaSource& source) {
  if (source.entry.empty())
    throw Error(ErrorKind::InvalidArgument, "compile_cuda('" + source.name + "'): no entry function named");
  return HandwrittenKernel(detail::RuntimeAccess::impl(rt).compileCuda(source));
}

} // namespace kiln
