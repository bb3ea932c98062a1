// Lifecycle reports: the CSV's fixed first columns, `not-run` for what was not measured
// (never 0), JSON with everything, and an HTML page with its two plots.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "kiln/catalogue.hpp"
#include "kiln/error.hpp"
#include "kiln/profile.hpp"
#include "kiln/verify.hpp"

using namespace kiln::profile;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

std::vector<Row> sampleRows() {
  Row kiln;
  kiln.shape = "4096x4096x4096";
  kiln.dtype = "bf16";
  kiln.device = "NVIDIA H200";
  kiln.route = "kiln";
  kiln.kernel = "gemm_bias_relu";
  kiln.reference_ok = true;
  kiln.rel_err = 1.6e-3;
  kiln.import_ms = 12.5;
  kiln.compile_ms = 380;
  kiln.compile_phases = {{"trace", 1.5}, {"lowering", 30}, {"codegen", 170}};
  kiln.cache = "miss";
  kiln.first_run_ms = 2.3;
  kiln.warm = summarize({1.51, 1.50, 1.52, 1.49, 1.60});
  kiln.tflops = 91.5;
  kiln.launch = "sm_90a twin 'gemm_bias_relu__sm90_n256' (132 CTAs, persistent)";
  Row framework = kiln;
  framework.launch.clear(); // cuBLASLt's choice is its own
  framework.route = "framework";
  framework.compile_ms.reset(); // cuBLAS compiles nothing
  framework.compile_phases.clear();
  framework.cache.clear();
  framework.warm = summarize({0.18});
  framework.tflops = 763;
  framework.gbps = 1234.25;
  framework.model_ms.reset();
  Row cpu; // a route that never ran: only its identity is known
  cpu.shape = "4096x4096x4096";
  cpu.dtype = "bf16";
  cpu.device = "host, with, commas";
  cpu.route = "eigen";
  cpu.kernel = "gemm_bias_relu";
  return {kiln, framework, cpu};
}

} // namespace

TEST_CASE("time_stream gives its work the stream to enqueue on and times each call; graphs are CUDA's",
          "[profile]") {
  kiln::Runtime rt = kiln::Runtime::create(kiln::Backend::cpu, {.cache_dir = "off"});
  int calls = 0;
  bool nullStream = true;
  std::vector<double> ms = kiln::profile::time_stream(
      rt, [&](void* s) { ++calls, nullStream = nullStream && s == nullptr; }, {.reps = 4, .warmup = 2});
  CHECK(ms.size() == 4);
  CHECK(calls == 6); // warm-up first
  CHECK(nullStream); // the CPU has no streams
  CHECK_THROWS_WITH(kiln::profile::time_stream(rt, [](void*) {}, {}, /*graph=*/true),
                    Catch::Matchers::Contains("CUDA graphs need a CUDA runtime"));
  CHECK_THROWS_WITH(kiln::profile::time_stream(rt, [](void*) {}, {.reps = 0}), Catch::Matchers::Contains("reps must be >= 1"));
}

TEST_CASE("warm timings are summarised by nearest-rank percentiles", "[profile]") {
  auto s = summarize({5, 1, 4, 2, 3, 10, 9, 8, 7, 6});
  REQUIRE(s);
  CHECK(s->median == 5);
  CHECK(s->p10 == 1);
  CHECK(s->p90 == 9);
  CHECK(s->min == 1);
  CHECK(s->reps == 10);
  CHECK_FALSE(summarize({}));
}

TEST_CASE("the CSV starts with the eight lifecycle columns", "[profile]") {
  std::string csv = to_csv(sampleRows());
  CHECK_THAT(csv, StartsWith("shape,dtype,device,reference_ok,compile_ms,warm_ms,model_ms,peak_mb,"));
  std::istringstream in(csv);
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  CHECK_THAT(first, StartsWith("4096x4096x4096,bf16,NVIDIA H200,true,380,1.51,not-run,not-run,kiln,"));
}

