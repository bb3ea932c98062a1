// Runtime::compile through the kernel cache (include/kiln/cache.hpp): memory, then disk,
// else compile and write. The backend supplies what besides the tile IR decides the code
// (cacheKeyInputs) and how to load an entry back (loadCached).
#include <elf.h>
#include <link.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "kiln/cache.hpp"
#include "kiln/error.hpp"
#include "Runtime/Log.h"
#include "Runtime/Nvtx.h"
#include "Runtime/JsonInt.h"
#include "Runtime/RuntimeImpl.h"
#include "llvm/Config/llvm-config.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace kiln::detail {

namespace {

using Clock = std::chrono::steady_clock;

nlohmann::json toJson(const KernelReport& r) {
  return {{"target", r.target}, {"compiler", r.compiler}, {"registers", r.registers}, {"spill_bytes", r.spill_bytes},
          {"shared_bytes", r.shared_bytes}, {"threads", r.threads}, {"grid", r.grid}, {"sm90", r.sm90}, {"ptxas_notes", r.ptxas_notes}};
}
KernelReport reportFrom(const nlohmann::json& j) {
  KernelReport r;
  r.target = j.value("target", std::string());
  r.compiler = j.value("compiler", std::string());
  r.registers = jsonIntOr<int>(j, "registers", -1);
  r.spill_bytes = jsonIntOr<int>(j, "spill_bytes", -1);
  r.shared_bytes = jsonIntOr<int64_t>(j, "shared_bytes", 0);
  r.threads = jsonIntOr<int>(j, "threads", 1);
  r.grid = j.value("grid", std::string());
  r.sm90 = j.value("sm90", std::string());
  r.ptxas_notes = j.value("ptxas_notes", std::string());
  return r;
}
nlohmann::json toJson(const CompileTimes& t) {
  return {{"tile_passes_ms", t.tile_passes_ms}, {"lowering_ms", t.lowering_ms}, {"codegen_ms", t.codegen_ms},
          {"assemble_ms", t.assemble_ms}, {"load_ms", t.load_ms}};
}
CompileTimes timesFrom(const nlohmann::json& j) {
  CompileTimes t;
  t.tile_passes_ms = j.value("tile_passes_ms", 0.0);
  t.lowering_ms = j.value("lowering_ms", 0.0);
  t.codegen_ms = j.value("codegen_ms", 0.0);
  t.assemble_ms = j.value("assemble_ms", 0.0);
  t.load_ms = j.value("load_ms", 0.0);
  return t;
}

} // namespace

// libkiln.so's GNU build ID (the linker hashes the library's contents: -Wl,--build-id):
// any change to kiln's code changes it, so cached code and tuning choices made by another
// build of kiln are never taken for this one's. Read once from our own ELF notes.
std::string buildId() {
  struct Search {
    const void* self;
    std::string id;
  } search{reinterpret_cast<const void*>(&buildId), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        const auto addr = reinterpret_cast<ElfW(Addr)>(s->self);
        bool mine = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && addr >= info->dlpi_addr + ph.p_vaddr &&
              addr < info->dlpi_addr + ph.p_vaddr + ph.p_memsz)
            mine = true;
        }
        if (!mine) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const char* name = p + sizeof(ElfW(Nhdr));
            const char* desc = name + ((n->n_namesz + 3) & ~3u);
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
              static const char* hex = "0123456789abcdef";
              for (unsigned j = 0; j < n->n_descsz; ++j) {
                s->id += hex[uint8_t(desc[j]) >> 4];
                s->id += hex[uint8_t(desc[j]) & 15];
              }
              return 1;
            }
            p = desc + ((n->n_descsz + 3) & ~3u);
          }
        }
        return 1;
      },
      &search);
  return search.id;
}

std::string kilnVersion() {
  static const std::string v = [] {
    std::string id = buildId();
    return std::string(KILN_VERSION) + (id.empty() ? std::string("+unknown-build") : "+" + id.substr(0, 16));
  }();
  return v;
}
std::string llvmVersion() { return LLVM_VERSION_STRING; }

