// cuDNN's fused attention as kiln asks for it (backends/cuda/CudnnGraph.cpp): the graph is
// plain data, so its shape is checked here without a GPU; the loader's answer either way; and
// kiln's own declarations of cuDNN's ABI against cudnn_graph.h wherever that is installed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "Cudnn.h"
#include "CudnnGraph.h"
#include "kiln/error.hpp"

#if __has_include(<cudnn_graph.h>)
#include <cudnn_graph.h>
#define KILN_HAVE_CUDNN_HEADER 1
#endif

using namespace kiln;
using namespace kiln::cuda::cudnn;
using Catch::Matchers::Contains;

namespace {

AttentionShape shape(int64_t B, int64_t H, int64_t G, int64_t T, int64_t S, int64_t D, bool causal) {
  AttentionShape a;
  a.dtype = DType::bf16;
  a.B = B, a.H = H, a.G = G, a.T = T, a.S = S, a.D = D;
  a.q = a.o = {H * T * D, T * D, D, 1};
  a.k = a.v = {G * S * D, S * D, D, 1};
  a.causal = causal;
  a.scale = float(1.0 / std::sqrt(double(D)));
  return a;
}

std::vector<std::string> opNames(const Graph& g) {
  std::vector<std::string> names;
  for (const OpSpec& op : g.ops) names.push_back(op.name);
  return names;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void requireInvalid(const AttentionShape& a, const std::string& needle) {
  try {
    (void)attentionGraph(a);
    FAIL("expected kiln::Error");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    CHECK_THAT(std::string(e.what()), Contains(needle));
  }
}

} // namespace

TEST_CASE("the cuDNN attention graph is softmax(Q K^T scale) V with K read transposed", "[cudnn]") {
  const Graph g = attentionGraph(shape(2, 8, 2, 128, 128, 64, false));
  INFO(g.describe());
  const std::vector<std::string> want = {"bmm1", "attn_scale", "max", "sub", "exp", "sum", "log", "add", "div", "bmm2"};
  CHECK(opNames(g) == want);
  const TensorSpec& kt = g.tensor(kK);
  CHECK(kt.dims == std::vector<int64_t>{2, 2, 64, 128});             // [B, G, D, S]
  CHECK(kt.strides == std::vector<int64_t>{2 * 128 * 64, 128 * 64, 1, 64}); // K's last two strides swapped
  CHECK(g.tensor(kQ).dims == std::vector<int64_t>{2, 8, 128, 64});
  CHECK(g.tensor(kO).type == kDataBfloat16);
  // The statistics exist as a virtual tensor when no LSE is asked for.
  const OpSpec& add = g.ops[7];
  CHECK(g.tensor(add.y).isVirtual);
  // The second product's A operand is of the inputs' type, the scores before it f32.
  CHECK(g.tensor(g.ops[8].y).type == kDataBfloat16);
  CHECK(g.tensor(g.ops[0].y).type == kDataFloat);
  const TensorSpec& scale = g.tensor(g.ops[1].b);
  CHECK(scale.byValue);
  CHECK(scale.f32 == Approx(0.125f));
}

TEST_CASE("the cuDNN attention graph masks causally from the top left when T equals S", "[cudnn]") {
  const Graph g = attentionGraph(shape(1, 4, 4, 200, 200, 128, true));
  INFO(g.describe());
  const std::vector<std::string> ops = opNames(g);
  CHECK(has(ops, "gen_row_index"));
  CHECK(has(ops, "gen_col_index"));
  CHECK(has(ops, "row>=col"));
  CHECK(has(ops, "binary_select"));
  CHECK_FALSE(has(ops, "row+skv"));
  for (const OpSpec& op : g.ops)
    if (op.name == "binary_select") {
      const TensorSpec& masked = g.tensor(op.b);
      CHECK(masked.byValue);
      CHECK(std::isinf(masked.f32));
      CHECK(masked.f32 < 0);
      CHECK(g.tensor(op.t).type == kDataBoolean);
    }
}

TEST_CASE("the cuDNN attention graph shifts the diagonal by S - T for queries at the end of a cache", "[cudnn]") {
  const Graph g = attentionGraph(shape(1, 8, 2, 3, 300, 128, true));
  INFO(g.describe());
  const std::vector<std::string> ops = opNames(g);
  REQUIRE(has(ops, "row+skv"));
  REQUIRE(has(ops, "row+skv-sq"));
  for (const OpSpec& op : g.ops) {
    if (op.name == "row+skv") CHECK(g.tensor(op.b).i32 == 300);
    if (op.name == "row+skv-sq") CHECK(g.tensor(op.b).i32 == 3);
  }
}

TEST_CASE("the cuDNN attention graph has no mask for one query, which sees every key", "[cudnn]") {
  const Graph g = attentionGraph(shape(1, 32, 8, 1, 32768, 128, true));
  CHECK_FALSE(has(opNames(g), "binary_select"));
}

TEST_CASE("the cuDNN attention graph writes the statistics to the user's LSE when asked", "[cudnn]") {
  AttentionShape a = shape(2, 4, 4, 64, 64, 32, false);
  a.stats = true;
  const Graph g = attentionGraph(a);
  const TensorSpec& lse = g.tensor(kStats);
  CHECK_FALSE(lse.isVirtual);
  CHECK(lse.type == kDataFloat);
  CHECK(lse.dims == std::vector<int64_t>{2, 4, 64, 1});
  CHECK(lse.strides == std::vector<int64_t>{4 * 64, 64, 1, 1});
  CHECK(g.ops[7].y == kStats);
  CHECK_THAT(g.describe(), Contains("add add: max[2,4,64,1] f32, log(sum)[2,4,64,1] f32 -> LSE[2,4,64,1] f32"));
}

TEST_CASE("the cuDNN attention graph masks each sequence's padding and bounds both products by its lengths",
          "[cudnn]") {
  AttentionShape a = shape(3, 8, 2, 256, 256, 128, true);
  a.padded = true;
  const Graph g = attentionGraph(a);
  INFO(g.describe());
  const std::vector<std::string> ops = opNames(g);
  const std::vector<std::string> padding = {"gen_row_idx_padding", "gen_col_idx_padding", "lt_row_sq_padding",
                                            "lt_col_skv_padding", "and_row_col_padding", "select_padding"};
  // The padding mask right after the scale, the causal mask after it.
  REQUIRE(ops.size() > 8);
  CHECK(std::vector<std::string>(ops.begin() + 2, ops.begin() + 8) == padding);
  CHECK(has(ops, "row>=col"));
  for (int64_t uid : {kSeqLenQ, kSeqLenKV}) {
    const TensorSpec& len = g.tensor(uid);
    CHECK_FALSE(len.isVirtual);
    CHECK(len.type == kDataInt32);
    CHECK(len.dims == std::vector<int64_t>{3, 1, 1, 1});
  }
  for (const OpSpec& op : g.ops) {
    if (op.name == "lt_row_sq_padding") CHECK(op.b == kSeqLenQ);
    if (op.name == "lt_col_skv_padding") CHECK(op.b == kSeqLenKV);
    if (op.name == "bmm1") {
      CHECK(op.mOverride == kSeqLenQ);
      CHECK(op.nOverride == kSeqLenKV);
      CHECK(op.kOverride == 0);
      CHECK(op.zeroPadding);
    }
    if (op.name == "bmm2") {
      CHECK(op.mOverride == kSeqLenQ);
      CHECK(op.nOverride == 0);
      CHECK(op.kOverride == kSeqLenKV);
    }
  }
  CHECK_THAT(g.describe(), Contains("M <= SeqLenQ[3,1,1,1] i32 N <= SeqLenKV[3,1,1,1] i32, zero past them"));
  // Without padding, no lengths and no overrides.
  a.padded = false;
  for (const OpSpec& op : attentionGraph(a).ops) CHECK(op.mOverride + op.nOverride + op.kOverride == 0);
}

TEST_CASE("the cuDNN attention graph reads packed sequences through ragged offsets named before each tensor",
          "[cudnn]") {
  // Packed [H, T, D] token-major memory as [B, H, max_len, D]: heads D apart, tokens H D.
  AttentionShape a = shape(3, 8, 2, 256, 256, 128, true);
  a.q = a.o = {256 * 8 * 128, 128, 8 * 128, 1};
  a.k = a.v = {256 * 2 * 128, 128, 2 * 128, 1};
  a.padded = a.ragged = true;
  const Graph g = attentionGraph(a);
  INFO(g.describe());
  const std::vector<std::pair<int64_t, int64_t>> raggedBy = {{kQ, kRaggedQ}, {kK, kRaggedK}, {kV, kRaggedV}, {kO, kRaggedO}};
  auto position = [&](int64_t uid) {
    for (size_t i = 0; i < g.tensors.size(); ++i)
      if (g.tensors[i].uid == uid) return i;
    FAIL("no tensor " << uid);
    return size_t(0);
  };
  for (const auto& [tensor, offsets] : raggedBy) {
    CHECK(g.tensor(tensor).ragged == offsets);
    const TensorSpec& o = g.tensor(offsets);
    CHECK_FALSE(o.isVirtual);
    CHECK(o.type == kDataInt32);
    CHECK(o.dims == std::vector<int64_t>{4, 1, 1, 1}); // B + 1 starts
    CHECK(position(offsets) < position(tensor));     // cuDNN links a finalized descriptor
  }
  // The padding mask and the products' bounds as for padded sequences.
  CHECK(has(opNames(g), "select_padding"));
  CHECK_THAT(g.describe(), Contains("Q[3,8,256,128] bf16 ragged by Q offsets"));
  // Padded alone: no offsets.
  a.ragged = false;
  for (const TensorSpec& t : attentionGraph(a).tensors) CHECK(t.ragged == 0);
}

TEST_CASE("the cuDNN attention graph refuses shapes cuDNN cannot take, naming the rule", "[cudnn]") {
  AttentionShape a = shape(1, 4, 4, 8, 8, 64, false);
  a.dtype = DType::f32;
  requireInvalid(a, "must be bf16 or f16");
  requireInvalid(shape(1, 4, 3, 8, 8, 64, false), "H (4) must be a multiple of the K/V heads G (3)");
  requireInvalid(shape(1, 4, 4, 9, 8, 64, false), "T = 9 queries past S = 8 keys");
  requireInvalid(shape(1, 4, 4, 8, 8, 12, false), "head dim D = 12");
  requireInvalid(shape(1, 4, 4, 8, 8, 0, false), "every dim must be positive");
  a = shape(1, 4, 4, 8, 8, 64, false);
  a.v = {4 * 8 * 64, 8 * 64, 1, 8};
  requireInvalid(a, "V must have inner stride 1");
  a = shape(1, 4, 4, 4, 8, 64, false);
  a.padded = true;
  requireInvalid(a, "padded sequences need as many query rows as keys (T = 4, S = 8)");
  a = shape(1, 4, 4, 8, 8, 64, false);
  a.padded = a.stats = true;
  requireInvalid(a, "padded sequences with an LSE output are not supported");
  a = shape(1, 4, 4, 8, 8, 64, false);
  a.ragged = true;
  requireInvalid(a, "packed (ragged) sequences need their lengths");
}

TEST_CASE("a cuDNN attention plan's key tells apart what the plan depends on", "[cudnn]") {
  const AttentionShape a = shape(1, 4, 4, 8, 8, 64, false);
  AttentionShape b = a;
  CHECK(a.key() == b.key());
  b.causal = true;
  CHECK(a.key() != b.key());
  b = a;
  b.alignment[2] = 8;
  CHECK(a.key() != b.key());
  b = a;
  b.q = {4 * 8 * 64 * 2, 8 * 64, 64, 1};
  CHECK(a.key() != b.key());
  b = a;
  b.stats = true;
  CHECK(a.key() != b.key());
  b = a;
  b.padded = true;
  CHECK(a.key() != b.key());
  b = a;
  b.alignment[5] = 4;
  CHECK(a.key() != b.key());
  b = a;
  b.padded = true;
  AttentionShape c = b;
  c.ragged = true;
  CHECK(b.key() != c.key());
}

TEST_CASE("cuDNN loads as cuDNN 9, or says where it looked and how to point kiln at it", "[cudnn]") {
  std::string why;
  if (kiln::cuda::cudnnAvailable(&why)) {
    CHECK_THAT(kiln::cuda::cudnnVersionString(), Contains("cuDNN 9."));
    CHECK_THAT(kiln::cuda::cudnnVersionString(), Contains("libcudnn"));
  } else {
    INFO(why);
    CHECK_THAT(why, Contains("libcudnn.so.9"));
    CHECK_THAT(why, Contains("KILN_CUDNN_LIBRARY"));
    try {
      (void)kiln::cuda::cudnnVersionString();
      FAIL("expected kiln::Error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Unsupported);
    }
  }
}

#ifdef KILN_HAVE_CUDNN_HEADER
TEST_CASE("kiln's declarations of cuDNN's ABI equal cudnn_graph.h's", "[cudnn]") {
#define KILN_SAME(ours, theirs) STATIC_REQUIRE(int(ours) == int(theirs))
  KILN_SAME(kSuccess, CUDNN_STATUS_SUCCESS);
  KILN_SAME(kPointwiseDescriptor, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  KILN_SAME(kEngineCfgDescriptor, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  KILN_SAME(kEngineHeurDescriptor, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  KILN_SAME(kExecutionPlanDescriptor, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  KILN_SAME(kOperationPointwiseDescriptor, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  KILN_SAME(kOperationGraphDescriptor, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  KILN_SAME(kVariantPackDescriptor, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  KILN_SAME(kTensorDescriptor, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  KILN_SAME(kMatmulDescriptor, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  KILN_SAME(kOperationMatmulDescriptor, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  KILN_SAME(kReductionDescriptor, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  KILN_SAME(kOperationReductionDescriptor, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  KILN_SAME(kPointwiseMode, CUDNN_ATTR_POINTWISE_MODE);
  KILN_SAME(kPointwiseMathPrec, CUDNN_ATTR_POINTWISE_MATH_PREC);
  KILN_SAME(kPointwiseAxis, CUDNN_ATTR_POINTWISE_AXIS);
  KILN_SAME(kEngineHeurMode, CUDNN_ATTR_ENGINEHEUR_MODE);
  KILN_SAME(kEngineHeurOperationGraph, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
  KILN_SAME(kEngineHeurResults, CUDNN_ATTR_ENGINEHEUR_RESULTS);
  KILN_SAME(kExecutionPlanEngineConfig, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
  KILN_SAME(kExecutionPlanWorkspaceSize, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE);
  KILN_SAME(kOperationPointwisePwDescriptor, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR);
  KILN_SAME(kOperationPointwiseXDesc, CUDNN_ATTR_OPERATION_POINTWISE_XDESC);
  KILN_SAME(kOperationPointwiseBDesc, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
  KILN_SAME(kOperationPointwiseYDesc, CUDNN_ATTR_OPERATION_POINTWISE_YDESC);
  KILN_SAME(kOperationPointwiseTDesc, CUDNN_ATTR_OPERATION_POINTWISE_TDESC);
  KILN_SAME(kOperationGraphOps, CUDNN_ATTR_OPERATIONGRAPH_OPS);
  KILN_SAME(kTensorByteAlignment, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT);
  KILN_SAME(kTensorDataType, CUDNN_ATTR_TENSOR_DATA_TYPE);
  KILN_SAME(kTensorDimensions, CUDNN_ATTR_TENSOR_DIMENSIONS);
  KILN_SAME(kTensorStrides, CUDNN_ATTR_TENSOR_STRIDES);
  KILN_SAME(kTensorUniqueId, CUDNN_ATTR_TENSOR_UNIQUE_ID);
  KILN_SAME(kTensorIsVirtual, CUDNN_ATTR_TENSOR_IS_VIRTUAL);
  KILN_SAME(kTensorIsByValue, CUDNN_ATTR_TENSOR_IS_BY_VALUE);
  KILN_SAME(kTensorRaggedOffsetDesc, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC);
  KILN_SAME(kVariantPackUniqueIds, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  KILN_SAME(kVariantPackDataPointers, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  KILN_SAME(kVariantPackWorkspace, CUDNN_ATTR_VARIANT_PACK_WORKSPACE);
  KILN_SAME(kMatmulCompType, CUDNN_ATTR_MATMUL_COMP_TYPE);
  KILN_SAME(kMatmulPaddingValue, CUDNN_ATTR_MATMUL_PADDING_VALUE);
  KILN_SAME(kOperationMatmulGemmMOverrideDesc, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC);
  KILN_SAME(kOperationMatmulGemmNOverrideDesc, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC);
  KILN_SAME(kOperationMatmulGemmKOverrideDesc, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC);
  KILN_SAME(kOperationMatmulADesc, CUDNN_ATTR_OPERATION_MATMUL_ADESC);
  KILN_SAME(kOperationMatmulBDesc, CUDNN_ATTR_OPERATION_MATMUL_BDESC);
  KILN_SAME(kOperationMatmulCDesc, CUDNN_ATTR_OPERATION_MATMUL_CDESC);
  KILN_SAME(kOperationMatmulDesc, CUDNN_ATTR_OPERATION_MATMUL_DESC);
  KILN_SAME(kReductionOperator, CUDNN_ATTR_REDUCTION_OPERATOR);
  KILN_SAME(kReductionCompType, CUDNN_ATTR_REDUCTION_COMP_TYPE);
  KILN_SAME(kOperationReductionXDesc, CUDNN_ATTR_OPERATION_REDUCTION_XDESC);
  KILN_SAME(kOperationReductionYDesc, CUDNN_ATTR_OPERATION_REDUCTION_YDESC);
  KILN_SAME(kOperationReductionDesc, CUDNN_ATTR_OPERATION_REDUCTION_DESC);
  KILN_SAME(kTypeHandle, CUDNN_TYPE_HANDLE);
  KILN_SAME(kTypeDataType, CUDNN_TYPE_DATA_TYPE);
  KILN_SAME(kTypeBoolean, CUDNN_TYPE_BOOLEAN);
  KILN_SAME(kTypeInt64, CUDNN_TYPE_INT64);
  KILN_SAME(kTypeFloat, CUDNN_TYPE_FLOAT);
  KILN_SAME(kTypeDouble, CUDNN_TYPE_DOUBLE);
  KILN_SAME(kTypeVoidPtr, CUDNN_TYPE_VOID_PTR);
  KILN_SAME(kTypeHeurMode, CUDNN_TYPE_HEUR_MODE);
  KILN_SAME(kTypePointwiseMode, CUDNN_TYPE_POINTWISE_MODE);
  KILN_SAME(kTypeBackendDescriptor, CUDNN_TYPE_BACKEND_DESCRIPTOR);
  KILN_SAME(kTypeReductionOperatorType, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE);
  KILN_SAME(kDataFloat, CUDNN_DATA_FLOAT);
  KILN_SAME(kDataHalf, CUDNN_DATA_HALF);
  KILN_SAME(kDataInt32, CUDNN_DATA_INT32);
  KILN_SAME(kDataBfloat16, CUDNN_DATA_BFLOAT16);
  KILN_SAME(kDataBoolean, CUDNN_DATA_BOOLEAN);
  KILN_SAME(kPwAdd, CUDNN_POINTWISE_ADD);
  KILN_SAME(kPwMul, CUDNN_POINTWISE_MUL);
  KILN_SAME(kPwDiv, CUDNN_POINTWISE_DIV);
  KILN_SAME(kPwSub, CUDNN_POINTWISE_SUB);
  KILN_SAME(kPwExp, CUDNN_POINTWISE_EXP);
  KILN_SAME(kPwLog, CUDNN_POINTWISE_LOG);
  KILN_SAME(kPwCmpGe, CUDNN_POINTWISE_CMP_GE);
  KILN_SAME(kPwCmpLt, CUDNN_POINTWISE_CMP_LT);
  KILN_SAME(kPwLogicalAnd, CUDNN_POINTWISE_LOGICAL_AND);
  KILN_SAME(kPwGenIndex, CUDNN_POINTWISE_GEN_INDEX);
  KILN_SAME(kPwBinarySelect, CUDNN_POINTWISE_BINARY_SELECT);
  // Deprecated in newer cuDNN 9 headers (the handle comes from elsewhere there), still taken.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  KILN_SAME(kOperationGraphHandle, CUDNN_ATTR_OPERATIONGRAPH_HANDLE);
  KILN_SAME(kExecutionPlanHandle, CUDNN_ATTR_EXECUTION_PLAN_HANDLE);
#pragma GCC diagnostic pop
  KILN_SAME(kReduceAdd, CUDNN_REDUCE_TENSOR_ADD);
  KILN_SAME(kReduceMax, CUDNN_REDUCE_TENSOR_MAX);
  KILN_SAME(kHeurModeA, CUDNN_HEUR_MODE_A);
#undef KILN_SAME
}
#endif

#ifdef KILN_HAVE_CUDNN_HEADER
TEST_CASE("the installed cuDNN takes every tensor and operation of kiln's attention graphs", "[cudnn]") {
  // Descriptors need no GPU: what cuDNN refuses here would fail every plan on the device.
  // Where its header is installed, so is the library (the toolkit's packages carry both).
  std::string why;
  const bool loaded = kiln::cuda::cudnnAvailable(&why);
  INFO(why);
  REQUIRE(loaded);
  AttentionShape withStats = shape(2, 4, 2, 64, 64, 64, true);
  withStats.stats = true;
  AttentionShape padded = shape(4, 8, 2, 512, 512, 128, false), paddedCausal = shape(2, 4, 4, 300, 300, 64, true);
  padded.padded = paddedCausal.padded = true;
  AttentionShape packed = shape(3, 8, 2, 300, 300, 128, true); // token-major [T, heads, D] memory
  packed.q = packed.o = {300 * 8 * 128, 128, 8 * 128, 1};
  packed.k = packed.v = {300 * 2 * 128, 128, 2 * 128, 1};
  packed.padded = packed.ragged = true;
  for (const AttentionShape& a : {shape(1, 8, 8, 128, 128, 128, false), shape(1, 8, 2, 3, 300, 64, true),
                                  shape(1, 32, 8, 1, 4096, 128, true), withStats, padded, paddedCausal, packed}) {
    INFO(a.key());
    CHECK(kiln::cuda::cudnnDescribeAttention(a) == attentionGraph(a).ops.size());
  }
}
#endif
