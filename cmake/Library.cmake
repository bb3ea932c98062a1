# libkiln.so: kiln's own code plus LLVM/MLIR, linked statically and hidden. Only the
# KILN_API symbols of namespace kiln are exported (see kiln.map and
# test/embed/check-symbols.sh).
set(KILN_MLIR_SOURCES
  lib/Compiler/Context.cpp lib/Compiler/Kernel.cpp lib/Compiler/Pipeline.cpp
  dsl/Builder.cpp backends/cpu/CpuCompiler.cpp backends/cuda/CudaCompiler.cpp)
set(KILN_PLAIN_SOURCES
  lib/Runtime/Runtime.cpp lib/Runtime/GridPlan.cpp
  lib/Runtime/Error.cpp lib/Runtime/DType.cpp lib/Runtime/Tensor.cpp lib/Runtime/Launch.cpp
  lib/Runtime/Handwritten.cpp backends/cuda/Nvrtc.cpp
  backends/cuda/CudaRuntime.cpp backends/cuda/Driver.cpp backends/cuda/NvJitLink.cpp
  backends/cuda/Cublas.cpp
  lib/Verify/Compare.cpp lib/Verify/Reference.cpp lib/Profile/Report.cpp lib/Verify/GpuReference.cpp
  lib/Catalogue/Catalogue.cpp lib/Catalogue/Kernels.cpp)
add_library(kiln SHARED ${KILN_MLIR_SOURCES} ${KILN_PLAIN_SOURCES})
add_library(kiln::kiln ALIAS kiln)
set_source_files_properties(${KILN_MLIR_SOURCES} PROPERTIES COMPILE_OPTIONS "${KILN_MLIR_CXX_FLAGS}")
target_compile_definitions(kiln PRIVATE KILN_BUILDING_LIBRARY)
target_include_directories(kiln
  PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>
  PRIVATE ${KILN_INTERNAL_INCLUDES} ${CMAKE_SOURCE_DIR}/backends/cpu ${CMAKE_SOURCE_DIR}/backends/cuda
          ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(kiln PRIVATE
  KilnCpuLowering KilnCudaLowering KilnTransforms KilnTileDialect Eigen3::Eigen ${CMAKE_DL_LIBS}
  MLIRGPUDialect MLIRNVVMDialect MLIRGPUToNVVMTransforms MLIRGPUTransforms MLIRNVVMTarget
  MLIRNVVMToLLVMIRTranslation MLIRGPUToLLVMIRTranslation MLIRMathTransforms MLIRNVGPUToNVVM MLIRVectorToLLVM
  MLIRExecutionEngineUtils MLIRExecutionEngine MLIRLLVMToLLVMIRTranslation
  MLIRBuiltinToLLVMIRTranslation MLIRSCFToControlFlow MLIRArithTransforms MLIRMathToLLVM
  MLIRMathToLibm MLIRMemRefToLLVM MLIRArithToLLVM MLIRFuncToLLVM MLIRControlFlowToLLVM
  MLIRReconcileUnrealizedCasts MLIRParser MLIRTransforms)
target_link_options(kiln PRIVATE
  -Wl,--exclude-libs,ALL -Wl,--gc-sections -Wl,--as-needed
  -Wl,--version-script=${CMAKE_SOURCE_DIR}/cmake/kiln.map)
set_target_properties(kiln PROPERTIES
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${CMAKE_SOURCE_DIR}/cmake/kiln.map)