void configureCache(RuntimeImpl& rt, const RuntimeOptions& options) {
  rt.memoryCacheOn = options.memory_cache;
  std::string dir = options.cache_dir;
  if (dir.empty()) dir = cache::default_dir();
  if (dir == "off" || dir.empty()) return;
  const char* ro = std::getenv("KILN_CACHE_READ_ONLY");
  const bool readOnly = options.cache_read_only || (ro && std::string(ro) == "1") || isReadOnlyDir(dir);
  rt.disk = std::make_unique<DiskCache>(dir, options.cache_max_bytes, readOnly);
}

// A compiled kernel from a cache record (disk or memory): the backend loads the payload;
// report, times and signature come from the header.
std::shared_ptr<CompiledImpl> fromRecord(RuntimeImpl& rt, const Kernel& kernel, const CacheRecord& rec) {
  const nlohmann::json meta = rec.header.value("meta", nlohmann::json::object());
  std::shared_ptr<CompiledImpl> impl = rt.loadCached(kernel.signature(), rec.payload, meta);
  impl->sig = kernel.signature();
  impl->backend = rt.backend;
  impl->report = reportFrom(rec.header.value("report", nlohmann::json::object()));
  impl->times = timesFrom(rec.header.value("times", nlohmann::json::object()));
  impl->binary = rec.payload;
  impl->cacheMeta = meta;
  return impl;
}

namespace {
/// What a cache entry's key hashes, as the entry's header records it (`kiln cache ls`).
nlohmann::json keyInputsOf(const RuntimeImpl& rt, const std::string& irDigest) {
  nlohmann::json inputs = rt.keyInputs;
  inputs["tile_ir_sha256"] = irDigest;
  return inputs;
}
} // namespace