TEST_CASE("figures that were not measured are written not-run, never 0", "[profile]") {
  std::string csv = to_csv(sampleRows());
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line); // header
  std::getline(in, line); // kiln
  std::getline(in, line); // framework: no compile
  CHECK_THAT(line, StartsWith("4096x4096x4096,bf16,NVIDIA H200,true,not-run,0.18,"));
  std::getline(in, line); // eigen: nothing measured; the device with commas is quoted
  CHECK_THAT(line, StartsWith("4096x4096x4096,bf16,\"host, with, commas\",not-run,not-run,not-run,not-run,not-run,eigen,"));
  CHECK(line.find(",0,") == std::string::npos);
}

TEST_CASE("the JSON holds every figure and null for what was not run", "[profile]") {
  auto doc = nlohmann::json::parse(to_json(sampleRows()));
  REQUIRE(doc["rows"].size() == 3);
  auto& k = doc["rows"][0];
  CHECK(k["route"] == "kiln");
  CHECK(k["warm"]["reps"] == 5);
  CHECK(k["warm"]["p90_ms"] == Approx(1.60)); // nearest rank of 5: the largest
  CHECK(k["cache"] == "miss");
  CHECK(doc["rows"][1]["compile_ms"].is_null());
  CHECK(doc["rows"][2]["warm"].is_null());
  CHECK(doc["rows"][2]["reference_ok"].is_null());
}

TEST_CASE("the HTML report has the table and both plots", "[profile]") {
  std::string page = to_html(sampleRows(), "gemm <bias> relu");
  CHECK_THAT(page, StartsWith("<!DOCTYPE html>"));
  CHECK_THAT(page, Contains("<title>gemm &lt;bias&gt; relu</title>"));
  CHECK_THAT(page, Contains("Throughput per shape and route"));
  CHECK_THAT(page, Contains("Cold (import + compile + first run) versus warm"));
  CHECK_THAT(page, Contains("<svg"));
  CHECK_THAT(page, Contains("763 TFLOP/s"));
  // The table has GB/s beside TFLOP/s (a decode GEMM is judged by its weight's bandwidth).
  CHECK_THAT(page, Contains("<th>TFLOP/s</th><th>GB/s</th>"));
  CHECK_THAT(page, Contains("</td><td>1234</td><td>")); // 4 significant digits
  // kiln cold = 12.5 + 380 + 2.3
  CHECK_THAT(page, Contains("394.8 ms"));
  CHECK_THAT(page, Contains("eigen: not-run"));
  CHECK(page.find("<script") == std::string::npos);
}

TEST_CASE("time_kernel times each launch alone and summarises", "[profile][cpu]") {
  kiln::Runtime rt = kiln::Runtime::create(kiln::Backend::cpu);
  kiln::CompiledKernel ck = rt.compile(kiln::catalogue::gemm(kiln::DType::f32));
  kiln::catalogue::Problem p = kiln::catalogue::find("gemm").problem({64, 64, 64}, kiln::DType::f32, 1);
  kiln::catalogue::DeviceProblem d = kiln::catalogue::upload(rt, p);
  Stat s = time_kernel(rt, ck, d.views, {.reps = 7, .warmup = 2, .flush_cache = true});
  CHECK(s.reps == 7);
  CHECK(s.min > 0);
  CHECK(s.min <= s.p10);
  CHECK(s.p10 <= s.median);
  CHECK(s.median <= s.p90);
  // The timed launches computed the right thing.
  CHECK(kiln::catalogue::verify_output(rt, d, p).ok);
}

