#include "kiln/profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "kiln/error.hpp"
#include "Runtime/JsonInt.h"
#include "Runtime/RuntimeImpl.h"

namespace kiln::profile {

std::vector<double> time(const Runtime& rt, const std::function<void()>& run, const TimingOptions& o) {
  if (o.reps < 1 || o.warmup < 0)
    throw Error(ErrorKind::InvalidArgument, "time: reps must be >= 1 and warmup >= 0");
  return detail::RuntimeAccess::impl(rt).time(run, o.reps, o.warmup, o.flush_cache);
}

std::vector<double> time_stream(const Runtime& rt, const std::function<void(void*)>& run, const TimingOptions& o,
                                bool graph) {
  if (o.reps < 1 || o.warmup < 0)
    throw Error(ErrorKind::InvalidArgument, "time_stream: reps must be >= 1 and warmup >= 0");
  return detail::RuntimeAccess::impl(rt).timeStream(run, o.reps, o.warmup, o.flush_cache, graph);
}

Stat time_kernel(const Runtime& rt, const CompiledKernel& kernel, const std::vector<TensorView>& args,
                 const TimingOptions& o) {
  if (o.reps < 1 || o.warmup < 0)
    throw Error(ErrorKind::InvalidArgument, "time_kernel: reps must be >= 1 and warmup >= 0");
  if (kernel.backend() != rt.backend())
    throw Error(ErrorKind::InvalidArgument, std::string("time_kernel: kernel '") + kernel.signature().name +
                                                "' was compiled for " + to_string(kernel.backend()) +
                                                " but the runtime is " + to_string(rt.backend()));
  kernel.launch(args); // checks the arguments once, and fails before any timing if wrong
  return *summarize(time(rt, [&] { kernel.launch(args, nullptr); }, o));
}

std::optional<Stat> summarize(std::vector<double> samples) {
  if (samples.empty()) return std::nullopt;
  std::sort(samples.begin(), samples.end());
  auto rank = [&](double q) { // nearest rank
    size_t i = size_t(std::ceil(q * double(samples.size()))) ;
    return samples[std::min(samples.size() - 1, i == 0 ? 0 : i - 1)];
  };
  Stat s;
  s.median = rank(0.5);
  s.p10 = rank(0.1);
  s.p90 = rank(0.9);
  s.min = samples.front();
  s.reps = int(samples.size());
  return s;
}

namespace {

const char* kNotRun = "not-run";

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// For people: 4 significant digits (the CSV and JSON keep 6 and full precision).
std::string shortNum(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
std::string shortCell(const std::optional<double>& v) { return v ? shortNum(*v) : "not-run"; }
std::string cell(const std::optional<double>& v) { return v ? num(*v) : kNotRun; }
std::string cell(const std::optional<bool>& v) { return v ? (*v ? "true" : "false") : kNotRun; }

// RFC 4180: quote a field holding a comma, a quote or a line break.
std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '&': out += "&amp;"; break;
    case '"': out += "&quot;"; break;
    default: out += c;
    }
  }
  return out;
}

std::optional<double> warmMedian(const Row& r) {
  return r.warm ? std::optional<double>(r.warm->median) : std::nullopt;
}

std::optional<double> cold(const Row& r) {
  if (!r.first_run_ms) return std::nullopt;
  return r.import_ms.value_or(0) + r.compile_ms.value_or(0) + *r.first_run_ms;
}

