# libkiln.so: kiln's own code plus LLVM/MLIR, linked statically and hidden. Only the
# KILN_API symbols of namespace kiln are exported (see kiln.map and
# test/embed/check-symbols.sh).
set(KILN_MLIR_SOURCES
  lib/Compiler/Context.cpp lib/Compiler/LlvmErrors.cpp lib/Compiler/Kernel.cpp lib/Compiler/Pipeline.cpp
  dsl/Builder.cpp backends/cpu/CpuCompiler.cpp backends/cpu/CpuTarget.cpp backends/cuda/CudaCompiler.cpp)
set(KILN_PLAIN_SOURCES
  lib/Runtime/Runtime.cpp lib/Runtime/GridPlan.cpp
  lib/Runtime/Error.cpp lib/Runtime/Log.cpp lib/Runtime/Nvtx.cpp lib/Runtime/Version.cpp lib/Runtime/Files.cpp lib/Runtime/DType.cpp lib/Runtime/Tensor.cpp lib/Runtime/Launch.cpp
  lib/Runtime/Handwritten.cpp backends/cpu/FloatBuiltins.cpp backends/cuda/Nvrtc.cpp lib/Runtime/KernelCache.cpp lib/Runtime/CompileCache.cpp
  backends/cuda/CudaRuntime.cpp backends/cuda/BackgroundModule.cpp backends/cuda/PtxModules.cpp backends/cuda/CacheFlush.cpp backends/cuda/Driver.cpp backends/cuda/NvJitLink.cpp backends/cuda/Ptxas.cpp
  backends/cuda/Cublas.cpp backends/cuda/Cudnn.cpp backends/cuda/CudnnGraph.cpp backends/cuda/RaggedOffsets.cpp backends/cuda/Target.cpp backends/cuda/hopper/LaunchPlan.cpp backends/cuda/hopper/Sm90Launch.cpp
  lib/Verify/Compare.cpp lib/Verify/Reference.cpp lib/Profile/Report.cpp lib/Profile/Verdict.cpp lib/Verify/GpuReference.cpp
  lib/Catalogue/Catalogue.cpp lib/Catalogue/Kernels.cpp lib/Catalogue/Handwritten.cpp
  lib/Profile/Testing.cpp lib/Tune/Tune.cpp lib/Tune/Database.cpp)
# Hand-written CUDA C++ kernels ship inside libkiln.so as text for NVRTC: each .cu becomes a
# raw string literal in <build>/generated/<name>.cu.inc (rewritten only when it changes).
foreach(cu lib/Catalogue/cuda/gemm_epilogue.cu lib/Catalogue/cuda/epilogue.cu)
  get_filename_component(cu_name ${cu} NAME)
  file(READ ${CMAKE_SOURCE_DIR}/${cu} KILN_CU_TEXT)
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/${cu_name}.inc
       CONTENT "R\"kiln_cu(@KILN_CU_TEXT@)kiln_cu\"\n" @ONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${cu})
endforeach()
add_library(kiln SHARED ${KILN_MLIR_SOURCES} ${KILN_PLAIN_SOURCES})
add_library(kiln::kiln ALIAS kiln)
set_source_files_properties(${KILN_MLIR_SOURCES} PROPERTIES COMPILE_OPTIONS "${KILN_MLIR_CXX_FLAGS}")
target_compile_definitions(kiln PRIVATE KILN_BUILDING_LIBRARY KILN_VERSION="${PROJECT_VERSION}")
# The toolkit's ptxas, where deploy compiles look first for it (backends/cuda/Ptxas.h); a
# machine without it falls back to PATH, then to PTX entries.
find_program(KILN_TOOLKIT_PTXAS_PROGRAM ptxas HINTS ${CUDAToolkit_BIN_DIR})
if(KILN_TOOLKIT_PTXAS_PROGRAM)
  target_compile_definitions(kiln PRIVATE KILN_TOOLKIT_PTXAS="${KILN_TOOLKIT_PTXAS_PROGRAM}")
endif()
target_include_directories(kiln
  PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>
  PRIVATE ${KILN_INTERNAL_INCLUDES} ${CMAKE_BINARY_DIR}/generated ${CMAKE_SOURCE_DIR}/backends/cpu ${CMAKE_SOURCE_DIR}/backends/cuda
          ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(kiln PRIVATE
  KilnCpuLowering KilnCudaLowering KilnTransforms KilnTileDialect Eigen3::Eigen ${CMAKE_DL_LIBS}
  MLIRGPUDialect MLIRNVVMDialect MLIRGPUToNVVMTransforms MLIRGPUTransforms MLIRNVVMTarget
  MLIRNVVMToLLVMIRTranslation MLIRGPUToLLVMIRTranslation MLIRMathTransforms MLIRNVGPUToNVVM MLIRNVVMToLLVM MLIRVectorToLLVM
  MLIRExecutionEngineUtils MLIRExecutionEngine MLIRLLVMToLLVMIRTranslation
  MLIRBuiltinToLLVMIRTranslation MLIRSCFToControlFlow MLIRArithTransforms MLIRMathToLLVM
  MLIRMathToLibm MLIRMemRefToLLVM MLIRArithToLLVM MLIRFuncToLLVM MLIRControlFlowToLLVM
  MLIRReconcileUnrealizedCasts MLIRParser MLIRTransforms)
# --icf=all folds identical functions (LLVM's and MLIR's template instances, mostly): the
# stripped library 64.6 -> 56.4 MB. LLVM's own release builds link with it.
# -z pack-relative-relocs stores the ~88 000 relative relocations (vtables, tables of
# pointers) as RELR bitmaps: 2.1 MB less. It needs glibc 2.36, which the library needs
# already (LLVM's Support library, built on Debian 12, calls arc4random).
target_link_options(kiln PRIVATE
  -Wl,--exclude-libs,ALL -Wl,--gc-sections -Wl,--icf=all -Wl,-z,pack-relative-relocs
  -Wl,--as-needed -Wl,--build-id=sha1
  -Wl,--version-script=${CMAKE_SOURCE_DIR}/cmake/kiln.map)
set_target_properties(kiln PROPERTIES
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${CMAKE_SOURCE_DIR}/cmake/kiln.map)