TEST_CASE("time_kernel refuses a kernel of another backend and bad arguments before timing", "[profile][errors]") {
  kiln::Runtime cpu = kiln::Runtime::create(kiln::Backend::cpu);
  kiln::Runtime offline = kiln::Runtime::create(kiln::Backend::cuda, {.compile_only = true});
  kiln::CompiledKernel gpuKernel = offline.compile(kiln::catalogue::add(kiln::DType::f32));
  CHECK_THROWS_WITH(time_kernel(cpu, gpuKernel, {}), Contains("was compiled for cuda but the runtime is cpu"));
  kiln::CompiledKernel ck = cpu.compile(kiln::catalogue::add(kiln::DType::f32));
  CHECK_THROWS_WITH(time_kernel(cpu, ck, {}), Contains("expects 3 arguments"));
  CHECK_THROWS_WITH(time_kernel(cpu, ck, {}, {.reps = 0}), Contains("reps must be >= 1"));
}

TEST_CASE("a runtime counts the bytes its tensors hold and their high-water mark", "[profile][memory]") {
  kiln::Runtime rt = kiln::Runtime::create(kiln::Backend::cpu);
  CHECK(rt.memory().in_use_bytes == 0);
  CHECK(rt.memory().peak_bytes == 0);
  {
    kiln::DeviceTensor a = rt.allocate(kiln::DType::f32, {100, 10}); // 4000 B
    kiln::DeviceTensor b = rt.upload(kiln::HostTensor(kiln::DType::bf16, {7}));  // 14 B
    CHECK(rt.memory().in_use_bytes == 4014);
    CHECK(rt.memory().peak_bytes == 4014);
    kiln::DeviceTensor moved = std::move(a); // a move is not a second allocation
    CHECK(rt.memory().in_use_bytes == 4014);
  }
  CHECK(rt.memory().in_use_bytes == 0);
  CHECK(rt.memory().peak_bytes == 4014); // the mark stays until it is reset
  kiln::DeviceTensor c = rt.allocate(kiln::DType::f16, {8});
  rt.reset_peak_memory();
  CHECK(rt.memory().peak_bytes == 16);
  // Another runtime keeps its own count.
  kiln::Runtime other = kiln::Runtime::create(kiln::Backend::cpu);
  CHECK(other.memory().in_use_bytes == 0);
}

TEST_CASE("compile phases are one CSV field and a JSON object; a row without them says not-run", "[profile]") {
  std::vector<Row> rows = sampleRows();
  std::string csv = to_csv(rows);
  CHECK_THAT(csv, Contains(",compile_phases,tune_ms,"));
  CHECK_THAT(csv, Contains(",trace=1.5;lowering=30;codegen=170,not-run,")); // then tune_ms
  auto j = nlohmann::json::parse(to_json(rows));
  CHECK(j["rows"][0]["compile_phases_ms"]["codegen"] == 170);
  CHECK(j["rows"][1]["compile_phases_ms"].is_null());
  kiln::CompileTimes t;
  t.tile_passes_ms = 1, t.lowering_ms = 2, t.codegen_ms = 3, t.assemble_ms = 4, t.load_ms = 5;
  auto ph = phases(t);
  REQUIRE(ph.size() == 5);
  CHECK(ph[3].first == "assemble");
  t.assemble_ms = t.load_ms = 0; // the CPU backend has neither
  CHECK(phases(t).size() == 3);
  // A twin's fallback compiled on its own thread: a phase of its own, outside the sum.
  t.load_ms = 5, t.fallback_ms = 400;
  ph = phases(t);
  REQUIRE(ph.size() == 5);
  CHECK(ph[4] == std::pair<std::string, double>{"fallback", 400});
  CHECK(t.total_ms() == 11);
  Row r = sampleRows()[0];
  r.compile_phases = {{"fallback", 400}, {"trace", 1.5}}; // the pipeline's order comes back from JSON
  CHECK(from_json(to_json({r}))[0].compile_phases == std::vector<std::pair<std::string, double>>{{"trace", 1.5}, {"fallback", 400}});
}

