// kiln: the command-line tool. Uses only the public API (include/kiln), like an engine.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>

#include "kiln/kiln.hpp"

#include "bench.hpp"
#include "tune_cmd.hpp"
#include "warm.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <csignal>

namespace {

// A crash in kiln is a bug: say so, with a backtrace (library offsets resolve with
// `addr2line -f -e <unstripped lib>`), then die of the same signal.
void onFatalSignal(int sig) {
  static const char msg[] = "kiln: fatal signal (a bug in kiln: please report it with this backtrace)\n";
  (void)!::write(2, msg, sizeof msg - 1);
  void* frames[64];
  ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

constexpr int kVerifyFailed = 1;
constexpr int kError = 2;

/// --accept's check: a finite speedup above 0.
CLI::Validator speedupAbove0() {
  return CLI::Validator(
      [](std::string& s) {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        const bool ok = !s.empty() && end && *end == '\0' && std::isfinite(v) && v > 0;
        return ok ? std::string() : "the acceptance threshold is a speedup above 0 (e.g. 1.10), got '" + s + "'";
      },
      "SPEEDUP");
}

/// Re-renders saved reports; with `accept` > 0 judges them first against `baseline`.
int cmdReport(const std::vector<std::string>& inputs, const std::string& csv, const std::string& html,
              const std::string& title, double accept, const std::string& baseline) {
  std::vector<kiln::profile::Row> rows;
  for (const auto& path : inputs) {
    const std::string text = kiln::read_file(path, "report");
    try {
      for (auto& r : kiln::profile::from_json(text)) rows.push_back(std::move(r));
    } catch (const kiln::Error& e) {
      throw kiln::Error(e.kind(), path + ": " + e.what());
    }
  }
  if (accept > 0) judgeAndPrint(rows, accept, baseline);
  writeReport(csv, kiln::profile::to_csv(rows));
  writeReport(html, kiln::profile::to_html(rows, title));
  std::printf("%zu rows from %zu report(s)\n", rows.size(), inputs.size());
  return 0;
}

int cmdCache(const std::string& action, std::string dir) {
  if (dir.empty()) dir = kiln::cache::default_dir();
  if (dir == "off") throw kiln::Error(kiln::ErrorKind::InvalidArgument, "the disk cache is off (KILN_CACHE_DIR=off): give --dir");
  if (action == "clear") {
    std::printf("removed %lld entries from %s\n", static_cast<long long>(kiln::cache::clear(dir)), dir.c_str());
    return 0;
  }
  auto entries = kiln::cache::list(dir);
  int64_t bytes = 0, bad = 0;
  for (const auto& e : entries) {
    bytes += e.bytes;
    bad += !e.valid;
  }
  if (action == "ls") {
    std::printf("%-14s %-20s %-6s %-8s %10s %10s  %s\n", "key", "kernel", "back", "target", "bytes", "age_s", "state");
    for (const auto& e : entries)
      std::printf("%-14.12s %-20s %-6s %-8s %10lld %10.0f  %s\n", e.key.c_str(), e.kernel.c_str(), e.backend.c_str(),
                  e.target.substr(0, 8).c_str(), static_cast<long long>(e.bytes), e.age_s,
                  e.valid ? "ok" : ("CORRUPT: " + e.problem).c_str());
  }
  std::printf("%s: %zu entries, %lld bytes, %lld corrupt (replaced on next use)\n", dir.c_str(), entries.size(),
              static_cast<long long>(bytes), static_cast<long long>(bad));
  return 0;
}

int cmdList() {
  std::printf("%-17s %-12s %s\n", "kernel", "shape", "what");
  for (const auto& e : kiln::catalogue::all())
    std::printf("%-17s %-12s %s\n", e.name.c_str(), e.shape_help.c_str(), e.summary.c_str());
  return 0;
}

kiln::DType dtypeOf(const std::string& name) {
  auto d = kiln::parse_dtype(name);
  if (!d)
    throw kiln::Error(kiln::ErrorKind::NotFound,
                      "unknown dtype '" + name + "' (expected f32, f16 or bf16)");
  if (!kiln::is_float(*d))
    throw kiln::Error(kiln::ErrorKind::Unsupported, "dtype '" + name +
                                                        "' is for a kernel's integer inputs (lengths, offsets); the "
                                                        "catalogue's kernels take f32, f16 or bf16");
  return *d;
}

int cmdCompile(const std::string& kernel, const std::string& emit, const std::string& dtype,
               std::string backend, const std::string& arch, const std::string& output, const std::string& shapeText) {
  kiln::Stage stage = kiln::parse_stage(emit);
  const auto& entry = kiln::catalogue::find(kernel);
  std::vector<int64_t> shape;
  if (!shapeText.empty()) shape = kiln::catalogue::parse_shape(shapeText, entry); // errors before any work
  // ptx, cubin and --arch mean CUDA; compiling for CUDA needs no GPU.
  if (backend.empty())
    backend = (stage == kiln::Stage::ptx || stage == kiln::Stage::cubin || stage == kiln::Stage::layouts ||
               !arch.empty())
                  ? "cuda"
                  : "cpu";
  kiln::RuntimeOptions options;
  options.arch = arch;
  options.compile_only = true;
  kiln::Backend b = kiln::parse_backend(backend);
  if (b == kiln::Backend::cpu && !arch.empty())
    throw kiln::Error(kiln::ErrorKind::InvalidArgument, "--arch is a CUDA option; drop it or use --backend=cuda");
  if (b == kiln::Backend::cpu && (stage == kiln::Stage::cubin || stage == kiln::Stage::ptx))
    throw kiln::Error(kiln::ErrorKind::Unsupported, "--emit=" + emit + " is CUDA code; the CPU backend makes none "
                                                    "(use --backend=cuda, or --emit=llvm for the CPU's code)");
  auto rt = kiln::Runtime::create(b == kiln::Backend::automatic ? kiln::Backend::cpu : b, options);
  // With a shape, the kernel `kiln run` would build for it on this target (attention's head
  // dim and keys per step); without, the catalogue's default.
  kiln::Kernel k = shape.empty() ? entry.make(dtypeOf(dtype))
                                 : kiln::catalogue::kernel_for(entry, dtypeOf(dtype), shape, rt.fingerprint().target);
  std::optional<kiln::CompiledKernel> ck;
  if (stage == kiln::Stage::cubin) ck.emplace(rt.compile(k)); // the cubin and its report at once
  std::string text = ck ? ck->binary() : rt.emit(k, stage);
  if (!output.empty()) {
    std::ofstream out(output, std::ios::binary);
    out.write(text.data(), std::streamsize(text.size()));
    out.close();
    if (!out) throw kiln::Error(kiln::ErrorKind::Runtime, "cannot write '" + output + "'");
    std::printf("wrote %zu bytes of %s to %s\n", text.size(), emit.c_str(), output.c_str());
    return 0;
  }
  if (ck) {
    std::printf("cubin: %zu bytes (use -o FILE to save it)\n%s\n", text.size(), ck->report().str().c_str());
    return 0;
  }
  std::cout << text;
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
  const kiln::CacheInfo& c = r.cache;
  if (c.outcome == kiln::CacheOutcome::disk || c.outcome == kiln::CacheOutcome::memory)
    std::printf("compile: %8.2f ms  (%s cache hit: lookup %.2f, load %.2f; key %.12s; the original compile took %.2f ms)\n",
                c.lookup_ms + c.load_ms, kiln::to_string(c.outcome), c.lookup_ms, c.load_ms, c.key.c_str(),
                r.compile.total_ms());
  else if (rt.backend() == kiln::Backend::cuda)
    std::printf("compile: %8.2f ms  (tile passes %.2f, lowering %.2f, PTX %.2f, cubin %.2f, load %.2f)\n",
                r.compile.total_ms(), r.compile.tile_passes_ms, r.compile.lowering_ms,
                r.compile.codegen_ms, r.compile.assemble_ms, r.compile.load_ms);
  else
    std::printf("compile: %8.2f ms  (tile passes %.2f, lowering %.2f, codegen+JIT %.2f)\n",
                r.compile.total_ms(), r.compile.tile_passes_ms, r.compile.lowering_ms,
                r.compile.codegen_ms);
  if (c.outcome == kiln::CacheOutcome::miss && c.note.find("not written") != std::string::npos)
    std::printf("cache:   miss, key %.12s; %s\n", c.key.c_str(), c.note.c_str()); // (read-only, or unwritable)
  else if (c.outcome == kiln::CacheOutcome::miss)
    std::printf("cache:   miss, key %.12s, written in %.2f ms to %s%s%s\n", c.key.c_str(), c.write_ms,
                rt.cache_dir().empty() ? "(no disk cache)" : rt.cache_dir().c_str(), c.note.empty() ? "" : "; ",
                c.note.c_str());
  std::printf("kernel:  %s\n", r.kernel.str().c_str());
  if (!r.kernel.compiler.empty()) std::printf("built by: %s\n", r.kernel.compiler.c_str());
  std::printf("launch:  %s\n", r.launch_path.c_str());
  std::printf("run:     %8.3f ms  (first call, host clock; %.2f GFLOP/s)\n", r.run_ms,
              r.run_ms > 0 ? r.flops / (r.run_ms * 1e6) : 0.0);
  for (const kiln::verify::Report& o : r.outputs) std::printf("%s\n", o.summary().c_str()); // a line per output
  return r.report.ok ? 0 : kVerifyFailed;
}

} // namespace

int main(int argc, char** argv) {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, onFatalSignal);
  CLI::App app{"kiln: tile-level kernels, traced from C++, compiled in-process, verified.\n"
               "Exit status: 0 ok, 1 the result failed verification, 2 an error."};
  app.require_subcommand(1);
  // kiln, LLVM/MLIR and CUDA toolkit versions, a line each (no GPU needed).
  app.set_version_flag("--version", [] { return kiln::version().str(); });

