#include "CacheFlush.h"

#include <array>
#include <string>

namespace kiln::cuda {

namespace {

constexpr size_t kFlushBytes = size_t(512) << 20; // ten times the largest L2 (H100/H200: 50 MiB)
constexpr unsigned kThreads = 512;

// kiln_flush_read(src, vectors, sink): thread i reads 16-byte vectors i, i + threads, ...
// of src and XORs them; each writes its result to sink[tid % 256], so no load is dead
// code. sm_70 PTX: the driver's JIT builds it for any GPU kiln runs on.
constexpr const char* kReadPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry kiln_flush_read(.param .u64 src, .param .u64 vectors, .param .u64 sink)
{
  .reg .pred %p<2>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [vectors];
  ld.param.u64 %rd3, [sink];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd3, %rd3;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mul.wide.u32 %rd4, %r1, %r2;
  cvt.u64.u32 %rd5, %r3;
  add.u64 %rd4, %rd4, %rd5;
  mul.wide.u32 %rd6, %r4, %r2;
  mov.b32 %r5, 0;
LOOP:
  setp.ge.u64 %p1, %rd4, %rd2;
  @%p1 bra DONE;
  shl.b64 %rd7, %rd4, 4;
  add.u64 %rd8, %rd1, %rd7;
  ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd8];
  xor.b32 %r5, %r5, %r6;
  xor.b32 %r5, %r5, %r7;
  xor.b32 %r5, %r5, %r8;
  xor.b32 %r5, %r5, %r9;
  add.u64 %rd4, %rd4, %rd6;
  bra.uni LOOP;
DONE:
  and.b32 %r10, %r3, 255;
  mul.wide.u32 %rd9, %r10, 4;
  add.u64 %rd10, %rd3, %rd9;
  st.global.u32 [%rd10], %r5;
  ret;
}
)";

} // namespace

L2Flush::L2Flush(int smCount)
    : buffer_(kFlushBytes), sink_(256 * 4), module_(std::string(kReadPtx), "kiln_flush_read"),
      read_(module_.getFunction("kiln_flush_read")), blocks_(4 * (smCount > 0 ? smCount : 1)) {
  buffer_.fillBytes(0x5A); // defined contents, once; the reads leave them clean in the L2
}

void L2Flush::run(CUstream stream) {
  CUdeviceptr src = buffer_.ptr(), sink = sink_.ptr();
  uint64_t vectors = kFlushBytes / 16;
  void* params[] = {&src, &vectors, &sink};
  launchKernel(read_, "kiln_flush_read", {unsigned(blocks_), 1, 1}, {kThreads, 1, 1}, 0, stream, params);
}

} // namespace kiln::cuda