TEST_CASE("a row names the machine code that ran in the CSV's last field and in JSON; not-run where none was recorded",
          "[profile]") {
  std::vector<Row> rows = sampleRows();
  std::istringstream in(to_csv(rows));
  std::string header, kilnLine, frameworkLine;
  std::getline(in, header);
  std::getline(in, kilnLine);
  std::getline(in, frameworkLine);
  CHECK_THAT(header, Catch::Matchers::EndsWith(",verdict,launch"));
  // (Its commas make it one quoted field.)
  CHECK_THAT(kilnLine, Catch::Matchers::EndsWith(",\"sm_90a twin 'gemm_bias_relu__sm90_n256' (132 CTAs, persistent)\""));
  CHECK_THAT(frameworkLine, Catch::Matchers::EndsWith(",not-run"));
  auto j = nlohmann::json::parse(to_json(rows));
  CHECK(j["rows"][0]["launch"] == "sm_90a twin 'gemm_bias_relu__sm90_n256' (132 CTAs, persistent)");
  CHECK(j["rows"][1]["launch"].is_null());
  CHECK(from_json(to_json(rows))[0].launch == rows[0].launch);
  CHECK(from_json(to_json(rows))[1].launch.empty());
}

TEST_CASE("a saved JSON report reads back into the same rows", "[profile]") {
  std::vector<Row> rows = sampleRows();
  std::vector<Row> back = from_json(to_json(rows));
  REQUIRE(back.size() == rows.size());
  CHECK(to_csv(back) == to_csv(rows)); // every figure, not-run included, survives
  CHECK(back[0].compile_phases == rows[0].compile_phases);
  rows[0].tune_ms = 4254.5; // the price of tuning survives too
  CHECK(from_json(to_json(rows))[0].tune_ms == 4254.5);
  CHECK_THAT(to_csv(rows), Contains(",4254.5,"));
  CHECK_THROWS_WITH(from_json("{\"rows\": 3}"), Contains("no \"rows\" array"));
  CHECK_THROWS_WITH(from_json("not json"), Contains("not JSON"));
  CHECK_THROWS_WITH(from_json("{\"rows\": [{\"warm\": {\"median_ms\": 1}}]}"), Contains("row 0"));
}

TEST_CASE("the HTML table names a shared device once and lists compile phases", "[profile]") {
  std::vector<Row> rows = sampleRows();
  rows.pop_back(); // the eigen row has another device
  std::string page = to_html(rows, "t");
  CHECK_THAT(page, Contains("<p>Device: NVIDIA H200</p>"));
  CHECK(page.find("<th>device</th>") == std::string::npos);
  CHECK_THAT(page, Contains("trace 1.5<br>lowering 30<br>codegen 170"));
  CHECK_THAT(to_html(sampleRows(), "t"), Contains("<th>device</th>"));
}

TEST_CASE("the HTML table names the machine code each row ran, and not-run for a framework's", "[profile]") {
  const std::string page = to_html(sampleRows(), "t");
  CHECK_THAT(page, Contains("<th>tune ms</th><th>launch</th></tr>"));
  CHECK_THAT(page, Contains("<td class=\"ph\">sm_90a twin 'gemm_bias_relu__sm90_n256' (132 CTAs, persistent)</td></tr>"));
  // The framework row (cuBLASLt chose its own kernel) ends its row with not-run.
  const size_t fw = page.find("<tr><td>framework</td>");
  REQUIRE(fw != std::string::npos);
  const std::string row = page.substr(fw, page.find("</tr>", fw) - fw);
  CHECK_THAT(row, Catch::Matchers::EndsWith("<td class=\"ph\">not-run</td>"));
}

namespace {
/// A verified row of `route` on gemm 64x64x64 f32: `warm` ms warm, `cold` ms of compile.
Row judged(const std::string& route, double warm, double cold) {
  Row r;
  r.shape = "64x64x64", r.dtype = "f32", r.kernel = "gemm", r.route = route;
  r.reference_ok = true;
  r.warm = summarize({warm});
  if (cold > 0) r.compile_ms = cold;
  r.first_run_ms = 0.5;
  return r;
}
} // namespace