  app.add_subcommand("list", "list the built-in kernel catalogue");

  auto* compile = app.add_subcommand("compile", "trace a catalogue kernel and print the IR of one stage");
  std::string ckernel, emit = "tile", cdtype = "f32", cbackend, arch, output, cshape;
  compile->add_option("kernel", ckernel, "catalogue kernel (see `kiln list`)")->required();
  compile->add_option("--emit", emit, "stage: tile | layouts (CUDA) | mlir | llvm | ptx | cubin")->capture_default_str();
  compile->add_option("--arch", arch, "CUDA target: sm_90a | sm_80 | ... (default sm_90a)");
  compile->add_option("-o,--output", output, "write the stage's output to this file");
  compile->add_option("--dtype", cdtype, "element type: f32 | f16 | bf16")->capture_default_str();
  compile->add_option("--backend", cbackend, "cpu | cuda (default: cuda for ptx, cubin or --arch, else cpu)");
  compile->add_option("--shape", cshape,
                      "the kernel `kiln run --shape` builds for this shape and target (attention: BxHxGxSxD; attention_decode: BxHxGxTxSxD); "
                      "default: the catalogue's default tiles");

  auto* run = app.add_subcommand("run", "trace, compile, run on fresh random data and verify");
  std::string rkernel, rbackend = "auto", shape, rdtype = "f32";
  // Fresh random data by default; the seed is printed so a failure can be replayed.
  uint64_t seed = std::random_device{}();
  run->add_option("kernel", rkernel, "catalogue kernel (see `kiln list`)")->required();
  run->add_option("--backend", rbackend, "auto | cpu | cuda")->capture_default_str();
  run->add_option("--shape", shape, "MxNxK for GEMMs, MxN for row kernels, BxHxGxSxD for attention, BxHxGxTxSxD for attention_decode "
                                   "(`kiln list` shows each)")->required();
  run->add_option("--dtype", rdtype, "element type: f32 | f16 | bf16")->capture_default_str();
  run->add_option("--seed", seed, "random seed for the inputs (default: a fresh one, printed)")
      ->check(CLI::Validator(
          [](std::string& s) { return s.empty() || s[0] == '-' ? "the seed is a non-negative integer, got " + s : std::string(); },
          "SEED"));

