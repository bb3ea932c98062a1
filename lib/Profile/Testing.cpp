#include "kiln/testing.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>

#include "kiln/error.hpp"

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
