// The CUDA support layer: the driver loaded with dlopen (never linked), its errors, the RAII
// handles, and PTX -> cubin with nvJitLink (also loaded with dlopen). Runs everywhere:
// without an NVIDIA driver the [nogpu] cases check that kiln says so clearly; with one
// the [gpu] cases load, launch and time a kernel. nvJitLink needs no GPU.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "Driver.h"
#include "DynamicLibrary.h"
#include "NvJitLink.h"
#include "PtxModules.h"
#include "Ptxas.h"
#include "../whole_program.hpp"
#include "kiln/error.hpp"

using namespace kiln;
using namespace kiln::cuda;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// A kernel that stores 42 to *out; `target` is the PTX .target ("sm_90a", "sm_80").
std::string storeConstPtx(const std::string& target, const std::string& name = "kiln_store42") {
  return ".version 8.0\n"
         ".target " + target + "\n"
         ".address_size 64\n"
         "\n"
         ".visible .entry " + name + "(\n"
         "\t.param .u64 " + name + "_param_0\n"
         ")\n"
         "{\n"
         "\t.reg .b32 \t%r<2>;\n"
         "\t.reg .b64 \t%rd<3>;\n"
         "\n"
         "\tld.param.u64 \t%rd1, [" + name + "_param_0];\n"
         "\tcvta.to.global.u64 \t%rd2, %rd1;\n"
         "\tmov.u32 \t%r1, 42;\n"
         "\tst.global.u32 \t[%rd2], %r1;\n"
         "\tret;\n"
         "}\n";
}

// 48 floats loaded, a barrier, then stored in reverse: all 48 live at once, so with
// -maxrregcount (clamped by ptxas to 24 on sm_80) ptxas must spill. 1 KiB static smem.
std::string spillingPtx() {
  const int n = 48;
  std::string s = ".version 8.0\n.target sm_80\n.address_size 64\n"
                  ".visible .entry kiln_spill(.param .u64 p)\n{\n"
                  "  .reg .f32 %f<" + std::to_string(n) + ">;\n  .reg .b64 %rd<3>;\n"
                  "  .shared .align 4 .b8 buf[1024];\n"
                  "  ld.param.u64 %rd1, [p];\n  cvta.to.global.u64 %rd2, %rd1;\n";
  for (int i = 0; i < n; ++i)
    s += "  ld.volatile.global.f32 %f" + std::to_string(i) + ", [%rd2+" + std::to_string(4 * i) + "];\n";
  s += "  bar.sync 0;\n  st.shared.f32 [buf], %f0;\n";
  for (int i = 0; i < n; ++i)
    s += "  st.volatile.global.f32 [%rd2+" + std::to_string(4 * (n - 1 - i)) + "], %f" +
         std::to_string(i) + ";\n";
  return s + "  ret;\n}\n";
}

bool isElf(const std::vector<char>& image) {
  return image.size() > 4 && std::memcmp(image.data(), "\x7f" "ELF", 4) == 0;
}

// True when nvJitLink loads here; otherwise checks that compiling says Unsupported, and
// warns so the skipped cases stay visible.
bool haveNvJitLink() {
  std::string why;
  if (nvJitLinkAvailable(&why)) return true;
  WARN("nvJitLink is not available here, compile cases reduced to the error check: " << why);
  try {
    ptxToCubin(storeConstPtx("sm_80"), "sm_80", "kiln_store42");
    FAIL("ptxToCubin succeeded although nvJitLinkAvailable() said no");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(e.what(), Contains("libnvJitLink.so.13"));
  }
  return false;
}

// A driver call that "failed" with `r`, for the error-text checks.
CUresult pretendDriverCall(CUresult r) { return r; }

// Runs `fn` in a child process and returns what it wrote to the pipe (for the stub
// library, whose soname libcuda.so.1 must not be loaded into this process).
template <class Fn> std::string inChildProcess(Fn fn) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string text;
    try {
      text = fn();
    } catch (...) {
      text = "exception in child";
    }
    size_t off = 0;
    while (off < text.size()) {
      const ssize_t n = ::write(fds[1], text.data() + off, text.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  return out;
}

} // namespace

// ---------------------------------------------------------------------------------------
// The driver: loaded, not linked

TEST_CASE("Without an NVIDIA driver, driver() throws Unsupported naming libcuda.so.1 and what to do",
          "[cuda][nogpu]") {
  std::string why;
  if (available(&why)) {
    WARN("a CUDA driver is present here: the [gpu] cases check it instead");
    return;
  }
  CHECK_THAT(why, StartsWith("CUDA driver"));
  try {
    (void)driver();
    FAIL("driver() returned without a driver");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK(std::string(e.what()) == why); // available() explains exactly what driver() throws
    CHECK_THAT(e.what(), Contains("libcuda.so.1"));
    CHECK_THAT(e.what(), Contains("--backend=cpu"));
  }
  // The outcome is cached: a second call gives the same error, and the handle wrappers
  // fail the same way instead of crashing.
  CHECK_THROWS_MATCHES(driver(), Error, Catch::Matchers::Message(why));
  CHECK_THROWS_MATCHES(queryDevice(0), Error, Catch::Matchers::Message(why));
  CHECK_THROWS_MATCHES(DeviceBuffer(16), Error, Catch::Matchers::Message(why));
  CHECK_THROWS_MATCHES(Context(0), Error, Catch::Matchers::Message(why));
}