  auto* bench = app.add_subcommand("bench", "time a kernel through each route on this machine (lifecycle rows)");
  BenchOptions bo;
  bench->add_option("kernel", bo.kernel, "catalogue kernel (see `kiln list`)")->required();
  bench->add_option("--shape", bo.shapes, "one or more shapes (MxNxK or MxN)");
  bench->add_option("--shapes-file", bo.shapes_file, "a file of shapes, one per line ('#' comments)");
  bench->add_option("--routes", bo.routes, "routes to run (default: all this machine can): kiln, framework, cuda "
                                            "(GPU); kiln-cpu, eigen (CPU)")->delimiter(',');
  bench->add_flag("!--no-progress", bo.progress, "no progress bar on stderr");
  bench->add_option("--tuned", bo.tuned_db, "add the kiln-tuned route: each shape's tuned config from this database "
                                            "(searched now, and saved, when it has none)");
  bench->add_option("--dtype", bo.dtype, "element type: f32 | f16 | bf16")->capture_default_str();
  bench->add_option("--backend", bo.backend, "auto | cpu | cuda")->capture_default_str();
  bench->add_option("--reps", bo.reps, "timed launches per route")->capture_default_str();
  bench->add_option("--warmup", bo.warmup, "untimed launches first")->capture_default_str();
  bench->add_option("--csv", bo.csv, "write the rows as CSV");
  bench->add_option("--json", bo.json, "write the rows as JSON");
  bench->add_option("--html", bo.html, "write an HTML report with plots");
  bench->add_option("--accept", bo.accept,
                    "acceptance threshold, a speedup over the framework route (eigen on the CPU), e.g. 1.10: "
                    "a verdict per route and shape, with the calls it takes to repay its compile and tuning")
      ->check(speedupAbove0());