// Series i of n's colour, a different one for every series of a chart: ten well-separated
// ones, and past ten, hues spread evenly around the wheel.
std::string colour(size_t i, size_t n) {
  static const char* ten[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                              "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  if (n <= 10) return ten[i];
  return "hsl(" + std::to_string(360 * i / n) + ",70%," + (i % 2 ? "35%" : "55%") + ")";
}

// A grouped horizontal bar chart: one group per label, one bar per series. `mark`: a value
// drawn as a dashed vertical line across the chart (a threshold), with its label.
std::string barChart(const std::string& title, const std::string& unit,
                     const std::vector<std::string>& groups, const std::vector<std::string>& series,
                     const std::map<std::pair<std::string, std::string>, double>& values, bool logScale = false,
                     std::optional<std::pair<double, std::string>> mark = std::nullopt) {
  double peak = 0, least = 0;
  for (auto& [k, v] : values) {
    peak = std::max(peak, v);
    if (v > 0) least = least > 0 ? std::min(least, v) : v;
  }
  if (mark && !logScale) peak = std::max(peak, mark->first * 1.1);
  // Log scale: times spanning microseconds to seconds stay visible; a bar's length is its
  // decades above a tenth of the smallest value.
  auto length = [&](double v) {
    if (!logScale) return v / peak;
    if (v <= 0 || least <= 0) return 0.0;
    const double lo = std::log10(least) - 1, hi = std::log10(peak);
    return hi > lo ? (std::log10(v) - lo) / (hi - lo) : 1.0;
  };
  size_t longest = 0;
  for (const auto& g : groups) longest = std::max(longest, g.size());
  const int barH = 14, gap = 10, width = 420;
  const int left = std::max(220, int(longest) * 7 + 10); // labels at 12px: ~7px a character
  int height = 40 + int(groups.size()) * (int(series.size()) * barH + gap) + 20 * int(series.size()) + (mark ? 20 : 0);
  std::string svg = "<h2>" + html(title) + "</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    std::to_string(left + width + 120) + "\" height=\"" + std::to_string(height) + "\">\n";
  int y = 20;
  for (const auto& g : groups) {
    svg += "<text x=\"0\" y=\"" + std::to_string(y + barH) + "\" font-size=\"12\">" + html(g) + "</text>\n";
    for (size_t s = 0; s < series.size(); ++s) {
      auto it = values.find({g, series[s]});
      if (it != values.end() && peak > 0) {
        int w = std::max(1, int(width * length(it->second)));
        svg += "<rect x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
               std::to_string(w) + "\" height=\"" + std::to_string(barH - 2) + "\" fill=\"" +
               colour(s, series.size()) + "\"/>\n<text x=\"" + std::to_string(left + w + 4) + "\" y=\"" +
               std::to_string(y + barH - 3) + "\" font-size=\"11\">" + shortNum(it->second) + " " + html(unit) +
               "</text>\n";
      } else {
        svg += "<text x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(y + barH - 3) +
               "\" font-size=\"11\" fill=\"#888\">" + html(series[s]) + ": not-run</text>\n";
      }
      y += barH;
    }
    y += gap;
  }
  if (mark && peak > 0) {
    const std::string x = std::to_string(left + int(width * length(mark->first)));
    svg += "<line class=\"mark\" x1=\"" + x + "\" y1=\"10\" x2=\"" + x + "\" y2=\"" + std::to_string(y) +
           "\" stroke=\"#000\" stroke-dasharray=\"4 3\"/><text x=\"" + x + "\" y=\"" + std::to_string(y + 12) +
           "\" font-size=\"11\">" + html(mark->second) + "</text>\n";
    y += 20;
  }
  for (size_t s = 0; s < series.size(); ++s, y += 20)
    svg += "<rect x=\"0\" y=\"" + std::to_string(y) + "\" width=\"12\" height=\"12\" fill=\"" + colour(s, series.size()) +
           "\"/><text x=\"18\" y=\"" + std::to_string(y + 11) + "\" font-size=\"12\">" + html(series[s]) + "</text>\n";
  return svg + "</svg>\n";
}

// What judge() decided, where it ran: a chart of each judged route's speedup over the
// baseline per shape with the threshold as a line, and the verdicts in a table.
std::string verdictSection(const std::vector<Row>& rows, const std::vector<std::string>& shapes) {
  std::optional<double> accept;
  std::string baseline;
  std::vector<std::string> judged;
  std::map<std::pair<std::string, std::string>, double> speedups;
  for (const Row& r : rows) {
    if (!r.accept) {
      if (baseline.empty()) baseline = r.route; // judge() leaves only the baseline's rows unjudged
      continue;
    }
    accept = r.accept;
    if (std::find(judged.begin(), judged.end(), r.route) == judged.end()) judged.push_back(r.route);
    if (r.speedup) speedups[{r.kernel + " " + r.shape + " " + r.dtype, r.route}] = *r.speedup;
  }
  if (!accept) return "";
  const std::string threshold = shortNum(*accept) + "x";
  std::string out = barChart("Speedup over " + baseline + " (warm), threshold " + threshold, "x", shapes, judged,
                             speedups, false, std::make_pair(*accept, "threshold " + threshold));
  out += "<h2>Verdicts (threshold " + html(threshold) + " over " + html(baseline) + ")</h2>\n<table>\n"
         "<tr><th>route</th><th>kernel</th><th>shape</th><th>dtype</th><th>speedup</th><th>clears</th>"
         "<th>break-even calls</th><th>verdict</th></tr>\n";
  for (const Row& r : rows) {
    if (!r.accept) continue;
    out += "<tr><td>" + html(r.route) + "</td><td>" + html(r.kernel) + "</td><td>" + html(r.shape) + "</td><td>" +
           html(r.dtype) + "</td><td>" + (r.speedup ? shortNum(*r.speedup) + "x" : std::string(kNotRun)) + "</td><td" +
           (r.clears && *r.clears ? "" : " class=\"bad\"") + ">" + cell(r.clears) + "</td><td>" +
           (r.break_even_calls ? num(*r.break_even_calls) : r.speedup ? "never" : "-") + "</td><td>" + html(r.verdict) +
           "</td></tr>\n";
  }
  return out + "</table>\n";
}

std::string phasesText(const Row& r) {
  if (r.compile_phases.empty()) return kNotRun;
  std::string s;
  for (const auto& [name, ms] : r.compile_phases) s += (s.empty() ? "" : ";") + name + "=" + num(ms);
  return s;
}

} // namespace