TEST_CASE("judge adopts a route that clears the threshold and counts the calls that repay its compile", "[profile]") {
  // kiln: 1 ms warm, 100.5 ms cold; framework: 2 ms warm, 0.5 ms cold. kiln is ahead once
  // 100.5 + n < 0.5 + 2n, i.e. from n = 101 calls on.
  std::vector<Row> rows = {judged("framework", 2.0, 0), judged("kiln", 1.0, 100)};
  judge(rows, 1.10);
  const Row& k = rows[1];
  REQUIRE(k.speedup);
  CHECK(*k.speedup == Approx(2.0));
  CHECK(k.accept == 1.10);
  CHECK(k.clears == true);
  REQUIRE(k.break_even_calls);
  CHECK(*k.break_even_calls == 101);
  CHECK_THAT(k.verdict, StartsWith("adopt kiln for gemm 64x64x64 f32: 2.00x framework (threshold 1.10x)"));
  CHECK_THAT(k.verdict, Contains("repaid after 101 calls"));
  // The baseline is not judged against itself.
  CHECK_FALSE(rows[0].speedup);
  CHECK(rows[0].verdict.empty());
  // Tuning is cold cost too: 100 ms more moves the break-even to 201 calls.
  rows[1].tune_ms = 100;
  judge(rows, 1.10);
  CHECK(*rows[1].break_even_calls == 201);
  // No more cold cost than the baseline: ahead from the first call.
  rows[1].compile_ms.reset(), rows[1].tune_ms.reset();
  judge(rows, 1.10);
  CHECK(*rows[1].break_even_calls == 0);
  CHECK_THAT(rows[1].verdict, Contains("ahead from the first call"));
}

TEST_CASE("judge keeps the framework where a route is under the threshold, and says by how much", "[profile]") {
  std::vector<Row> rows = {judged("kiln", 1.0, 100), judged("framework", 1.0625, 0)};
  judge(rows, 1.10);
  CHECK(rows[0].clears == false);
  CHECK(*rows[0].speedup == Approx(1.0625));
  CHECK(*rows[0].break_even_calls == 1601); // faster (100 / 0.0625 calls repay it), only not by enough
  CHECK(rows[0].verdict == "keep framework for gemm 64x64x64 f32: kiln runs at 1.06x framework, under the threshold 1.10x");
  // Slower warm: never repaid, whatever the threshold; a threshold under 1 may still clear it.
  rows[0].warm = summarize({2.1});
  judge(rows, 0.5);
  CHECK(rows[0].clears == true);
  CHECK_FALSE(rows[0].break_even_calls);
  CHECK_THAT(rows[0].verdict, Contains("never repaid"));
}

TEST_CASE("judge never calls a wrong route fast, and says when there is nothing to compare with", "[profile]") {
  std::vector<Row> rows = {judged("framework", 2.0, 0), judged("kiln", 0.1, 0), judged("cuda", 1.0, 0)};
  rows[1].reference_ok = false;
  rows[1].rel_err = 0.25;
  judge(rows, 1.10);
  CHECK_FALSE(rows[1].speedup);
  CHECK(rows[1].clears == false);
  CHECK_THAT(rows[1].verdict, StartsWith("kiln is wrong here: it fails verification on gemm 64x64x64 f32"));
  CHECK(rows[2].clears == true);
  // Another shape, or a baseline that failed verification: no verdict but why.
  rows[2].shape = "128x128x128";
  judge(rows, 1.10);
  CHECK_FALSE(rows[2].clears);
  CHECK(rows[2].verdict == "no verified, timed framework row for gemm 128x128x128 f32 to compare with");
  rows[2].shape = "64x64x64";
  rows[0].reference_ok = false;
  judge(rows, 1.10);
  CHECK_THAT(rows[2].verdict, StartsWith("no verified, timed framework row"));
  // Another baseline by name (the CPU's: eigen).
  std::vector<Row> cpu = {judged("eigen", 3.0, 0), judged("kiln-cpu", 1.0, 0)};
  judge(cpu, 1.10, "eigen");
  CHECK_THAT(cpu[1].verdict, StartsWith("adopt kiln-cpu for gemm 64x64x64 f32: 3.00x eigen"));
}