TEST_CASE("The toolkit's stub libcuda.so is reported as a stub, not as a working driver",
          "[cuda]") {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (::access(stub, R_OK) != 0) {
    WARN("no stub library at " << stub);
    return;
  }
  const std::string msg = inChildProcess([&] { return detail::probeDriver(stub); });
  CHECK_THAT(msg, StartsWith("CUDA driver is a stub: cuInit: CUDA_ERROR_STUB_LIBRARY"));
  CHECK_THAT(msg, Contains("stubs"));
  CHECK_THAT(msg, Contains("--backend=cpu"));
}

TEST_CASE("A missing driver library is reported with dlopen's own reason", "[cuda]") {
  const std::string msg = detail::probeDriver("libkiln-no-such-driver.so.1");
  CHECK_THAT(msg, StartsWith("CUDA driver not found: dlopen(libkiln-no-such-driver.so.1) failed: "));
  CHECK_THAT(msg, Contains("cannot open shared object file"));
}

TEST_CASE("KILN_CU_CHECK turns a failed call into a Runtime error naming the call, the error and file:line",
          "[cuda]") {
  try {
    KILN_CU_CHECK(pretendDriverCall(CUDA_ERROR_INVALID_VALUE));
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK_THAT(e.what(), StartsWith("pretendDriverCall(CUDA_ERROR_INVALID_VALUE) failed: CUDA_ERROR_INVALID_VALUE"));
    CHECK_THAT(e.what(), Contains(" at test/unit/test_cuda_support.cpp:"));
    CHECK_THAT(e.what(), !Contains("unusable"));
  }
  CHECK_NOTHROW([] { KILN_CU_CHECK(pretendDriverCall(CUDA_SUCCESS)); }());
  CHECK_THROWS_WITH(
      [] { KILN_CU_CHECK_CTX(pretendDriverCall(CUDA_ERROR_OUT_OF_MEMORY), "allocating 64 GiB"); }(),
      StartsWith("allocating 64 GiB: pretendDriverCall(CUDA_ERROR_OUT_OF_MEMORY) failed: "
                 "CUDA_ERROR_OUT_OF_MEMORY"));
}

TEST_CASE("Errors that corrupt the context say the context is now unusable", "[cuda]") {
  for (CUresult r : {CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED,
                     CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_ILLEGAL_INSTRUCTION,
                     CUDA_ERROR_ASSERT}) {
    CAPTURE(static_cast<int>(r));
    CHECK(isStickyError(r));
    CHECK_THROWS_WITH([r] { KILN_CU_CHECK(pretendDriverCall(r)); }(),
                      Contains(errorName(r) + std::string(" ")) && Contains("the CUDA context is now unusable"));
  }
  CHECK_FALSE(isStickyError(CUDA_ERROR_OUT_OF_MEMORY));
  CHECK_FALSE(isStickyError(CUDA_ERROR_NOT_FOUND));
  CHECK(errorName(CUDA_ERROR_ILLEGAL_ADDRESS) == "CUDA_ERROR_ILLEGAL_ADDRESS");
  // A code this header does not name (a newer driver's). Within the enum's value range:
  // 12345 is past it, and loading it is undefined behaviour (UBSan says so).
  CHECK(errorName(static_cast<CUresult>(998)) == "CUresult 998");
}

TEST_CASE("Driver handles are move-only, with noexcept moves and destructors", "[cuda]") {
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<Context>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<Module>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<DeviceBuffer>);
  STATIC_REQUIRE_FALSE(std::is_copy_assignable_v<Stream>);
  STATIC_REQUIRE_FALSE(std::is_copy_assignable_v<Event>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<Context>);
  STATIC_REQUIRE(std::is_nothrow_move_assignable_v<Module>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<DeviceBuffer>);
  STATIC_REQUIRE(std::is_nothrow_move_assignable_v<Stream>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<Event>);
  STATIC_REQUIRE(std::is_nothrow_destructible_v<Module>);
  STATIC_REQUIRE(std::is_nothrow_destructible_v<DeviceBuffer>);
  // Empty handles need no driver and destroy silently.
  DeviceBuffer empty;
  CHECK(empty.ptr() == 0);
  CHECK(empty.size() == 0);
  DeviceBuffer moved(std::move(empty));
  CHECK(moved.ptr() == 0);
  Module none;
  CHECK(none.get() == nullptr);
}

TEST_CASE("Arch strings: Hopper and newer get the 'a' suffix, older GPUs the plain sm_XY", "[cuda]") {
  CHECK(archFor(8, 0) == "sm_80");
  CHECK(archFor(8, 6) == "sm_86");
  CHECK(archFor(8, 9) == "sm_89");
  CHECK(archFor(9, 0) == "sm_90a");
  CHECK(archFor(10, 0) == "sm_100a");
  CHECK(archFor(10, 3) == "sm_103a");
  CHECK(archFor(12, 0) == "sm_120a");
  DeviceInfo h200;
  h200.cc_major = 9;
  h200.cc_minor = 0;
  CHECK(h200.arch() == "sm_90a");
  CHECK(formatDriverVersion(13000) == "13.0");
  CHECK(formatDriverVersion(12080) == "12.8");
}

// ---------------------------------------------------------------------------------------
// nvJitLink: PTX -> cubin, no GPU needed

