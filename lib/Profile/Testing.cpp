#include "kiln/testing.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>

#include "kiln/dtype.hpp"
#include "kiln/error.hpp"
#include "Profile/Verdict.h"

namespace kiln::testing {

namespace {
double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
} // namespace

std::string Check::summary() const {
  char buf[128];
  std::string s = "kernel '" + row.kernel + "' " + row.shape + " " + row.dtype + " on " + row.device + ": " +
                  report.summary();
  if (row.compile_ms) {
    std::snprintf(buf, sizeof buf, "; compile %.1f ms", *row.compile_ms);
    s += buf;
  }
  if (row.warm) {
    std::snprintf(buf, sizeof buf, "; warm %.4f ms (p10 %.4f, p90 %.4f, %d reps)", row.warm->median, row.warm->p10,
                  row.warm->p90, row.warm->reps);
    s += buf;
  }
  return s;
}

Check check_kernel(const Runtime& rt, const Kernel& kernel, std::vector<HostTensor>& args, size_t output,
                   const std::vector<double>& reference, const CheckOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  CompiledKernel ck = rt.compile(kernel);
  const double compileMs = msSince(t0);
  Check c = check_compiled(rt, ck, args, output, reference, options);
  c.row.compile_ms = compileMs;
  c.row.compile_phases = profile::phases(ck.times());
  c.row.cache = "miss";
  return c;
}

Check check_compiled(const Runtime& rt, const CompiledKernel& kernel, std::vector<HostTensor>& args, size_t output,
                     const std::vector<double>& reference, const CheckOptions& options) {
  const std::string name = kernel.signature().name;
  if (output >= args.size())
    throw Error(ErrorKind::InvalidArgument, "testing::check: kernel '" + name + "': output index " +
                                                std::to_string(output) + " but only " + std::to_string(args.size()) +
                                                " arguments");
  HostTensor& out = args[output];
  if (int64_t(reference.size()) != out.numel())
    throw Error(ErrorKind::InvalidArgument, "testing::check: kernel '" + name + "': the reference has " +
                                                std::to_string(reference.size()) + " values, the output " +
                                                std::to_string(out.numel()));
  out.poison();
  std::vector<DeviceTensor> dev;
  std::vector<TensorView> views;
  for (const HostTensor& h : args) {
    dev.push_back(rt.upload(h));
    views.push_back(dev.back().view());
  }
  Check c;
  auto t0 = std::chrono::steady_clock::now();
  kernel.launch(views);
  c.row.first_run_ms = msSince(t0);
  rt.download(dev[output], out);
  c.report = verify::compare(out.view(), reference, options.tolerance.value_or(verify::Tolerance::for_dtype(out.dtype())));
  profile::Row& r = c.row;
  r.kernel = name;
  r.route = options.route;
  r.dtype = to_string(out.dtype());
  r.device = rt.describe().substr(0, rt.describe().find(';'));
  if (options.shape.empty()) {
    for (size_t i = 0; i < out.dims().size(); ++i) r.shape += (i ? "x" : "") + std::to_string(out.dims()[i]);
  } else {
    r.shape = options.shape;
  }
  r.reference_ok = c.report.ok;
  r.rel_err = c.report.rel_l2;
  r.peak_mb = double(rt.memory().peak_bytes) / (1024.0 * 1024.0);
  if (options.time && c.report.ok) { // timing a wrong kernel tells nothing
    r.warm = profile::time_kernel(rt, kernel, views, options.timing);
    if (options.flops > 0) r.tflops = options.flops / (r.warm->median * 1e9);
  }
  return c;
}

std::vector<profile::Row> decide(const Runtime& rt, const Check& kiln, const Baseline& baseline,
                                 const std::vector<double>& reference, double accept, const CheckOptions& options) {
  const std::string what = "testing::decide: kernel '" + kiln.row.kernel + "': ";
  if (!baseline.run || !baseline.result)
    throw Error(ErrorKind::InvalidArgument, what + "the baseline '" + baseline.route + "' needs both run and result");
  if (baseline.route == kiln.row.route)
    throw Error(ErrorKind::InvalidArgument, what + "the baseline is named '" + baseline.route + "', as kiln's route");
  profile::detail::checkThreshold(accept); // refused before any work
  profile::Row b;
  b.kernel = kiln.row.kernel, b.shape = kiln.row.shape, b.dtype = kiln.row.dtype, b.device = kiln.row.device;
  b.route = baseline.route;
  rt.reset_peak_memory();
  auto t0 = std::chrono::steady_clock::now();
  baseline.run();
  rt.synchronize();
  b.first_run_ms = msSince(t0);
  const std::vector<double> got = baseline.result();
  if (got.size() != reference.size())
    throw Error(ErrorKind::InvalidArgument, what + "the baseline's result has " + std::to_string(got.size()) +
                                                " values, the reference " + std::to_string(reference.size()));
  // Compared as the kernel's output is: the same dtype's tolerance, unless one is given. (The
  // values go through f32, which holds every f16, bf16 and f32 result exactly.)
  const DType dtype = parse_dtype(kiln.row.dtype).value_or(DType::f32);
  HostTensor out(DType::f32, {int64_t(got.size())});
  for (size_t i = 0; i < got.size(); ++i) out.set(int64_t(i), float(got[i]));
  const verify::Report rep =
      verify::compare(out.view(), reference, options.tolerance.value_or(verify::Tolerance::for_dtype(dtype)));
  b.reference_ok = rep.ok;
  b.rel_err = rep.rel_l2;
  if (options.time && rep.ok) {
    b.warm = profile::summarize(profile::time(rt, baseline.run, options.timing));
    if (options.flops > 0) b.tflops = options.flops / (b.warm->median * 1e9);
  }
  b.peak_mb = double(rt.memory().peak_bytes) / (1024.0 * 1024.0);
  std::vector<profile::Row> rows = {kiln.row, b};
  profile::judge(rows, accept, baseline.route);
  return rows;
}

void append_csv(const std::string& path, const std::vector<profile::Row>& rows) {
  bool fresh = true;
  {
    std::ifstream in(path, std::ios::ate);
    fresh = !in || in.tellg() <= 0;
  }
  std::string text = profile::to_csv(rows);
  if (!fresh) text = text.substr(text.find('\n') + 1); // the header is already there
  std::ofstream out(path, std::ios::app);
  out << text;
  if (!out) throw Error(ErrorKind::Runtime, "testing::append_csv: cannot write '" + path + "'");
}

} // namespace kiln::testing