CompiledKernel compileCached(RuntimeImpl& rt, const Kernel& kernel) {
  auto t0 = Clock::now();
  NvtxRange range("compile", kernel.name()); // the backend's phases nest inside
  std::call_once(rt.keyInputsOnce, [&rt] {
    nlohmann::json inputs = rt.cacheKeyInputs();
    if (inputs.is_null()) return;
    inputs["kiln"] = kilnVersion(); // includes the build ID: another build of kiln, another key
    inputs["llvm"] = LLVM_VERSION_STRING;
    inputs["cache_format"] = 1;
    rt.keyInputsDigest = sha256Hex(inputs.dump());
    rt.keyInputs = std::move(inputs);
  });
  if (rt.keyInputs.is_null() || (!rt.memoryCacheOn && !rt.disk)) { // nothing to look up
    auto impl = rt.compile(kernel);
    std::lock_guard<std::mutex> lock(rt.cacheMu);
    ++rt.cacheStats.compiles;
    return CompiledKernel(std::shared_ptr<CompiledImpl>(std::move(impl)), CacheInfo{});
  }
  // The key: the runtime's inputs and the IR's digest, each made once (a memory hit then
  // costs one short hash and a map lookup).
  const std::string& irDigest = tileIrDigest(kernel);
  CacheInfo info;
  info.key = sha256Hex(rt.keyInputsDigest + irDigest);

  if (rt.memoryCacheOn) {
    RuntimeImpl::MemoryEntry entry;
    {
      std::lock_guard<std::mutex> lock(rt.cacheMu);
      auto it = rt.memoryCache.find(info.key);
      if (it != rt.memoryCache.end()) entry = it->second;
    }
    std::shared_ptr<CompiledImpl> impl = entry.live.lock();
    if (!impl && entry.record) { // no longer alive: load the bytes kept in memory
      auto l0 = Clock::now();
      try {
        impl = fromRecord(rt, kernel, *entry.record);
      } catch (const std::exception&) { // cannot load them here after all: look further
        impl.reset();
      }
      info.load_ms = msSince(l0);
    }
    if (impl) {
      std::lock_guard<std::mutex> lock(rt.cacheMu);
      ++rt.cacheStats.memory_hits;
      rt.memoryCache[info.key].live = impl;
      info.outcome = CacheOutcome::memory;
      info.lookup_ms = msSince(t0) - info.load_ms;
      return CompiledKernel(impl, info);
    }
  }

  std::shared_ptr<CompiledImpl> impl;
  std::shared_ptr<const CacheRecord> record;
  if (rt.disk) {
    std::string problem;
    std::optional<CacheRecord> rec = rt.disk->read(info.key, &problem);
    info.lookup_ms = msSince(t0);
    if (rec) {
      auto l0 = Clock::now();
      try {
        impl = fromRecord(rt, kernel, *rec);
        info.outcome = CacheOutcome::disk;
        info.load_ms = msSince(l0);
        record = std::make_shared<const CacheRecord>(std::move(*rec));
      } catch (const Error& e) { // a valid file the loader still refuses: treat as corrupt
        problem = std::string("the entry does not load: ") + e.what();
        detail::logWarn("cache: " + rt.disk->pathOf(info.key) + ": " + problem + rt.disk->unusableEntry());
        impl.reset();
      } catch (const nlohmann::json::exception& e) {
        problem = std::string("the entry's metadata is malformed: ") + e.what();
        detail::logWarn("cache: " + rt.disk->pathOf(info.key) + ": " + problem + rt.disk->unusableEntry());
        impl.reset();
      }
    }
    if (!problem.empty()) {
      info.note = (rt.disk->readOnly() ? "corrupt entry (the read-only cache keeps it): " : "corrupt entry replaced: ") + problem;
      std::lock_guard<std::mutex> lock(rt.cacheMu);
      ++rt.cacheStats.corrupt_entries;
    }
  }

  if (!impl) {
    impl = rt.compile(kernel); // throws on a compile error: nothing is cached
    info.outcome = CacheOutcome::miss;
    {
      std::lock_guard<std::mutex> lock(rt.cacheMu);
      ++rt.cacheStats.compiles;
    }
    nlohmann::json header = {{"format", 1},
                             {"kernel", kernel.name()},
                             {"backend", to_string(rt.backend)},
                             {"target", impl->report.target},
                             {"key_inputs", keyInputsOf(rt, irDigest)},
                             {"report", toJson(impl->report)},
                             {"times", toJson(impl->times)},
                             {"meta", impl->cacheMeta},
                             {"created_unix", int64_t(std::time(nullptr))}};
    if (!impl->binary.empty()) record = std::make_shared<const CacheRecord>(CacheRecord{header, impl->binary});
    if (rt.disk && rt.disk->readOnly()) { // by design: neither a failure nor worth a warning
      const std::string note = "not written to the disk cache: " + rt.disk->dir() + " is read-only";
      info.note = info.note.empty() ? note : info.note + "; " + note;
      detail::logDebug("cache: " + kernel.name() + ": " + note);
    } else if (rt.disk && record) {
      auto w0 = Clock::now();
      std::string error;
      bool ok = rt.disk->write(info.key, header, impl->binary, &error);
      int64_t evicted = ok ? rt.disk->evict(info.key) : 0;
      info.write_ms = msSince(w0);
      std::lock_guard<std::mutex> lock(rt.cacheMu);
      if (ok) {
        ++rt.cacheStats.disk_writes;
        rt.cacheStats.evictions += evicted;
      } else {
        ++rt.cacheStats.write_failures;
        info.note = "not written to the disk cache: " + error;
        detail::logWarn("cache: " + error + " (the kernel works; it is just not cached)");
      }
    } else if (rt.disk) { // the backend kept no code to cache (every backend keeps some today)
      std::lock_guard<std::mutex> lock(rt.cacheMu);
      ++rt.cacheStats.write_failures;
      info.note = "not written to the disk cache: the backend kept no compiled code for it";
    }
  } else {
    std::lock_guard<std::mutex> lock(rt.cacheMu);
    ++rt.cacheStats.disk_hits;
  }
  if (rt.memoryCacheOn) {
    std::lock_guard<std::mutex> lock(rt.cacheMu);
    rt.memoryCache[info.key] = {impl, record};
  }
  return CompiledKernel(std::move(impl), info);
}

} // namespace kiln::detail
