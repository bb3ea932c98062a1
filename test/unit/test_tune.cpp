// The autotuner (kiln/tune.hpp) on the CPU backend: a search that verifies before it
// times, a database that replays, a fingerprint change that is reported and re-tuned.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"
#include "kiln/error.hpp"
#include "kiln/tune.hpp"

#include "../temp_dir.hpp"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

tune::Problem gemmProblem(int64_t M, int64_t N, int64_t K) {
  catalogue::Problem p = catalogue::find("gemm").problem({M, N, K}, DType::f32, 11);
  return {p.args, p.output, p.reference, p.flops};
}

Kernel gemmFor(const tune::Config& c) {
  return catalogue::gemm(DType::f32, {c.get("m", 32), c.get("n", 32), c.get("k", 16), 1});
}

tune::Space smallSpace() { return tune::Space::product({{"m", {16, 32}}, {"n", {16, 32}}, {"k", {16}}}); }

std::string tempPath(const char* stem) {
  static std::mt19937_64 rng{std::random_device{}()};
  return std::string(stem) + "-" + std::to_string(::getpid()) + "-" + std::to_string(rng()) + ".json";
}

RuntimeOptions noDisk() { return {.cache_dir = "off"}; }

} // namespace

TEST_CASE("a generated space is the product of its axes minus what the constraint rejects", "[tune]") {
  tune::Space s = tune::Space::product({{"m", {64, 128}}, {"n", {64, 128}}, {"stages", {2, 3}}},
                                       [](const tune::Config& c, std::string* why) {
                                         if (c.get("m", 0) * c.get("n", 0) * c.get("stages", 0) > 128 * 128 * 2) {
                                           *why = "too much shared memory";
                                           return false;
                                         }
                                         return true;
                                       });
  CHECK(s.configs.size() + s.rejected.size() == 8);
  CHECK(s.rejected.size() == 1);
  CHECK(s.rejected[0].first.str() == "m=128 n=128 stages=3");
  CHECK(tune::Config{}.str() == "defaults"); // no parameter: the kernel and options as given
  CHECK(s.rejected[0].second == "too much shared memory");
}

TEST_CASE("tune compiles, verifies and times every candidate and picks the fastest", "[tune]") {
  tune::Result r = tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(96, 80, 48),
                              {.reps = 5, .warmup = 1, .threads = 2});
  REQUIRE(r.candidates.size() == 4);
  for (const auto& c : r.candidates) {
    INFO(c.config.str() << ": " << c.error);
    CHECK(c.compiled);
    CHECK(c.verified);
    REQUIRE(c.time.has_value());
    CHECK(c.time->reps == 5);
    CHECK(r.best_time.median <= c.time->median);
  }
  REQUIRE(r.runner_up.has_value());
  CHECK_FALSE(*r.runner_up == r.best);
  CHECK(r.runner_up_time->median >= r.best_time.median);
  CHECK(r.signature == "gemm f32");
  CHECK(r.shape_class == "96x48,48x80,96x80"); // every argument: K counts
  CHECK(r.compile_ms > 0);
  CHECK(r.timing_ms > 0);
  CHECK_FALSE(r.replayed);
}

TEST_CASE("tune reports each candidate compiled, then each verified, then each round of timing, through its progress callback",
          "[tune]") {
  std::vector<std::string> steps; // "phase done/total", in the order reported
  tune::Options o{.reps = 2, .threads = 2};
  o.progress = [&](const std::string& phase, int done, int total) {
    steps.push_back(phase + " " + std::to_string(done) + "/" + std::to_string(total));
    if (done == 2) throw std::runtime_error("a progress display that fails"); // ignored
  };
  tune::Result r = tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(32, 32, 32), o);
  CHECK(r.candidates.size() == 4);
  CHECK(steps == std::vector<std::string>{"compiling 1/4", "compiling 2/4", "compiling 3/4", "compiling 4/4",
                                          "verifying 1/4", "verifying 2/4", "verifying 3/4", "verifying 4/4",
                                          "timing 1/2", "timing 2/2"}); // reps 2: two rounds of one launch each
}