std::vector<std::pair<std::string, double>> phases(const CompileTimes& t) {
  std::vector<std::pair<std::string, double>> p = {
      {"tile_passes", t.tile_passes_ms}, {"lowering", t.lowering_ms}, {"codegen", t.codegen_ms}};
  if (t.assemble_ms > 0) p.emplace_back("assemble", t.assemble_ms);
  if (t.load_ms > 0) p.emplace_back("load", t.load_ms);
  if (t.fallback_ms > 0) p.emplace_back("fallback", t.fallback_ms); // on its own thread: not in the sum
  return p;
}

std::string to_csv(const std::vector<Row>& rows) {
  std::string out =
      "shape,dtype,device,reference_ok,compile_ms,warm_ms,model_ms,peak_mb,route,kernel,import_ms,"
      "first_run_ms,cache,warm_p10_ms,warm_p90_ms,warm_min_ms,warm_reps,tflops,gbps,rel_err,compile_phases,tune_ms,"
      "accept,speedup,clears,break_even_calls,verdict,launch\n";
  for (const Row& r : rows) {
    std::vector<std::string> f = {
        csvField(r.shape), csvField(r.dtype), csvField(r.device), cell(r.reference_ok),
        cell(r.compile_ms), cell(warmMedian(r)), cell(r.model_ms), cell(r.peak_mb), csvField(r.route),
        csvField(r.kernel), cell(r.import_ms), cell(r.first_run_ms), r.cache.empty() ? kNotRun : csvField(r.cache),
        r.warm ? num(r.warm->p10) : kNotRun, r.warm ? num(r.warm->p90) : kNotRun,
        r.warm ? num(r.warm->min) : kNotRun, r.warm ? std::to_string(r.warm->reps) : kNotRun,
        cell(r.tflops), cell(r.gbps), cell(r.rel_err), csvField(phasesText(r)), cell(r.tune_ms),
        cell(r.accept), cell(r.speedup), cell(r.clears), cell(r.break_even_calls),
        r.verdict.empty() ? kNotRun : csvField(r.verdict), r.launch.empty() ? kNotRun : csvField(r.launch)};
    for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + f[i];
    out += "\n";
  }
  return out;
}