TEST_CASE("nvJitLink turns a hand-written sm_90a kernel into a cubin with its register report",
          "[cuda][nvjitlink]") {
  if (!haveNvJitLink()) return;
  const CubinResult r = ptxToCubin(storeConstPtx("sm_90a"), "sm_90a", "kiln_store42");
  CHECK(isElf(r.cubin));
  CHECK(r.arch == "sm_90a");
  CHECK_THAT(r.compiler, StartsWith("nvJitLink 13."));
  CHECK_THAT(r.info_log, Contains("Compiling entry function 'kiln_store42' for 'sm_90a'"));
  CHECK(r.registers >= 1);
  CHECK(r.spill_stores == 0);
  CHECK(r.spill_loads == 0);
  CHECK(r.shared_bytes == 0);
  CHECK(r.stack_bytes == 0);
}

TEST_CASE("nvJitLink turns the same kernel written for sm_80 into an sm_80 cubin", "[cuda][nvjitlink]") {
  if (!haveNvJitLink()) return;
  const CubinResult r = ptxToCubin(storeConstPtx("sm_80"), "sm_80", "kiln_store42");
  CHECK(isElf(r.cubin));
  CHECK_THAT(r.info_log, Contains("for 'sm_80'"));
  CHECK(r.registers >= 1);
  CHECK(r.spill_stores == 0);
  CHECK(r.spill_loads == 0);
}

TEST_CASE("nvJitLink accepts every arch string kiln derives for Ampere to Blackwell", "[cuda][nvjitlink]") {
  if (!haveNvJitLink()) return;
  const std::string ptx = storeConstPtx("sm_80"); // sm_80 PTX compiles for any newer arch
  for (auto [major, minor] : std::vector<std::pair<int, int>>{
           {8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}}) {
    const std::string arch = archFor(major, minor);
    CAPTURE(arch);
    const CubinResult r = ptxToCubin(ptx, arch, "kiln_store42");
    CHECK(isElf(r.cubin));
    CHECK(r.registers >= 1);
  }
}

TEST_CASE("Compiling the same PTX twice gives the full ptxas report both times",
          "[cuda][nvjitlink]") {
  // With a driver installed, nvJitLink's disk cache would answer the second call with a
  // summary lacking spill counts; kiln passes -no-cache so the report never depends on
  // what ran before.
  if (!haveNvJitLink()) return;
  const std::string ptx = storeConstPtx("sm_90a", "kiln_store42_twice");
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    const CubinResult r = ptxToCubin(ptx, "sm_90a", "kiln_store42_twice");
    CHECK_THAT(r.info_log, Contains("Compiling entry function 'kiln_store42_twice'"));
    CHECK(r.registers >= 1);
    CHECK(r.spill_stores == 0);
    CHECK(r.spill_loads == 0);
  }
}

TEST_CASE("Spills, static shared memory and barriers are read from the ptxas report",
          "[cuda][nvjitlink]") {
  if (!haveNvJitLink()) return;
  const CubinResult r = ptxToCubin(spillingPtx(), "sm_80", "kiln_spill", {"-maxrregcount=16"});
  CHECK(isElf(r.cubin));
  CHECK(r.registers > 0);
  CHECK(r.registers <= 32);
  CHECK(r.spill_stores > 0);
  CHECK(r.spill_loads > 0);
  CHECK(r.stack_bytes >= r.spill_stores);
  CHECK(r.shared_bytes == 1024);
  CHECK(r.barriers == 1);
}

TEST_CASE("Invalid PTX gives CompileFailed carrying nvJitLink's error log", "[cuda][nvjitlink]") {
  if (!haveNvJitLink()) return;
  const std::string bad = ".version 8.0\n.target sm_90a\n.address_size 64\n"
                          ".visible .entry kiln_bad(.param .u64 p)\n{\n"
                          "  .reg .b32 %r<2>;\n  bogus.op %r1;\n  ret;\n}\n";
  try {
    ptxToCubin(bad, "sm_90a", "kiln_bad");
    FAIL("invalid PTX compiled");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::CompileFailed);
    CHECK_THAT(e.what(), StartsWith("nvJitLink: compiling PTX of kernel 'kiln_bad' for sm_90a"));
    CHECK_THAT(e.what(), Contains("NVJITLINK_ERROR_PTX_COMPILE"));
    // ptxas's own diagnostic, with the PTX line, from the error log
    CHECK_THAT(e.what(), Contains("line 7"));
    CHECK_THAT(e.what(), Contains("Not a name of any known instruction: 'bogus'"));
  }
  // sm_90a PTX cannot be compiled for sm_80: also CompileFailed, with ptxas's reason.
  CHECK_THROWS_MATCHES(ptxToCubin(storeConstPtx("sm_90a"), "sm_80", "kiln_store42"), Error,
                       Catch::Matchers::Predicate<Error>(
                           [](const Error& e) {
                             return e.kind() == ErrorKind::CompileFailed &&
                                    std::strstr(e.what(), "ptxas") != nullptr;
                           },
                           "CompileFailed with ptxas's message"));
}