TEST_CASE("a fast wrong candidate never wins", "[tune]") {
  // Config broken=1 is a "gemm" that only zero-fills C: much faster, and wrong.
  auto make = [](const tune::Config& c) -> Kernel {
    if (c.get("broken", 0) == 0) return gemmFor(c);
    using namespace kiln::dsl;
    return kernel("gemm", [](Builder& k) {
      auto [M, N, K] = k.dims("M", "N", "K");
      k.input("A", {M, K}, f32);
      k.input("B", {K, N}, f32);
      auto C = k.output("C", {M, N}, f32);
      k.grid({cdiv(M, 16), cdiv(N, 16)}, [&](Index i, Index j) { k.store(C.tile({i, j}, {16, 16}), k.zeros({16, 16})); });
    });
  };
  tune::Space s = tune::Space::list({tune::Config{{{"m", 32}, {"n", 32}, {"k", 16}, {"broken", 0}}},
                                     tune::Config{{{"m", 32}, {"n", 32}, {"k", 16}, {"broken", 1}}}});
  tune::Result r = tune::tune(Backend::cpu, noDisk(), s, make, gemmProblem(64, 64, 64), {.reps = 3});
  CHECK(r.best.get("broken", -1) == 0);
  CHECK_FALSE(r.candidates[1].verified);
  CHECK_THAT(r.candidates[1].error, Contains("wrong result"));
  CHECK_FALSE(r.candidates[1].time.has_value());
  CHECK_FALSE(r.runner_up.has_value());
}

TEST_CASE("a candidate that does not compile is listed with its reason", "[tune][errors]") {
  auto make = [](const tune::Config& c) -> Kernel {
    if (c.get("m", 0) == 16) throw Error(ErrorKind::CompileFailed, "pretend ptxas ran out of registers");
    return gemmFor(c);
  };
  tune::Result r = tune::tune(Backend::cpu, noDisk(), smallSpace(), make, gemmProblem(40, 40, 40),
                              {.reps = 2});
  int failed = 0;
  for (const auto& c : r.candidates)
    if (!c.compiled) {
      ++failed;
      CHECK_THAT(c.error, Contains("does not compile") && Contains("out of registers"));
    }
  CHECK(failed == 2);
  CHECK(r.best.get("m", 0) == 32);
  // When nothing verifies, the error lists every candidate's reason.
  auto never = [](const tune::Config&) -> Kernel { throw Error(ErrorKind::CompileFailed, "nope"); };
  CHECK_THROWS_WITH(tune::tune(Backend::cpu, noDisk(), smallSpace(), never, gemmProblem(8, 8, 8), {}),
                    Contains("no candidate of") && Contains("m=16 n=16"));
  CHECK_THROWS_WITH(tune::tune(Backend::cpu, noDisk(), tune::Space{}, gemmFor, gemmProblem(8, 8, 8), {}),
                    Contains("search space is empty"));
}

TEST_CASE("the database records the search and replays the choice", "[tune]") {
  const std::string db = tempPath("kiln-tune-db");
  tune::Options o{.reps = 4, .warmup = 1, .database = db};
  tune::Result first = tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(64, 64, 32), o);
  CHECK_FALSE(first.replayed);
  nlohmann::json j = nlohmann::json::parse(tune::read_database(db));
  REQUIRE(j["entries"].size() == 1);
  const auto& e = j["entries"][0];
  CHECK(e["signature"] == "gemm f32");
  CHECK(e["shape_class"] == "64x32,32x64,64x64");
  CHECK(e["fingerprint"]["backend"] == "cpu");
  CHECK(!e["fingerprint"]["kiln"].get<std::string>().empty());
  CHECK(!e["fingerprint"]["llvm"].get<std::string>().empty());
  CHECK(e["candidates"] == 4);
  CHECK(e["reps"] == 4);
  CHECK(e["chosen"]["time"]["median_ms"].get<double>() > 0);
  CHECK(e["runner_up"]["config"].is_object());
  CHECK(e["search_cost"]["compile_ms"].get<double>() > 0);

  tune::Result again = tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(64, 64, 32), o);
  CHECK(again.replayed);
  CHECK(again.best == first.best);
  CHECK(again.candidates.size() == 1); // only the chosen config was compiled
  CHECK_THAT(again.note, Contains("replayed"));

  // Another shape class is a separate entry.
  tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(32, 32, 32), o);
  CHECK(nlohmann::json::parse(tune::read_database(db))["entries"].size() == 2);
  std::remove(db.c_str());
}