std::string to_json(const std::vector<Row>& rows) {
  using nlohmann::json;
  auto opt = [](const auto& v) -> json { return v ? json(*v) : json(nullptr); };
  json arr = json::array();
  for (const Row& r : rows) {
    json warm = nullptr;
    if (r.warm)
      warm = {{"median_ms", r.warm->median}, {"p10_ms", r.warm->p10}, {"p90_ms", r.warm->p90},
              {"min_ms", r.warm->min}, {"reps", r.warm->reps}};
    arr.push_back({{"shape", r.shape}, {"dtype", r.dtype}, {"device", r.device}, {"route", r.route},
                   {"kernel", r.kernel}, {"reference_ok", opt(r.reference_ok)}, {"rel_err", opt(r.rel_err)},
                   {"import_ms", opt(r.import_ms)}, {"compile_ms", opt(r.compile_ms)},
                   {"cache", r.cache.empty() ? json(nullptr) : json(r.cache)},
                   {"first_run_ms", opt(r.first_run_ms)}, {"warm", warm}, {"model_ms", opt(r.model_ms)},
                   {"peak_mb", opt(r.peak_mb)}, {"tflops", opt(r.tflops)}, {"gbps", opt(r.gbps)}});
    json ph = nullptr;
    for (const auto& [name, ms] : r.compile_phases) ph[name] = ms;
    arr.back()["compile_phases_ms"] = ph;
    arr.back()["tune_ms"] = opt(r.tune_ms);
    arr.back()["accept"] = opt(r.accept);
    arr.back()["speedup"] = opt(r.speedup);
    arr.back()["clears"] = opt(r.clears);
    arr.back()["break_even_calls"] = opt(r.break_even_calls);
    arr.back()["verdict"] = r.verdict.empty() ? json(nullptr) : json(r.verdict);
    arr.back()["launch"] = r.launch.empty() ? json(nullptr) : json(r.launch);
  }
  return json{{"rows", arr}}.dump(2) + "\n";
}

std::vector<Row> from_json(const std::string& text) {
  using nlohmann::json;
  auto bad = [](const std::string& why) { return Error(ErrorKind::InvalidArgument, "lifecycle report JSON: " + why); };
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw bad(std::string("not JSON: ") + e.what());
  }
  if (!doc.is_object() || !doc.contains("rows") || !doc["rows"].is_array()) throw bad("no \"rows\" array");
  std::vector<Row> rows;
  for (const json& j : doc["rows"]) {
    try {
      Row r;
      auto str = [&](const char* k) { return j.value(k, std::string()); };
      auto opt = [&](const char* k) -> std::optional<double> {
        return j.contains(k) && !j[k].is_null() ? std::optional<double>(j[k].get<double>()) : std::nullopt;
      };
      r.shape = str("shape"), r.dtype = str("dtype"), r.device = str("device"), r.route = str("route");
      r.kernel = str("kernel");
      if (j.contains("cache") && j["cache"].is_string()) r.cache = j["cache"].get<std::string>();
      if (j.contains("reference_ok") && !j["reference_ok"].is_null()) r.reference_ok = j["reference_ok"].get<bool>();
      r.rel_err = opt("rel_err"), r.import_ms = opt("import_ms"), r.compile_ms = opt("compile_ms");
      r.first_run_ms = opt("first_run_ms"), r.model_ms = opt("model_ms"), r.peak_mb = opt("peak_mb");
      r.tflops = opt("tflops"), r.gbps = opt("gbps"), r.tune_ms = opt("tune_ms");
      r.accept = opt("accept"), r.speedup = opt("speedup"), r.break_even_calls = opt("break_even_calls");
      if (j.contains("clears") && !j["clears"].is_null()) r.clears = j["clears"].get<bool>();
      if (j.contains("verdict") && j["verdict"].is_string()) r.verdict = j["verdict"].get<std::string>();
      if (j.contains("launch") && j["launch"].is_string()) r.launch = j["launch"].get<std::string>();
      if (j.contains("warm") && j["warm"].is_object()) {
        const json& w = j["warm"];
        r.warm = Stat{w.at("median_ms").get<double>(), w.at("p10_ms").get<double>(), w.at("p90_ms").get<double>(),
                      w.at("min_ms").get<double>(), detail::jsonInt<int>(w.at("reps"))};
      }
      // A JSON object has no order: the pipeline's order is restored where known.
      if (j.contains("compile_phases_ms") && j["compile_phases_ms"].is_object()) {
        static const char* order[] = {"trace",  "tile_passes", "lowering", "codegen", "assemble",
                                      "nvrtc", "load",        "setup",    "fallback"};
        const json& ph = j["compile_phases_ms"];
        for (const char* name : order)
          if (ph.contains(name)) r.compile_phases.emplace_back(name, ph[name].get<double>());
        for (auto it = ph.begin(); it != ph.end(); ++it)
          if (std::find(std::begin(order), std::end(order), it.key()) == std::end(order))
            r.compile_phases.emplace_back(it.key(), it.value().get<double>());
      }
      rows.push_back(std::move(r));
    } catch (const json::exception& e) {
      throw bad("row " + std::to_string(rows.size()) + ": " + e.what());
    }
  }
  return rows;
}