  auto* tuneCmd = app.add_subcommand("tune", "search GEMM tile configs: verify, time, save and replay the choice");
  TuneOptions to;
  tuneCmd->add_option("kernel", to.kernel, "a catalogue GEMM (see `kiln list`)")->required();
  tuneCmd->add_option("--shape", to.shape, "MxNxK")->required();
  tuneCmd->add_option("--dtype", to.dtype, "f32 | f16 | bf16")->capture_default_str();
  tuneCmd->add_option("--backend", to.backend, "auto | cpu | cuda")->capture_default_str();
  tuneCmd->add_option("--space", to.space, "a JSON list of configs (default: the built-in space)");
  tuneCmd->add_option("--db", to.database, "tuning database (JSON): replay a matching choice, save a new one");
  tuneCmd->add_option("--reps", to.reps, "timed launches per candidate")->capture_default_str();
  tuneCmd->add_option("--warmup", to.warmup, "untimed launches first")->capture_default_str();
  tuneCmd->add_option("--threads", to.threads, "parallel compiles (0: all cores)")->capture_default_str();
  tuneCmd->add_flag("!--no-replay", to.replay, "search even when the database has a choice");
  tuneCmd->add_flag("!--no-progress", to.progress, "no progress bar");

  auto* cacheCmd = app.add_subcommand("cache", "the disk kernel cache: ls | stats | clear");
  std::string cacheAction, cacheDirOpt;
  cacheCmd->add_option("action", cacheAction, "ls | stats | clear")->required()->check(CLI::IsMember({"ls", "stats", "clear"}));
  cacheCmd->add_option("--dir", cacheDirOpt, "the cache directory (default: $KILN_CACHE_DIR or ~/.cache/kiln)");

  auto* warmCmd = app.add_subcommand("warm", "compile a manifest's kernels x dtypes x CUDA archs into the disk cache, "
                                              "without a GPU (a deploy step; docs/cache.md)");
  std::string warmManifest, warmDir;
  int warmThreads = 0;
  warmCmd->add_option("manifest", warmManifest, "a line per kernel: <kernel> <dtype>[,...] <arch>[,...] [<shape>]")->required();
  warmCmd->add_option("--dir", warmDir, "the cache directory (default: $KILN_CACHE_DIR or ~/.cache/kiln)");
  warmCmd->add_option("--threads", warmThreads, "parallel compiles (0: all cores)")->capture_default_str();

  auto* report = app.add_subcommand("report", "re-render saved lifecycle reports (JSON from kiln bench / kiln-mlp)");
  std::vector<std::string> reportIn;
  std::string reportCsv, reportHtml, reportTitle = "kiln lifecycle report";
  report->add_option("json", reportIn, "one or more JSON reports (rows are concatenated)")->required();
  report->add_option("--csv", reportCsv, "write the rows as CSV");
  report->add_option("--html", reportHtml, "write the HTML report");
  report->add_option("--title", reportTitle, "the HTML page's title")->capture_default_str();
  double reportAccept = 0;
  std::string reportBaseline = "framework";
  report->add_option("--accept", reportAccept, "judge the rows at this threshold (a speedup over --baseline), e.g. 1.10")
      ->check(speedupAbove0());
  report->add_option("--baseline", reportBaseline, "the route the others are judged against")->capture_default_str();

  // An unknown command word is named as such (CLI11 would say only that a command is missing).
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "kiln: unknown command '%s' (commands: %s; see --help)\n", argv[1], names.c_str());
      return kError;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kError;
  }
  try {
    if (app.got_subcommand("list")) return cmdList();
    if (app.got_subcommand("compile")) return cmdCompile(ckernel, emit, cdtype, cbackend, arch, output, cshape);
    if (app.got_subcommand("cache")) return cmdCache(cacheAction, cacheDirOpt);
    if (app.got_subcommand("warm")) return cmdWarm(warmManifest, warmDir, warmThreads);
    if (app.got_subcommand("tune")) {
      dtypeOf(to.dtype);
      return cmdTune(to);
    }
    if (app.got_subcommand("report")) return cmdReport(reportIn, reportCsv, reportHtml, reportTitle, reportAccept, reportBaseline);
    if (app.got_subcommand("bench")) {
      dtypeOf(bo.dtype);
      return cmdBench(bo);
    }
    return cmdRun(rkernel, rbackend, shape, rdtype, seed);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error [%s]: %s\n", kiln::to_string(e.kind()), e.what());
    return kError;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kiln: error: out of memory\n");
    return kError;
  } catch (const std::exception& e) {
    // The library throws only kiln::Error: anything else is a bug, reported, not a crash.
    std::fprintf(stderr, "kiln: internal error (a bug in kiln: please report it): %s\n", e.what());
    return kError;
  }
}