TEST_CASE("a changed fingerprint is reported and tuned again, never reused silently", "[tune]") {
  const std::string db = tempPath("kiln-tune-db");
  tune::Options o{.reps = 3, .database = db};
  tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(48, 48, 48), o);
  nlohmann::json j = nlohmann::json::parse(tune::read_database(db));
  j["entries"][0]["fingerprint"]["driver"] = "12.4";
  j["entries"][0]["fingerprint"]["kiln"] = "0.0.9+oldbuild";
  std::ofstream(db) << j.dump();
  tune::Result r = tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(48, 48, 48), o);
  CHECK_FALSE(r.replayed);
  CHECK_THAT(r.note, Contains("stale") && Contains("driver") && Contains("kiln") && Contains("0.0.9+oldbuild"));
  CHECK(r.candidates.size() == 4);
  nlohmann::json after = nlohmann::json::parse(tune::read_database(db));
  REQUIRE(after["entries"].size() == 1); // this machine's entry, replaced
  CHECK(after["entries"][0]["fingerprint"]["kiln"] != "0.0.9+oldbuild");
  std::remove(db.c_str());
}

TEST_CASE("one database keeps an entry per device", "[tune]") {
  const std::string db = tempPath("kiln-tune-db");
  tune::Options o{.reps = 3, .database = db};
  tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(40, 40, 40), o);
  nlohmann::json j = nlohmann::json::parse(tune::read_database(db));
  j["entries"][0]["fingerprint"]["device"] = "another machine";
  std::ofstream(db) << j.dump();
  tune::Result r = tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(40, 40, 40), o);
  CHECK_FALSE(r.replayed);
  CHECK_THAT(r.note, Contains("no entry for") && Contains("another machine"));
  CHECK(nlohmann::json::parse(tune::read_database(db))["entries"].size() == 2); // both kept
  CHECK(tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(40, 40, 40), o).replayed);
  std::remove(db.c_str());
}

TEST_CASE("a saved choice that no longer compiles is searched again, not thrown", "[tune]") {
  const std::string db = tempPath("kiln-tune-db");
  tune::Options o{.reps = 2, .database = db};
  tune::Result first = tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(32, 32, 32), o);
  auto refuseBest = [&](const tune::Config& c) -> Kernel {
    if (c == first.best) throw Error(ErrorKind::CompileFailed, "this config broke");
    return gemmFor(c);
  };
  tune::Result r = tune::tune(Backend::cpu, noDisk(), smallSpace(), refuseBest, gemmProblem(32, 32, 32), o);
  CHECK_FALSE(r.replayed);
  CHECK_THAT(r.note, Contains("fails now") && Contains("this config broke"));
  CHECK_FALSE(r.best == first.best);
  std::remove(db.c_str());
}

TEST_CASE("a database that is not one is refused and left alone", "[tune][errors]") {
  const std::string db = tempPath("kiln-tune-db");
  std::ofstream(db) << R"({"entries": [{"signature": 3}]})";
  CHECK_THROWS_WITH(tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(8, 8, 8),
                               {.database = db}),
                    Contains("an entry lacks"));
  std::ofstream(db) << "{ this is somebody's notes";
  CHECK_THROWS_WITH(tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(8, 8, 8),
                               {.database = db}),
                    Contains("is not a kiln tuning database") && Contains(db));
  std::ifstream in(db);
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == "{ this is somebody's notes");
  std::remove(db.c_str());
}

TEST_CASE("a config's warps and hopper_* parameters select runtime options; its tile sizes do not", "[tune]") {
  RuntimeOptions base;
  base.cache_dir = "off";
  base.num_warps = 4;
  tune::Config c{{{"m", 128}, {"n", 64}, {"warps", 8}, {"hopper_gemm", 0}, {"hopper_tile_n", 256}, {"hopper_tile_m", 128}, {"hopper_stages", 3}, {"hopper_cluster", 2}, {"hopper_cluster_m", 1}, {"hopper_raster", 16}, {"hopper_split_k", 4}}};
  RuntimeOptions o = tune::options_for(base, c);
  CHECK(o.hopper_split_k == 4);
  CHECK(o.num_warps == 8);
  CHECK_FALSE(o.hopper_gemm);
  CHECK(o.hopper_tile_n == 256);
  CHECK(o.hopper_tile_m == 128);
  CHECK(o.hopper_stages == 3);
  CHECK(o.hopper_cluster == 2);
  CHECK(o.hopper_cluster_m);
  CHECK(o.hopper_raster == 16);
  CHECK(o.cache_dir == "off"); // the rest of the base is kept
  RuntimeOptions same = tune::options_for(base, tune::Config{{{"m", 64}}});
  CHECK(same.num_warps == 4);
  CHECK(same.hopper_gemm);
  CHECK(same.hopper_tile_n == 0);
  CHECK(same.hopper_tile_m == 0);
  CHECK(same.hopper_stages == 0);
  CHECK(same.hopper_raster == 0);
  CHECK(same.hopper_split_k == 0);
  CHECK_FALSE(same.hopper_cluster_m);
}