std::string to_html(const std::vector<Row>& rows, const std::string& title) {
  std::vector<std::string> shapes, routes;
  std::set<std::string> seenShape, seenRoute;
  for (const Row& r : rows) {
    std::string s = r.kernel + " " + r.shape + " " + r.dtype;
    if (seenShape.insert(s).second) shapes.push_back(s);
    if (seenRoute.insert(r.route).second) routes.push_back(r.route);
  }
  std::map<std::pair<std::string, std::string>, double> tput, coldMs, warmMs;
  for (const Row& r : rows) {
    std::string s = r.kernel + " " + r.shape + " " + r.dtype;
    if (r.tflops) tput[{s, r.route}] = *r.tflops;
    if (auto c = cold(r)) coldMs[{s, r.route + " cold"}] = *c;
    if (r.warm) warmMs[{s, r.route + " warm"}] = r.warm->median;
  }
  std::vector<std::string> coldWarmSeries;
  for (const auto& rt : routes) {
    coldWarmSeries.push_back(rt + " cold");
    coldWarmSeries.push_back(rt + " warm");
  }
  auto both = coldMs;
  both.insert(warmMs.begin(), warmMs.end());
  std::string out = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html(title) +
                    "</title>\n<style>body{font-family:sans-serif;margin:24px}table{border-collapse:collapse}"
                    "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#f0f0f0}"
                    ".bad{color:#b00;font-weight:bold}.ph{font-size:11px;white-space:nowrap}</style></head><body>\n<h1>" + html(title) + "</h1>\n";
  // One device for every row (the usual case): said once, above the table.
  bool oneDevice = !rows.empty();
  for (const Row& r : rows) oneDevice = oneDevice && r.device == rows.front().device;
  if (oneDevice) out += "<p>Device: " + html(rows.front().device) + "</p>\n";
  out += std::string("<table>\n<tr><th>route</th><th>kernel</th><th>shape</th><th>dtype</th>") +
         (oneDevice ? "" : "<th>device</th>") +
         "<th>reference_ok</th><th>import ms</th><th>compile ms</th><th>compile phases ms</th><th>first run ms</th>"
         "<th>warm ms (p10-p90)</th><th>TFLOP/s</th><th>GB/s</th><th>model ms</th><th>peak MB</th><th>tune ms</th><th>launch</th></tr>\n";
  for (const Row& r : rows) {
    std::string ok = cell(r.reference_ok), ph;
    for (const auto& [name, ms] : r.compile_phases) ph += (ph.empty() ? "" : "<br>") + html(name) + " " + shortNum(ms);
    out += "<tr><td>" + html(r.route) + "</td><td>" + html(r.kernel) + "</td><td>" + html(r.shape) + "</td><td>" +
           html(r.dtype) + "</td>" + (oneDevice ? "" : "<td>" + html(r.device) + "</td>") + "<td" +
           (r.reference_ok && !*r.reference_ok ? " class=\"bad\"" : "") + ">" + ok + "</td><td>" +
           shortCell(r.import_ms) + "</td><td>" + shortCell(r.compile_ms) + "</td><td class=\"ph\">" +
           (ph.empty() ? kNotRun : ph) + "</td><td>" + shortCell(r.first_run_ms) + "</td><td>" +
           (r.warm ? shortNum(r.warm->median) + " (" + shortNum(r.warm->p10) + "-" + shortNum(r.warm->p90) + ")"
                   : kNotRun) +
           "</td><td>" + shortCell(r.tflops) + "</td><td>" + shortCell(r.gbps) + "</td><td>" + shortCell(r.model_ms) +
           "</td><td>" +
           shortCell(r.peak_mb) + "</td><td>" + shortCell(r.tune_ms) + "</td><td class=\"ph\">" +
           (r.launch.empty() ? kNotRun : html(r.launch)) + "</td></tr>\n";
  }
  out += "</table>\n";
  out += barChart("Throughput per shape and route", "TFLOP/s", shapes, routes, tput);
  out += barChart("Cold (import + compile + first run) versus warm, per route (log scale)", "ms", shapes,
                  coldWarmSeries, both, true);
  return out + verdictSection(rows, shapes) + "</body></html>\n";
}

} // namespace kiln::profile