TEST_CASE("judge refuses a threshold that is not a speedup above 0", "[profile][errors]") {
  std::vector<Row> rows = {judged("framework", 2.0, 0), judged("kiln", 1.0, 0)};
  for (double bad : {0.0, -1.0, std::nan("")}) {
    try {
      judge(rows, bad);
      FAIL("accepted " << bad);
    } catch (const kiln::Error& e) {
      CHECK(e.kind() == kiln::ErrorKind::InvalidArgument);
      CHECK_THAT(std::string(e.what()), Contains("acceptance threshold"));
    }
  }
}

TEST_CASE("a judged report keeps its verdicts in CSV columns after the fixed ones and through JSON", "[profile]") {
  std::vector<Row> rows = {judged("framework", 2.0, 0), judged("kiln", 1.0, 100)};
  judge(rows, 1.10);
  const std::string csv = to_csv(rows);
  CHECK_THAT(csv, StartsWith("shape,dtype,device,reference_ok,compile_ms,warm_ms,model_ms,peak_mb,"));
  CHECK_THAT(csv, Contains(",tune_ms,accept,speedup,clears,break_even_calls,verdict,launch\n"));
  CHECK_THAT(csv, Contains(",1.1,2,true,101,adopt kiln for gemm 64x64x64 f32"));
  std::vector<Row> back = from_json(to_json(rows));
  REQUIRE(back.size() == 2);
  CHECK(back[1].accept == 1.1);
  CHECK(back[1].speedup == 2.0);
  CHECK(back[1].clears == true);
  CHECK(back[1].break_even_calls == 101);
  CHECK(back[1].verdict == rows[1].verdict);
  CHECK_FALSE(back[0].clears);
  CHECK(back[0].verdict.empty());
}

TEST_CASE("the HTML report of a judged run shows the speedups against the threshold line and the verdicts", "[profile]") {
  std::vector<Row> rows = {judged("framework", 2.0, 0), judged("kiln", 1.0, 100), judged("cuda", 1.9, 0)};
  CHECK_THAT(to_html(rows, "t"), !Contains("Verdicts")); // not judged: no verdict section
  judge(rows, 1.10);
  const std::string page = to_html(rows, "t");
  CHECK_THAT(page, Contains("<h2>Speedup over framework (warm), threshold 1.1x</h2>"));
  CHECK_THAT(page, Contains("class=\"mark\""));
  CHECK_THAT(page, Contains(">threshold 1.1x</text>"));
  CHECK_THAT(page, Contains("<h2>Verdicts (threshold 1.1x over framework)</h2>"));
  CHECK_THAT(page, Contains("adopt kiln for gemm 64x64x64 f32: 2.00x framework"));
  CHECK_THAT(page, Contains("keep framework for gemm 64x64x64 f32: cuda runs at 1.05x framework"));
  CHECK_THAT(page, Contains("<td>101</td>")); // kiln's break-even calls
}

TEST_CASE("every series of an HTML chart has a colour of its own", "[profile]") {
  // Six routes: twelve series (cold and warm each) in the cold-versus-warm chart.
  std::vector<Row> rows;
  for (const char* route : {"framework", "framework-eager", "kiln", "kiln-tuned", "cuda", "eigen"})
    rows.push_back(judged(route, 1.0, 10));
  const std::string page = to_html(rows, "t");
  const size_t chart = page.find("Cold (import");
  REQUIRE(chart != std::string::npos);
  // The legend: a swatch per series, "<rect x="0" ... fill="COLOUR"/><text ...>NAME</text>".
  std::map<std::string, std::string> fillOf;
  for (size_t at = page.find("<rect x=\"0\"", chart); at != std::string::npos; at = page.find("<rect x=\"0\"", at + 1)) {
    const size_t f = page.find("fill=\"", at) + 6, name = page.find('>', page.find("<text", at)) + 1;
    fillOf[page.substr(name, page.find('<', name) - name)] = page.substr(f, page.find('"', f) - f);
  }
  REQUIRE(fillOf.size() == 12);
  std::set<std::string> fills;
  for (const auto& [name, fill] : fillOf) fills.insert(fill);
  CHECK(fills.size() == 12);
}

