#include "RaggedOffsets.h"

#include <algorithm>
#include <string>

namespace kiln::cuda {

namespace {

// kiln_ragged_offsets(offsets, out, n, tokens, mq, mk, mv, mo, maxlen, stride): thread i of
// the grid (striding) takes start i of 0 .. n: x = clamp(offsets[i], 0, tokens);
// out[(k + 1) stride + i] = x * m_k for Q, K, V, O (k = 0 .. 3); for i < n also out[i] =
// clamp(clamp(offsets[i + 1]) - x, 0, maxlen). sm_70 PTX: the driver's JIT builds it for any
// GPU.
constexpr const char* kPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry kiln_ragged_offsets(.param .u64 offsets, .param .u64 out, .param .u32 n, .param .u32 tokens,
    .param .u32 mq, .param .u32 mk, .param .u32 mv, .param .u32 mo, .param .u32 maxlen, .param .u32 stride)
{
  .reg .pred %p<3>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [offsets];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [tokens];
  ld.param.u32 %r3, [mq];
  ld.param.u32 %r4, [mk];
  ld.param.u32 %r5, [mv];
  ld.param.u32 %r6, [mo];
  ld.param.u32 %r7, [maxlen];
  ld.param.u32 %r17, [stride];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r8, %ctaid.x;
  mov.u32 %r9, %ntid.x;
  mov.u32 %r10, %tid.x;
  mad.lo.u32 %r11, %r8, %r9, %r10;
  mov.u32 %r12, %nctaid.x;
  mul.lo.u32 %r12, %r12, %r9;
  add.u32 %r13, %r1, 1;
  mul.wide.u32 %rd8, %r17, 4;
  add.u64 %rd6, %rd2, %rd8;
LOOP:
  setp.ge.u32 %p1, %r11, %r13;
  @%p1 bra DONE;
  mul.wide.u32 %rd3, %r11, 4;
  add.u64 %rd4, %rd1, %rd3;
  ld.global.u32 %r14, [%rd4];
  max.s32 %r14, %r14, 0;
  min.s32 %r14, %r14, %r2;
  add.u64 %rd7, %rd6, %rd3;
  mul.lo.u32 %r15, %r14, %r3;
  st.global.u32 [%rd7], %r15;
  add.u64 %rd7, %rd7, %rd8;
  mul.lo.u32 %r15, %r14, %r4;
  st.global.u32 [%rd7], %r15;
  add.u64 %rd7, %rd7, %rd8;
  mul.lo.u32 %r15, %r14, %r5;
  st.global.u32 [%rd7], %r15;
  add.u64 %rd7, %rd7, %rd8;
  mul.lo.u32 %r15, %r14, %r6;
  st.global.u32 [%rd7], %r15;
  setp.ge.u32 %p2, %r11, %r1;
  @%p2 bra NEXT;
  ld.global.u32 %r16, [%rd4+4];
  max.s32 %r16, %r16, 0;
  min.s32 %r16, %r16, %r2;
  sub.s32 %r16, %r16, %r14;
  max.s32 %r16, %r16, 0;
  min.s32 %r16, %r16, %r7;
  add.u64 %rd9, %rd2, %rd3;
  st.global.u32 [%rd9], %r16;
NEXT:
  add.u32 %r11, %r11, %r12;
  bra.uni LOOP;
DONE:
  ret;
}
)";

constexpr unsigned kThreads = 256;

} // namespace

RaggedOffsets::RaggedOffsets()
    : module_(std::string(kPtx), "kiln_ragged_offsets"), fn_(module_.getFunction("kiln_ragged_offsets")) {}

void RaggedOffsets::run(CUdeviceptr offsets, CUdeviceptr out, uint32_t n, uint32_t tokens, const uint32_t perToken[4],
                        uint32_t maxLen, CUstream stream) {
  uint32_t mq = perToken[0], mk = perToken[1], mv = perToken[2], mo = perToken[3];
  uint32_t stride = uint32_t(RaggedOffsets::stride(n));
  void* params[] = {&offsets, &out, &n, &tokens, &mq, &mk, &mv, &mo, &maxLen, &stride};
  const unsigned blocks = unsigned(std::min<uint64_t>((uint64_t(n) + kThreads) / kThreads, 1024));
  launchKernel(fn_, "kiln_ragged_offsets", {blocks, 1, 1}, {kThreads, 1, 1}, 0, stream, params);
}

} // namespace kiln::cuda
