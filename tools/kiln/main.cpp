// kiln: the command-line tool. Uses only the public API (include/kiln), like an engine.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <random>

#include "kiln/kiln.hpp"

namespace {

constexpr int kVerifyFailed = 1;
constexpr int kError = 2;

int cmdList() {
  std::printf("%-16s %-7s %s\n", "kernel", "shape", "what");
  for (const auto& e : kiln::catalogue::all())
    std::printf("%-16s %-7s %s\n", e.name.c_str(), e.shape_help.c_str(), e.summary.c_str());
  return 0;
}

kiln::DType dtypeOf(const std::string& name) {
  auto d = kiln::parse_dtype(name);
  if (!d)
    throw kiln::Error(kiln::ErrorKind::NotFound,
                      "unknown dtype '" + name + "' (expected f32, f16 or bf16)");
  return *d;
}

int cmdCompile(const std::string& kernel, const std::string& emit, const std::string& dtype,
               const std::string& backend) {
  if (emit == "ptx" || emit == "cubin")
    throw kiln::Error(kiln::ErrorKind::Unsupported,
                      "--emit=" + emit + " needs the CUDA backend, which is not in this version "
                      "of kiln (use tile, mlir or llvm)");
  kiln::Stage stage = kiln::parse_stage(emit);
  const auto& entry = kiln::catalogue::find(kernel);
  kiln::Kernel k = entry.make(dtypeOf(dtype));
  auto rt = kiln::Runtime::create(kiln::parse_backend(backend));
  std::cout << rt.emit(k, stage);
  return 0;
}

int cmdRun(const std::string& kernel, const std::string& backend, const std::string& shapeText,
           const std::string& dtype, uint64_t seed) {
  const auto& entry = kiln::catalogue::find(kernel);
  auto shape = kiln::catalogue::parse_shape(shapeText, entry);
  kiln::DType dt = dtypeOf(dtype);
  auto rt = kiln::Runtime::create(kiln::parse_backend(backend));
  auto r = kiln::catalogue::run_and_verify(rt, entry, shape, dt, seed);
  std::printf("kernel=%s backend=%s dtype=%s shape=%s seed=%llu\n", entry.name.c_str(),
              kiln::to_string(rt.backend()), kiln::to_string(dt), r.shape.c_str(),
              static_cast<unsigned long long>(seed));
  std::printf("device: %s\n", rt.describe().c_str());
  std::printf("trace:   %8.2f ms  (DSL -> tile IR)\n", r.trace_ms);
  std::printf("compile: %8.2f ms  (tile passes %.2f, lowering %.2f, codegen+JIT %.2f)\n",
              r.compile.total_ms(), r.compile.tile_passes_ms, r.compile.lowering_ms,
              r.compile.codegen_ms);
  std::printf("run:     %8.3f ms  (first call, host clock; %.2f GFLOP/s)\n", r.run_ms,
              r.run_ms > 0 ? r.flops / (r.run_ms * 1e6) : 0.0);
  std::printf("%s\n", r.report.summary().c_str());
  return r.report.ok ? 0 : kVerifyFailed;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: tile-level kernels, traced from C++, compiled in-process, verified.\n"
               "Exit status: 0 ok, 1 the result failed verification, 2 an error."};
  app.require_subcommand(1);

  app.add_subcommand("list", "list the built-in kernel catalogue");

  auto* compile = app.add_subcommand("compile", "trace a catalogue kernel and print the IR of one stage");
  std::string ckernel, emit = "tile", cdtype = "f32", cbackend = "cpu";
  compile->add_option("kernel", ckernel, "catalogue kernel (see `kiln list`)")->required();
  compile->add_option("--emit", emit, "stage: tile | mlir | llvm (ptx, cubin: CUDA backend)")
      ->capture_default_str();
  compile->add_option("--dtype", cdtype, "element type: f32 | f16 | bf16")->capture_default_str();
  compile->add_option("--backend", cbackend, "cpu | auto | cuda")->capture_default_str();

  auto* run = app.add_subcommand("run", "trace, compile, run on fresh random data and verify");
  std::string rkernel, rbackend = "auto", shape, rdtype = "f32";
  // Fresh random data by default; the seed is printed so a failure can be replayed.
  uint64_t seed = std::random_device{}();
  run->add_option("kernel", rkernel, "catalogue kernel (see `kiln list`)")->required();
  run->add_option("--backend", rbackend, "auto | cpu | cuda")->capture_default_str();
  run->add_option("--shape", shape, "MxNxK for gemm kernels, MxN for the others")->required();
  run->add_option("--dtype", rdtype, "element type: f32 | f16 | bf16")->capture_default_str();
  run->add_option("--seed", seed, "random seed for the inputs (default: a fresh one, printed)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kError;
  }
  try {
    if (app.got_subcommand("list")) return cmdList();
    if (app.got_subcommand("compile")) return cmdCompile(ckernel, emit, cdtype, cbackend);
    return cmdRun(rkernel, rbackend, shape, rdtype, seed);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error [%s]: %s\n", kiln::to_string(e.kind()), e.what());
    return kError;
  }
}
