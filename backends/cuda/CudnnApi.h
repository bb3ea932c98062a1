#pragma once
// Internal: the part of cuDNN 9's C API kiln calls (its graph "backend" API), declared here
// rather than taken from cudnn_graph.h, so that kiln builds where cuDNN is not installed
// (it is loaded at run time, like cuBLASLt; the CUDA toolkit does not ship it). Every value
// below is cuDNN 9's ABI: fixed numbers that 9.x releases keep. test_cudnn_graph.cpp checks
// each against cudnn_graph.h wherever that header is installed.
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::cuda::cudnn {

using Handle = struct cudnnContext*;
using Descriptor = void*;
using Status = int; ///< cudnnStatus_t: 0 success; 2xxx bad parameter; 3xxx not supported

constexpr Status kSuccess = 0;

/// cudnnBackendDescriptorType_t
enum DescriptorType : int {
  kPointwiseDescriptor = 0,
  kEngineCfgDescriptor = 3,
  kEngineHeurDescriptor = 4,
  kExecutionPlanDescriptor = 5,
  kOperationPointwiseDescriptor = 13,
  kOperationGraphDescriptor = 15,
  kVariantPackDescriptor = 16,
  kTensorDescriptor = 17,
  kMatmulDescriptor = 18,
  kOperationMatmulDescriptor = 19,
  kReductionDescriptor = 21,
  kOperationReductionDescriptor = 22,
};

/// cudnnBackendAttributeName_t
enum AttributeName : int {
  kPointwiseMode = 0,
  kPointwiseMathPrec = 1,
  kPointwiseAxis = 9,
  kEngineHeurMode = 200,
  kEngineHeurOperationGraph = 201,
  kEngineHeurResults = 202,
  kExecutionPlanHandle = 400,
  kExecutionPlanEngineConfig = 401,
  kExecutionPlanWorkspaceSize = 402,
  kOperationPointwisePwDescriptor = 750,
  kOperationPointwiseXDesc = 751,
  kOperationPointwiseBDesc = 752,
  kOperationPointwiseYDesc = 753,
  kOperationPointwiseTDesc = 758,
  kOperationGraphHandle = 800,
  kOperationGraphOps = 801,
  kTensorByteAlignment = 900,
  kTensorDataType = 901,
  kTensorDimensions = 902,
  kTensorStrides = 903,
  kTensorUniqueId = 906,
  kTensorIsVirtual = 907,
  kTensorIsByValue = 908,
  kTensorRaggedOffsetDesc = 913,
  kVariantPackUniqueIds = 1000,
  kVariantPackDataPointers = 1001,
  kVariantPackWorkspace = 1003,
  kMatmulCompType = 1500,
  kMatmulPaddingValue = 1503,
  kOperationMatmulADesc = 1520,
  kOperationMatmulBDesc = 1521,
  kOperationMatmulCDesc = 1522,
  kOperationMatmulDesc = 1523,
  kOperationMatmulGemmMOverrideDesc = 1525,
  kOperationMatmulGemmNOverrideDesc = 1526,
  kOperationMatmulGemmKOverrideDesc = 1527,
  kReductionOperator = 1600,
  kReductionCompType = 1601,
  kOperationReductionXDesc = 1610,
  kOperationReductionYDesc = 1611,
  kOperationReductionDesc = 1612,
};

/// cudnnBackendAttributeType_t
enum AttributeType : int {
  kTypeHandle = 0,
  kTypeDataType = 1,
  kTypeBoolean = 2,
  kTypeInt64 = 3,
  kTypeFloat = 4,
  kTypeDouble = 5,
  kTypeVoidPtr = 6,
  kTypeHeurMode = 8,
  kTypePointwiseMode = 14,
  kTypeBackendDescriptor = 15,
  kTypeReductionOperatorType = 18,
};

/// cudnnDataType_t
enum DataType : int {
  kDataFloat = 0,
  kDataHalf = 2,
  kDataInt32 = 4,
  kDataBfloat16 = 9,
  kDataBoolean = 11,
};

/// cudnnPointwiseMode_t
enum PointwiseMode : int {
  kPwAdd = 0,
  kPwMul = 1,
  kPwDiv = 6,
  kPwSub = 9,
  kPwExp = 13,
  kPwLog = 15,
  kPwCmpGe = 303,
  kPwCmpLt = 304,
  kPwLogicalAnd = 400,
  kPwGenIndex = 501,
  kPwBinarySelect = 601,
};

/// cudnnReduceTensorOp_t
enum ReduceOp : int { kReduceAdd = 0, kReduceMax = 3 };

/// cudnnBackendHeurMode_t
enum HeurMode : int { kHeurModeA = 3 };

} // namespace kiln::cuda::cudnn

namespace kiln::cuda::cudnn {

/// The C entry points kiln calls, typed as cudnn_graph.h declares them (enums as int), resolved
/// by name with dlsym. A table rather than declarations: no cudnn* symbol is referenced at link
/// time, and the header may still be included beside this one (the ABI test does).
#define KILN_CUDNN_SYMBOLS(X)                                                                          \
  X(cudnnGetVersion, size_t, (void))                                                                  \
  X(cudnnGetErrorString, const char*, (Status))                                                       \
  X(cudnnGetLastErrorString, void, (char* message, size_t maxSize))                                   \
  X(cudnnCreate, Status, (Handle * handle))                                                           \
  X(cudnnDestroy, Status, (Handle handle))                                                            \
  X(cudnnSetStream, Status, (Handle handle, void* stream))                                            \
  X(cudnnBackendCreateDescriptor, Status, (int type, Descriptor* descriptor))                         \
  X(cudnnBackendDestroyDescriptor, Status, (Descriptor descriptor))                                   \
  X(cudnnBackendFinalize, Status, (Descriptor descriptor))                                            \
  X(cudnnBackendSetAttribute, Status,                                                                 \
    (Descriptor descriptor, int name, int type, int64_t count, const void* elements))                 \
  X(cudnnBackendGetAttribute, Status,                                                                 \
    (Descriptor descriptor, int name, int type, int64_t requested, int64_t* count, void* elements))   \
  X(cudnnBackendExecute, Status, (Handle handle, Descriptor plan, Descriptor variantPack))

struct Api {
#define KILN_CUDNN_MEMBER(name, ret, params) ret(*name) params = nullptr;
  KILN_CUDNN_SYMBOLS(KILN_CUDNN_MEMBER)
#undef KILN_CUDNN_MEMBER
  std::string path;          ///< the file dlopen found
  size_t version = 0;        ///< cudnnGetVersion(): 91900 for 9.19.0
  std::string versionString; ///< "cuDNN 9.19.0 (libcudnn.so.9)"
};

} // namespace kiln::cuda::cudnn
