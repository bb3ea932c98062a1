#pragma once
// Shared by the examples: run a kernel on fresh random data from the catalogue's problem
// generator (the same shapes an engine would pass), verify it, print what happened.
#include <kiln/kiln.hpp>

#include <cstdio>

namespace example {

inline int run(const kiln::Kernel& kernel, const std::string& entry,
               const std::vector<int64_t>& shape, kiln::DType dtype) {
  try {
    auto rt = kiln::Runtime::create(); // CUDA when available, else the CPU
    std::printf("kernel %s on %s\n", kernel.signature().str().c_str(), rt.describe().c_str());
    kiln::CompiledKernel ck = rt.compile(kernel);
    std::printf("compiled in %.1f ms\n", ck.times().total_ms());

    // Inputs and the poisoned output live in "engine" memory; kiln only sees views.
    kiln::catalogue::Problem p = kiln::catalogue::find(entry).problem(shape, dtype, 2026);
    std::vector<kiln::TensorView> args = p.views();
    ck.launch(args);

    auto report = kiln::verify::compare(args[p.output], p.reference,
                                        kiln::verify::Tolerance::for_dtype(dtype));
    std::printf("%s\n", report.summary().c_str());
    return report.ok ? 0 : 1;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}

} // namespace example