TEST_CASE("judge decides a model-level row on model_ms, the figure that counts", "[profile]") {
  std::vector<Row> rows = {judged("framework", 1.0, 0), judged("kiln", 1.0, 0)};
  for (Row& r : rows) r.kernel = "mlp_block";
  rows[0].model_ms = 12.0; // the warm figures tie; the whole block does not
  rows[1].model_ms = 10.0;
  judge(rows, 1.10);
  CHECK(*rows[1].speedup == Approx(1.2));
  CHECK(rows[1].clears == true);
  CHECK_THAT(rows[1].verdict, StartsWith("adopt kiln for mlp_block 64x64x64 f32: 1.20x framework"));
  // A row without a first run (an operator timed inside a model) has no cold figures: its
  // break-even is unknown, not "from the first call".
  rows[1].first_run_ms.reset();
  judge(rows, 1.10);
  CHECK_FALSE(rows[1].break_even_calls);
  CHECK_THAT(rows[1].verdict, Contains("no cold figures on this row to charge"));
}

TEST_CASE("a verdict summary says per route and kernel where to adopt it, or to fix it first", "[profile]") {
  auto at = [](const std::string& route, const std::string& shape, double warm) {
    Row r = judged(route, warm, 0);
    r.shape = shape;
    return r;
  };
  std::vector<Row> rows = {at("framework", "a", 2.0), at("kiln", "a", 1.0),  at("framework", "b", 2.0),
                           at("kiln", "b", 1.9),      at("cuda", "a", 1.0),   at("cuda", "b", 1.0)};
  judge(rows, 1.10);
  std::vector<std::string> lines = verdict_summary(rows);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "kiln for gemm f32: clears 1.10x on 1 of 2 shapes (a): adopt it there, keep framework on the rest "
                    "(1.05x to 2.00x framework)");
  CHECK(lines[1] == "adopt cuda for gemm f32: it clears 1.10x on all of 2 shapes (2.00x framework)");
  rows[1].warm = summarize({3.0});
  rows[3].reference_ok = false;
  judge(rows, 1.10);
  lines = verdict_summary(rows);
  CHECK(lines[0] == "kiln for gemm f32: wrong on 1 of 2 shapes (b): fix it before adopting it anywhere");
  rows[3].reference_ok = true;
  judge(rows, 1.10);
  CHECK(verdict_summary(rows)[0] == "keep framework (kiln for gemm f32): it clears 1.10x on none of 2 shapes "
                                    "(0.67x to 1.05x framework)");
  CHECK(verdict_summary({}).empty());
  // A route with no baseline row on a shape is not judged there, and with none at all it gets
  // no verdict: never "keep framework" where there is no framework to keep.
  std::vector<Row> alone = {at("kiln", "a", 1.0), at("framework", "b", 2.0), at("kiln", "b", 1.0)};
  judge(alone, 1.10);
  CHECK(verdict_summary(alone)[0] ==
        "adopt kiln for gemm f32: it clears 1.10x on all of 1 shape (2.00x framework); 1 more without a framework row "
        "to compare with");
  alone.erase(alone.begin() + 1, alone.end());
  judge(alone, 1.10);
  CHECK(verdict_summary(alone)[0] ==
        "kiln for gemm f32: no verdict: no verified, timed framework row to compare with on any of its 1 shape");
}
