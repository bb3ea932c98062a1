// Hand-written CUDA C++ through NVRTC (kiln/handwritten.hpp): compiled to a cubin here,
// with no GPU; launches are covered by the GPU suite.
#include <catch2/catch.hpp>

#include "kiln/catalogue.hpp"
#include "kiln/error.hpp"
#include "kiln/handwritten.hpp"
#include "kiln/runtime.hpp"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

Runtime offline(const std::string& arch = "sm_90a") {
  return Runtime::create(Backend::cuda, {.compile_only = true, .arch = arch});
}

CudaSource scale() {
  CudaSource s;
  s.name = "scale.cu";
  s.entry = "scale";
  s.code = R"(#include <cuda_bf16.h>
extern "C" __global__ void scale(__nv_bfloat16* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __float2bfloat16(a * __bfloat162float(x[i]));
})";
  return s;
}

ErrorKind kindOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  FAIL("no kiln::Error was thrown");
  return ErrorKind::Runtime;
}

} // namespace

TEST_CASE("a hand-written kernel compiles with NVRTC to a cubin without a GPU", "[handwritten]") {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    Runtime rt = offline(arch);
    HandwrittenKernel k = compile_cuda(rt, scale());
    CHECK(k.entry() == "scale");
    CHECK(k.binary().rfind("\x7f" "ELF", 0) == 0);
    CHECK(k.report().target == arch);
    CHECK_THAT(k.report().compiler, Contains("NVRTC 13."));
    CHECK(k.times().nvrtc_ms > 0);
    CHECK(k.times().load_ms == 0); // nothing loaded without a device
  }
}

TEST_CASE("a hand-written kernel that does not compile reports NVRTC's log and the options", "[handwritten][errors]") {
  Runtime rt = offline();
  CudaSource bad = scale();
  bad.code += "\nextern \"C\" __global__ void broken() { undeclared_name = 1; }\n";
  CHECK_THROWS_WITH(compile_cuda(rt, bad), Contains("scale.cu: NVRTC failed") && Contains("undeclared_name") &&
                                               Contains("--gpu-architecture=sm_90a"));
  CHECK(kindOf([&] { compile_cuda(rt, bad); }) == ErrorKind::CompileFailed);
}

TEST_CASE("a hand-written kernel's options reach NVRTC", "[handwritten]") {
  Runtime rt = offline();
  CudaSource s = scale();
  s.code = "#ifndef MUST_BE_SET\n#error MUST_BE_SET is missing\n#endif\n" + s.code;
  CHECK_THROWS_WITH(compile_cuda(rt, s), Contains("MUST_BE_SET is missing"));
  s.options = {"-DMUST_BE_SET=1"};
  CHECK_NOTHROW(compile_cuda(rt, s));
}

TEST_CASE("an entry the program does not define is named in the error", "[handwritten][errors]") {
  Runtime rt = offline();
  CudaSource s = scale();
  s.entry = "scal";
  CHECK_THROWS_WITH(compile_cuda(rt, s), Contains("no __global__ function 'scal'") && Contains("extern \"C\""));
  CHECK(kindOf([&] { compile_cuda(rt, s); }) == ErrorKind::NotFound);
  // A mangled (C++) name is not found by its plain name either.
  s = scale();
  s.code = "__global__ void cxx_kernel(float* x) { x[0] = 1; }";
  s.entry = "cxx_kernel";
  CHECK(kindOf([&] { compile_cuda(rt, s); }) == ErrorKind::NotFound);
  s.entry = "";
  CHECK(kindOf([&] { compile_cuda(rt, s); }) == ErrorKind::InvalidArgument);
}