TEST_CASE("a database with another format, a chosen config of non-integers or a mistyped fingerprint is refused as a kiln::Error",
          "[tune][errors]") {
  const std::string db = tempPath("kiln-tune-db");
  tune::Options o{.reps = 2, .database = db};
  tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(24, 24, 24), o);
  const nlohmann::json good = nlohmann::json::parse(tune::read_database(db));
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"a string", [](nlohmann::json& j) { j["entries"][0]["chosen"]["config"]["m"] = "16"; }, "\"16\", not an integer"},
           {"a fraction", [](nlohmann::json& j) { j["entries"][0]["chosen"]["config"]["m"] = 16.5; }, "16.5, not an integer"},
           {"past int64", [](nlohmann::json& j) { j["entries"][0]["chosen"]["config"]["m"] = uint64_t(1) << 63; },
            "9223372036854775808, not an integer"},
           {"a fingerprint field of another type", [](nlohmann::json& j) { j["entries"][0]["fingerprint"]["backend"] = 3; },
            "fingerprint.backend is 3, not a string"},
           {"a negative SM count", [](nlohmann::json& j) { j["entries"][0]["fingerprint"]["sm_count"] = -1; },
            "fingerprint.sm_count is -1, not a count"},
           {"a format from elsewhere", [](nlohmann::json& j) { j["format"] = 99; }, "format 99"}}) {
    INFO(c.what);
    nlohmann::json j = good;
    c.edit(j);
    std::ofstream(db) << j.dump();
    try {
      tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(24, 24, 24), o);
      FAIL("accepted");
    } catch (const Error& e) { // a kiln::Error, never the JSON library's own exception
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      CHECK_THAT(e.what(), Contains(c.says) && Contains(db));
    }
  }
  std::remove(db.c_str());
}

TEST_CASE("a saved choice outside the search's space is not replayed", "[tune]") {
  const std::string db = tempPath("kiln-tune-db");
  tune::Options o{.reps = 2, .database = db};
  tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(24, 24, 24), o);
  nlohmann::json j = nlohmann::json::parse(tune::read_database(db));
  // Edited to a tile no search here proposes (this one would need terabytes).
  j["entries"][0]["chosen"]["config"] = {{"m", int64_t(1) << 40}, {"n", 16}, {"k", 16}};
  std::ofstream(db) << j.dump();
  tune::Result r = tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(24, 24, 24), o);
  CHECK_FALSE(r.replayed);
  CHECK_THAT(r.note, Contains("m=1099511627776") && Contains("not one of this search's configs"));
  CHECK(r.candidates.size() == smallSpace().configs.size());
  CHECK(r.best.get("m", 0) <= 32);
  // An emptied config ({}: the defaults) is not in this space either.
  j["entries"][0]["chosen"]["config"] = nlohmann::json::object();
  std::ofstream(db) << j.dump();
  CHECK_FALSE(tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(24, 24, 24), o).replayed);
  std::remove(db.c_str());
}

TEST_CASE("a database that cannot be read or written fails before the search", "[tune][errors]") {
  auto tuneWith = [](const std::string& db, int warmup = 1) {
    return tune::tune(Backend::cpu, noDisk(), smallSpace(), gemmFor, gemmProblem(8, 8, 8),
                      {.warmup = warmup, .database = db});
  };
  CHECK_THROWS_WITH(tuneWith("/nonexistent-kiln-dir/db.json"), Contains("cannot write in '/nonexistent-kiln-dir'"));
  kiln::testing::TempDir dir("kiln-tune");
  CHECK_THROWS_WITH(tuneWith(dir.str()), Contains("is a directory"));
  CHECK_THROWS_WITH(tuneWith("", -3), Contains("warmup >= 0") && Contains("warmup -3"));
}