TEST_CASE("An arch nvJitLink does not know is Unsupported, a kernel name the PTX lacks is NotFound",
          "[cuda][nvjitlink]") {
  if (!haveNvJitLink()) return;
  try {
    ptxToCubin(storeConstPtx("sm_80"), "sm_999", "kiln_store42");
    FAIL("sm_999 accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(e.what(), Contains("sm_999"));
    CHECK_THAT(e.what(), Contains("NVJITLINK_ERROR_UNRECOGNIZED_ARCH"));
  }
  try {
    ptxToCubin(storeConstPtx("sm_80"), "sm_80", "kiln_store43");
    FAIL("missing entry accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::NotFound);
    CHECK_THAT(e.what(), Contains("no entry 'kiln_store43' (entries: 'kiln_store42')"));
  }
}

TEST_CASE("The report parser picks the requested kernel and falls back to nvJitLink's summary",
          "[cuda][nvjitlink]") {
  const std::string twoKernels =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'a' for 'sm_90a'\n"
      "ptxas info    : Function properties for a\n"
      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 49152 bytes smem, 400 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'b' for 'sm_90a'\n"
      "ptxas info    : Function properties for b\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers, 380 bytes cmem[0]\n";
  CubinResult a, b, c;
  REQUIRE(parsePtxasInfo(twoKernels, "a", a));
  CHECK(a.registers == 255);
  CHECK(a.spill_stores == 4);
  CHECK(a.spill_loads == 4);
  CHECK(a.stack_bytes == 8);
  CHECK(a.shared_bytes == 49152);
  CHECK(a.barriers == 1);
  REQUIRE(parsePtxasInfo(twoKernels, "b", b));
  CHECK(b.registers == 40);
  CHECK(b.spill_stores == 0);
  CHECK(b.shared_bytes == 0);
  CHECK_FALSE(parsePtxasInfo(twoKernels, "c", c));
  CHECK(c.registers == -1);

  const std::string summaryOnly =
      "info    : 0 bytes gmem\n"
      "info    : Function properties for 'k':\n"
      "info    : used 24 registers, used 1 barriers, 224 stack, 1024 bytes smem, "
      "360 bytes cmem[0], 0 bytes lmem\n";
  CubinResult k;
  REQUIRE(parsePtxasInfo(summaryOnly, "k", k));
  CHECK(k.registers == 24);
  CHECK(k.barriers == 1);
  CHECK(k.stack_bytes == 224);
  CHECK(k.shared_bytes == 1024);
  CHECK(k.spill_stores == -1); // the summary does not say
  CubinResult other;
  CHECK_FALSE(parsePtxasInfo(summaryOnly, "k2", other));
  CHECK(other.registers == -1);

  // ptxas run as a program (-v) indents the stack-frame line instead of prefixing it.
  const std::string program =
      "ptxas info    : Compiling entry function 'a' for 'sm_90a'\n"
      "ptxas info    : Function properties for a\n"
      "    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers\n"
      "ptxas info    : Compiling entry function 'b' for 'sm_90a'\n"
      "ptxas info    : Function properties for b\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 96 registers, used 1 barriers, 1024 bytes smem\n";
  CubinResult pa, pb;
  REQUIRE(parsePtxasInfo(program, "a", pa));
  CHECK(pa.registers == 168);
  CHECK(pa.stack_bytes == 16);
  CHECK(pa.spillBytes() == 20);
  REQUIRE(parsePtxasInfo(program, "b", pb));
  CHECK(pb.registers == 96);
  CHECK(pb.spillBytes() == 0);
  CHECK(pb.shared_bytes == 1024);
}

TEST_CASE("the ptxas a deploy compile uses: off is none, a named program that is not ptxas or of another release "
          "is refused by name, the toolkit's is found with its release",
          "[cuda][ptxas]") {
  std::string why;
  const std::string release = nvJitLinkVersionString().substr(std::string("nvJitLink ").size());
  CHECK_FALSE(findPtxas("off", release, &why));
  CHECK(why == "KILN_PTXAS=off");
  CHECK_THROWS_WITH(findPtxas("/nonexistent/ptxas", release, &why),
                    Contains("KILN_PTXAS is '/nonexistent/ptxas', which does not run as ptxas (no such executable file)"));
  CHECK_THROWS_WITH(findPtxas("/bin/true", release, &why),
                    Contains("KILN_PTXAS is '/bin/true'") && Contains("does not name a ptxas release"));
  CHECK_THROWS_WITH(findPtxas(KILN_PTXAS, "99.9", &why),
                    Contains("KILN_PTXAS is '" + std::string(KILN_PTXAS) + "', ptxas " + release) &&
                        Contains("but kiln's nvJitLink is 99.9"));
  const std::optional<PtxasTool> named = findPtxas(KILN_PTXAS, release, &why);
  REQUIRE(named);
  CHECK(named->path == KILN_PTXAS);
  CHECK(named->release == release); // one toolkit
  // Unset: the toolkit's or PATH's, of nvJitLink's release only.
  const std::optional<PtxasTool> found = findPtxas("", release, &why);
  REQUIRE(found);
  CHECK(found->release == release);
  CHECK_FALSE(findPtxas("", "99.9", &why));
  CHECK_THAT(why, Contains("no ptxas of nvJitLink's release 99.9 (found ") && Contains("(" + release + ")"));
}

TEST_CASE("ptxas compiles a module as a whole program into a cubin with its report, and a failure carries its "
          "message", "[cuda][ptxas]") {
  std::string why;
  const std::optional<PtxasTool> tool =
      findPtxas(KILN_PTXAS, nvJitLinkVersionString().substr(std::string("nvJitLink ").size()), &why);
  REQUIRE(tool);
  const std::string ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n"
                          ".visible .entry k(.param .u64 p) { .reg .b64 %rd<2>; .reg .b32 %r<2>;\n"
                          "  ld.param.u64 %rd1, [p]; mov.u32 %r1, 7; st.global.u32 [%rd1], %r1; ret; }\n";
  for (int threads : {1, 0}) {
    const CubinResult c = ptxasCompile(*tool, ptx, "sm_90a", "k", threads);
    REQUIRE(c.cubin.size() > 4);
    CHECK(std::memcmp(c.cubin.data(), "\x7f" "ELF", 4) == 0);
    CHECK(c.compiler == "ptxas " + tool->release);
    CHECK(c.registers > 0);
    CHECK(c.spillBytes() == 0);
  }
  const std::string broken = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { bogus.op; }\n";
  try {
    ptxasCompile(*tool, broken, "sm_90a", "k", 1);
    FAIL("a broken module compiled");
  } catch (const kiln::Error& e) {
    CHECK(e.kind() == kiln::ErrorKind::CompileFailed);
    CHECK_THAT(e.what(), Contains("compiling kernel 'k' for sm_90a failed") && Contains("bogus"));
  }
}

// ---------------------------------------------------------------------------------------
// With a GPU (the H200 machine): the same layer against the real driver

TEST_CASE("With a GPU, queryDevice(0) reports a named device of compute capability 8.0 or newer",
          "[cuda][gpu]") {
  std::string why;
  if (!available(&why)) {
    WARN("no GPU here, [gpu] case skipped: " << why);
    return;
  }
  const DeviceInfo info = queryDevice(0);
  INFO(info.name << " cc " << info.cc_major << "." << info.cc_minor << " " << info.arch());
  CHECK(info.ordinal == 0);
  CHECK_FALSE(info.name.empty());
  CHECK(info.cc_major >= 8);
  CHECK(info.sm_count > 0);
  CHECK(info.total_mem > (int64_t(1) << 30));
  CHECK(info.max_smem_per_block == 48 * 1024);
  CHECK(info.max_smem_per_block_optin >= info.max_smem_per_block);
  CHECK(info.driver_version >= 12000);
  CHECK(info.arch() == archFor(info.cc_major, info.cc_minor));
  CHECK(deviceCount() >= 1);
  CHECK_THROWS_MATCHES(queryDevice(deviceCount()), Error,
                       Catch::Matchers::Predicate<Error>(
                           [](const Error& e) { return e.kind() == ErrorKind::InvalidArgument; },
                           "InvalidArgument"));
  CUdevice dev = 0;
  CHECK_THROWS_WITH([&] { KILN_CU_CALL(cuDeviceGet, &dev, 9999); }(),
                    StartsWith("cuDeviceGet(&dev, 9999) failed: CUDA_ERROR_INVALID_DEVICE (") &&
                        Contains("test/unit/test_cuda_support.cpp:"));
}

TEST_CASE("With a GPU, an nvJitLink cubin loads, launches, writes 42 and is timed by events",
          "[cuda][gpu]") {
  std::string why;
  if (!available(&why)) {
    WARN("no GPU here, [gpu] case skipped: " << why);
    return;
  }
  REQUIRE(nvJitLinkAvailable(&why));
  const DeviceInfo info = queryDevice(0);
  Context ctx(0);
  CUcontext cur = nullptr;
  KILN_CU_CALL(cuCtxGetCurrent, &cur);
  CHECK(cur == ctx.get());

  // sm_80 PTX compiled for this device's own arch (sm_90a on the H200).
  const CubinResult cubin = ptxToCubin(storeConstPtx("sm_80"), info.arch(), "kiln_store42");
  Module mod(cubin.cubin, "kiln_store42");
  CUfunction fn = mod.getFunction("kiln_store42");
  const FunctionInfo fi = queryFunction(fn);
  CHECK(fi.registers == cubin.registers);
  CHECK(fi.local_bytes == 0);
  CHECK(fi.binary_version == info.cc_major * 10 + info.cc_minor);

  DeviceBuffer buf(64);
  CHECK(buf.ptr() != 0);
  CHECK(pointerDeviceOrdinal(buf.ptr()) == 0);
  // The allocation a pointer lies in, from inside it too (launch checks bound views by it).
  const PointerInfo inside = pointerInfo(buf.ptr() + 16);
  CHECK(inside.ordinal == 0);
  CHECK(inside.start == buf.ptr());
  CHECK(inside.size >= 64);
  int hostWord = 0;
  CHECK(pointerInfo(reinterpret_cast<CUdeviceptr>(&hostWord)).ordinal == -1);
  buf.fillWords(0xDEADBEEFu); // poison
  Stream stream;
  Event start, stop;
  start.record(stream.get());
  CUdeviceptr p = buf.ptr();
  void* params[] = {&p};
  launchKernel(fn, "kiln_store42", {1, 1, 1}, {1, 1, 1}, 0, stream.get(), params);
  stop.record(stream.get());
  stream.synchronize();
  uint32_t host[16] = {};
  buf.download(host, sizeof(host));
  CHECK(host[0] == 42u);
  CHECK(host[1] == 0xDEADBEEFu); // only word 0 written
  const float ms = Event::elapsedMs(start, stop);
  CHECK(ms >= 0.f);
  CHECK(ms < 1000.f);

  // Async copies round-trip.
  const uint32_t up[4] = {1, 2, 3, 4};
  uint32_t down[4] = {};
  buf.uploadAsync(up, sizeof(up), stream.get(), 16);
  buf.downloadAsync(down, sizeof(down), stream.get(), 16);
  stream.synchronize();
  CHECK(std::memcmp(up, down, sizeof(up)) == 0);

  // The driver's own PTX JIT is the fallback path: it loads the PTX text directly.
  Module jitted(storeConstPtx("sm_80"), "kiln_store42 (ptx)");
  CHECK(jitted.getFunction("kiln_store42") != nullptr);
  ctx.synchronize();
}

TEST_CASE("With a GPU, misuse gives kiln errors naming the kernel, the buffer or the architecture",
          "[cuda][gpu]") {
  std::string why;
  if (!available(&why)) {
    WARN("no GPU here, [gpu] case skipped: " << why);
    return;
  }
  const DeviceInfo info = queryDevice(0);
  Context ctx(0);
  const CubinResult cubin = ptxToCubin(storeConstPtx("sm_80"), info.arch(), "kiln_store42");
  Module mod(cubin.cubin, "kiln_store42");
  try {
    mod.getFunction("kiln_store43");
    FAIL("missing kernel found");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::NotFound);
    CHECK_THAT(e.what(), Contains("kernel 'kiln_store43' not found in CUDA module 'kiln_store42'"));
  }

  DeviceBuffer buf(16);
  uint32_t host[8] = {};
  CHECK_THROWS_WITH(buf.download(host, sizeof(host)),
                    "download of 32 bytes at offset 0 is outside a device buffer of 16 bytes");
  DeviceBuffer moved = std::move(buf);
  CHECK(buf.ptr() == 0);
  CHECK(moved.size() == 16);

  // A cubin for another architecture: Unsupported, saying so.
  const std::string other = info.cc_major == 10 ? "sm_90a" : "sm_100a";
  const CubinResult foreign = ptxToCubin(storeConstPtx("sm_80"), other, "kiln_store42");
  try {
    Module m(foreign.cubin, "kiln_store42@" + other);
    FAIL("a cubin for " << other << " loaded on " << info.arch());
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(e.what(), Contains("CUDA_ERROR_NO_BINARY_FOR_GPU"));
    CHECK_THAT(e.what(), Contains("another GPU architecture"));
  }

  // A launch the device cannot run names the kernel and the shape.
  CUfunction fn = mod.getFunction("kiln_store42");
  CUdeviceptr p = moved.ptr();
  void* params[] = {&p};
  CHECK_THROWS_WITH(launchKernel(fn, "kiln_store42", {1, 1, 1}, {4096, 1, 1}, 0, nullptr, params),
                    StartsWith("launching kernel 'kiln_store42' with grid (1, 1, 1), block (4096, 1, 1)") &&
                        Contains("CUDA_ERROR_INVALID_VALUE"));
}

TEST_CASE("With a GPU, handles are released cleanly even when no context is current on the releasing thread",
          "[cuda][gpu]") {
  std::string why;
  if (!available(&why)) {
    WARN("no GPU here, [gpu] case skipped: " << why);
    return;
  }
  const DeviceInfo info = queryDevice(0);
  Context ctx(0);
  const CubinResult cubin = ptxToCubin(storeConstPtx("sm_80"), info.arch(), "kiln_store42");
  const int failuresBefore = detail::loggedFailureCount();
  {
    auto mod = std::make_unique<Module>(cubin.cubin, "kiln_store42");
    auto buf = std::make_unique<DeviceBuffer>(1 << 20);
    auto stream = std::make_unique<Stream>();
    auto event = std::make_unique<Event>();
    event->record(stream->get());
    stream->synchronize();
    // Released on this thread with no context current...
    KILN_CU_CALL(cuCtxSetCurrent, nullptr);
    mod.reset();
    buf.reset();
    // ...and on a thread that never had one.
    std::thread([&] {
      stream.reset();
      event.reset();
    }).join();
    ctx.makeCurrent();
  }
  CHECK(detail::loggedFailureCount() == failuresBefore);
  // The context still works afterwards.
  DeviceBuffer again(64);
  again.fillBytes(0);
  ctx.synchronize();
}

TEST_CASE("With a GPU, a Context restores the previously current context when it goes away",
          "[cuda][gpu]") {
  std::string why;
  if (!available(&why)) {
    WARN("no GPU here, [gpu] case skipped: " << why);
    return;
  }
  KILN_CU_CALL(cuCtxSetCurrent, nullptr);
  {
    Context ctx(0);
    CUcontext cur = nullptr;
    KILN_CU_CALL(cuCtxGetCurrent, &cur);
    CHECK(cur == ctx.get());
    Context moved = std::move(ctx);
    CHECK_FALSE(ctx);
    CHECK(moved.get() == cur);
  }
  CUcontext after = reinterpret_cast<CUcontext>(1);
  KILN_CU_CALL(cuCtxGetCurrent, &after);
  CHECK(after == nullptr);
  CHECK_THROWS_WITH(Context(-1), Contains("CUDA device ordinal -1 is out of range"));
}

namespace {
int g_released = 0;
int g_lastReleased = 0;
struct CountRelease {
  void operator()(int v) const noexcept {
    ++g_released;
    g_lastReleased = v;
  }
};
} // namespace

TEST_CASE("A Handle releases its object exactly once: not when empty, not after a move", "[cuda]") {
  g_released = 0;
  {
    Handle<int, CountRelease> empty;
    CHECK_FALSE(empty);
    Handle<int, CountRelease> a(7);
    CHECK(a);
    Handle<int, CountRelease> b(std::move(a));
    CHECK_FALSE(a); // NOLINT: moved-from is empty by contract
    CHECK(b.get() == 7);
    Handle<int, CountRelease> c(9);
    c = std::move(b); // 9 is released now, 7 moves in
    CHECK(g_released == 1);
    CHECK(g_lastReleased == 9);
    *c.out() = 11; // out() releases 7 first
    CHECK(g_released == 2);
    CHECK(g_lastReleased == 7);
  }
  CHECK(g_released == 3); // 11, at the end of the scope; the empty ones release nothing
  CHECK(g_lastReleased == 11);
}

TEST_CASE("A DeviceBuffer that holds nothing has size 0 and refuses copies, naming the range", "[cuda]") {
  DeviceBuffer empty;
  CHECK(empty.ptr() == 0);
  CHECK(empty.size() == 0);
  char byte = 0;
  CHECK_THROWS_WITH(empty.upload(&byte, 1), Contains("outside a device buffer of 0 bytes"));
  DeviceBuffer moved(std::move(empty));
  CHECK(moved.size() == 0);
}

TEST_CASE("ptxas's warnings and performance notes are picked out of an info log", "[cuda]") {
  const std::string log =
      "ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain compatibility.\n"
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas warning : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized\n"
      "ptxas info    : Used 90 registers, used 1 barriers\n"
      "info    : used 90 registers, used 1 barriers, 0 stack\n";
  std::vector<std::string> notes = ptxasNotes(log);
  REQUIRE(notes.size() == 2);
  CHECK(notes[0] == "(C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain compatibility.");
  CHECK_THAT(notes[1], Contains("wgmma.mma_async instructions are serialized"));
  CHECK(ptxasNotes("ptxas info    : Used 8 registers\n").empty());
  // Appended to a report's notes, "; "-separated, to what is there.
  std::string joined = "earlier";
  appendPtxasNotes(joined, log);
  CHECK(joined == "earlier; " + notes[0] + "; " + notes[1]);
  std::string none;
  appendPtxasNotes(none, "ptxas info    : Used 8 registers\n");
  CHECK(none.empty());
}

TEST_CASE("spill bytes are stores plus loads, unknown when ptxas does not say", "[cuda]") {
  CubinResult c;
  CHECK(c.spillBytes() == -1);
  c.spill_stores = 60, c.spill_loads = 52;
  CHECK(c.spillBytes() == 112);
  c.spill_loads = -1; // stores reported, loads not
  CHECK(c.spillBytes() == 60);
}

TEST_CASE("a toolkit library's candidate paths name each place once", "[cuda][loader]") {
  const char* saved = std::getenv("CUDA_HOME");
  const std::string keep = saved ? saved : "";
  ::setenv("CUDA_HOME", "/usr/local/cuda", 1); // the usual value: the fallback's own root
  std::vector<std::string> c = toolkitCandidates({"libx.so.1", "libx.so"}, "libx.so.1");
  if (saved) ::setenv("CUDA_HOME", keep.c_str(), 1); else ::unsetenv("CUDA_HOME");
  CHECK(std::count(c.begin(), c.end(), "/usr/local/cuda/lib64/libx.so.1") == 1);
  CHECK(c.front() == "libx.so.1"); // the loader's own search first
}

TEST_CASE("A kernel's PTX modules go into one cache payload and come back out the same", "[cuda][cache]") {
  const PtxModules in{"// twin 1\n", {"// twin 2, longer\n", "// twin 3\n"}, "// the portable kernel\n"};
  nlohmann::json meta = {{"entry", "k"}};
  const std::string payload = joinPtxModules(in, meta);
  CHECK(payload == in.first + in.twins[0] + in.twins[1] + *in.portable);
  CHECK(meta.at("modules_at") == nlohmann::json::array({10, 28}));
  CHECK(meta.at("portable_at") == 38);
  const PtxModules out = splitPtxModules(payload, meta, /*isPtx=*/true, "k");
  CHECK(out.first == in.first);
  CHECK(out.twins == in.twins);
  CHECK(out.portable == in.portable);
  // One module and nothing else (a kernel without twins, an entry from before): no starts.
  nlohmann::json plain = {{"entry", "k"}};
  CHECK(joinPtxModules({"// all\n", {}, std::nullopt}, plain) == "// all\n");
  CHECK_FALSE(plain.contains("modules_at"));
  CHECK_FALSE(plain.contains("portable_at"));
  const PtxModules one = splitPtxModules("// all\n", plain, true, "k");
  CHECK((one.first == "// all\n" && one.twins.empty() && !one.portable));
}

namespace {
// A twin's module as LLVM's NVPTX back end writes it: comments, the header, the shared
// ring's declaration, one entry with performance directives and a body with nested
// braces (inline PTX) and braces in comments.
std::string twinModule(const std::string& entry, int threads) {
  return "//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 8.0\n.target sm_90a\n.address_size 64\n\n"
         "\t// .globl\t" + entry + "\n.extern .shared .align 1024 .b8 kiln_sm90_smem[];\n\n"
         ".visible .entry " + entry + "(\n\t.param .u64 .ptr .global .align 1 " + entry + "_param_0\n)\n"
         ".maxntid " + std::to_string(threads) + ", 1, 1\n.minnctapersm 1\n{\n"
         "\t.reg .b32 \t%r<3>;\n\t.reg .b64 \t%rd<4>;\n\t// a comment with a brace: {\n"
         "\tld.param.u64 \t%rd1, [" + entry + "_param_0];\n\tcvta.to.global.u64 \t%rd2, %rd1;\n"
         "\tmov.u64 \t%rd3, kiln_sm90_smem;\n\t// begin inline asm\n\t{\n\t.reg .pred p;\n"
         "\tsetp.ne.b32 p, 1, 0;\n\t}\n\t// end inline asm\n"
         "\tmov.u32 \t%r1, " + std::to_string(threads) + ";\n\tst.global.u32 \t[%rd2], %r1;\n\tret;\n\n}\n\t// -- End function\n";
}
size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
} // namespace

TEST_CASE("A kernel's twin modules join into one module for the driver's JIT: one header, one shared ring, "
          "every entry once",
          "[cuda][cache]") {
  const std::string first = twinModule("k__sm90", 384);
  const std::vector<std::string> more = {twinModule("k__sm90x2", 384), twinModule("k__sm90_dec", 256)};
  const std::optional<std::string> joined = joinForJit(first, more);
  REQUIRE(joined);
  CHECK(joined->rfind(first, 0) == 0); // the first module as it was, then the others' entries
  CHECK(occurrences(*joined, ".version") == 1);
  CHECK(occurrences(*joined, ".target") == 1);
  CHECK(occurrences(*joined, ".extern .shared") == 1);
  for (const char* entry : {"k__sm90(", "k__sm90x2(", "k__sm90_dec("})
    CHECK(occurrences(*joined, std::string(".visible .entry ") + entry) == 1);
  CHECK(occurrences(*joined, "setp.ne.b32 p, 1, 0;") == 3); // each body whole
  CHECK(joined->find("mov.u32 \t%r1, 256;") > joined->find(".entry k__sm90_dec("));
  // ptxas (whole program, as the driver's JIT) takes it as one module and compiles all three.
  const std::string log = kiln::testing::wholeProgramLog(*joined);
  for (const char* entry : {"k__sm90", "k__sm90x2", "k__sm90_dec"})
    CHECK(occurrences(log, std::string("Compiling entry function '") + entry + "'") == 1);
}

TEST_CASE("Twin modules that could clash when joined are left to load one by one", "[cuda][cache]") {
  const std::string first = twinModule("k__sm90", 384);
  auto refused = [&](const std::string& other) { return !joinForJit(first, {other}).has_value(); };
  std::string otherTarget = twinModule("k__b", 384);
  otherTarget.replace(otherTarget.find("sm_90a"), 6, "sm_80");
  CHECK(refused(otherTarget));
  // A declaration first lacks: its name could be one of first's.
  CHECK(refused(".global .align 4 .u32 counter;\n" + twinModule("k__b", 384)));
  CHECK(refused(twinModule("k__b", 384) + ".func helper()\n{\n\tret;\n}\n"));
  CHECK(refused(twinModule("k__b", 384) + "stray text\n"));
  std::string unclosed = twinModule("k__b", 384);
  unclosed.erase(unclosed.rfind('}'));
  CHECK(refused(unclosed));
  std::string prototype = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k__c(\n\t.param .u64 a\n);\n";
  CHECK(refused(prototype));
  CHECK(refused(twinModule("k__b", 384) + "/* never closed"));
  // What first does not have is no reason to refuse the others, and none is no join.
  CHECK(joinForJit(first, {twinModule("k__b", 384)}).has_value());
  CHECK(joinForJit(first, {}) == first);
}

TEST_CASE("A cache entry whose module starts do not fit its payload is refused, naming the module",
          "[cuda][cache][errors]") {
  nlohmann::json good;
  const std::string payload = joinPtxModules({"aaaa", {"bbbb", "cccc"}, "dddd"}, good);
  auto refusal = [&](const nlohmann::json& meta, bool isPtx = true) {
    try {
      splitPtxModules(payload, meta, isPtx, "gemm_bias_relu");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  nlohmann::json bad = good;
  bad["modules_at"] = {8, 4}; // out of order
  CHECK_THAT(refusal(bad), Contains("gemm_bias_relu") && Contains("twin module 3 starts at byte 4 of a 16-byte PTX"));
  bad["modules_at"] = {4, 4}; // an empty module
  CHECK_THAT(refusal(bad), Contains("twin module 3 starts at byte 4"));
  bad["modules_at"] = {0}; // the first module cannot be empty
  CHECK_THAT(refusal(bad), Contains("twin module 2 starts at byte 0"));
  bad = good;
  bad["portable_at"] = 16; // at the end: an empty fallback
  CHECK_THAT(refusal(bad), Contains("portable kernel's module starts at byte 16 of a 16-byte"));
  bad["portable_at"] = 1e30; // no integer
  CHECK_THAT(refusal(bad), Contains("portable kernel's module is not an integer"));
  bad["portable_at"] = -3;
  CHECK_THAT(refusal(bad), Contains("starts at byte -3"));
  bad = good;
  bad["portable_at"] = 6; // before the last twin's start
  CHECK_THAT(refusal(bad), Contains("portable kernel's module starts at byte 6"));
  bad = good;
  bad["modules_at"] = 4; // not a list
  CHECK_THAT(refusal(bad), Contains("modules_at is not a list"));
  // A cubin is one module: any start in its metadata is refused.
  CHECK_THAT(refusal(good, /*isPtx=*/false), Contains("a cubin is one module"));
}