TEST_CASE("a hand-written kernel cannot launch from a compile-only runtime, nor compile on the CPU", "[handwritten][errors]") {
  Runtime rt = offline();
  HandwrittenKernel k = compile_cuda(rt, scale());
  CHECK_THROWS_WITH(k.launch({1, 1, 1}, {32, 1, 1}, 0, {}), Contains("compile-only") && Contains("'scale'"));
  Runtime cpu = Runtime::create(Backend::cpu);
  CHECK_THROWS_WITH(compile_cuda(cpu, scale()), Contains("needs a CUDA runtime"));
  CHECK(kindOf([&] { compile_cuda(cpu, scale()); }) == ErrorKind::Unsupported);
}

TEST_CASE("kernel arguments carry a tensor's pointer or a scalar's exact bytes", "[handwritten]") {
  float data[4] = {};
  TensorView v{data, DType::f32, {4}, {}};
  KernelArg t(v), i32(int32_t(7)), i64(int64_t(7)), f(1.5f), d(2.5);
  CHECK(t.is_tensor());
  CHECK(t.size() == sizeof(void*));
  CHECK(*static_cast<void* const*>(t.data()) == data);
  CHECK(i32.size() == 4);
  CHECK(*static_cast<const int32_t*>(i32.data()) == 7);
  CHECK(i64.size() == 8);
  CHECK(f.size() == 4);
  CHECK(*static_cast<const float*>(f.data()) == 1.5f);
  CHECK(d.size() == 8);
  CHECK_THAT(t.describe(), Contains("f32"));
}

TEST_CASE("the catalogue's hand-written GEMMs compile for every dtype and epilogue", "[handwritten][catalogue]") {
  Runtime rt = offline();
  for (const char* name : {"gemm", "gemm_bias_relu", "gemm_bias_gelu"}) {
    const catalogue::Entry& e = catalogue::find(name);
    REQUIRE(e.handwritten);
    for (DType d : {DType::f32, DType::bf16, DType::f16}) {
      catalogue::Handwritten h = e.handwritten(d);
      INFO(name << " " << to_string(d));
      HandwrittenKernel k = compile_cuda(rt, h.source);
      CHECK(k.binary().rfind("\x7f" "ELF", 0) == 0);
      CHECK(k.log().find("warning") == std::string::npos);
    }
  }
  CHECK_FALSE(catalogue::find("softmax").handwritten);
}

TEST_CASE("the eager framework's elementwise epilogue compiles for every dtype", "[handwritten][catalogue]") {
  Runtime rt = offline();
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    catalogue::EagerEpilogue e = catalogue::eager_epilogue(d);
    HandwrittenKernel k = compile_cuda(rt, e.source);
    CHECK(k.binary().rfind("\x7f" "ELF", 0) == 0);
    // Wrong operands are refused before anything is launched (here: before the
    // compile-only runtime would refuse the launch itself).
    float host[8] = {};
    TensorView c{host, d, {2, 4}, {}}, wrongBias{host, d, {3}, {}};
    CHECK_THROWS_WITH(e.launch(k, c, &wrongBias, nullptr, catalogue::Activation::relu, nullptr),
                      Contains("bias must be") && Contains("[4]"));
    CHECK_NOTHROW(e.launch(k, c, nullptr, nullptr, catalogue::Activation::none, nullptr)); // nothing to do
    CHECK_THROWS_WITH(e.launch(k, c, nullptr, nullptr, catalogue::Activation::gelu, nullptr), Contains("compile-only"));
  }
}

TEST_CASE("the hand-written GEMM's launcher checks the bias before the kernel can read past it", "[handwritten][errors]") {
  Runtime rt = offline();
  catalogue::Handwritten h = catalogue::find("gemm_bias_relu").handwritten(DType::bf16);
  HandwrittenKernel k = compile_cuda(rt, h.source);
  uint16_t buf[64] = {};
  TensorView A{buf, DType::bf16, {4, 4}, {}}, B{buf, DType::bf16, {4, 8}, {}}, C{buf, DType::bf16, {4, 8}, {}};
  TensorView shortBias{buf, DType::bf16, {4}, {}};
  CHECK_THROWS_WITH(h.launch(k, {A, B, shortBias, C}, nullptr), Contains("bias must be a contiguous bf16[8]"));
}
