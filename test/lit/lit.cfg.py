# -*- Python -*-
# lit configuration for kiln's FileCheck tests (tile dialect round trips, verifier
# diagnostics, passes). CMake configures lit.site.cfg.py (from lit.site.cfg.py.in) in the
# build tree with the tool directories, then loads this file; `ctest -R lit` or
# `cmake --build build --target check-kiln-lit` runs it.
#
# Run straight from the source tree (`lit -sv test/lit`), this file falls back to
# <repo>/build/bin for kiln-opt (or `--param kiln_tools_dir=DIR`) and to
# /usr/lib/llvm-22/bin for FileCheck (or `--param llvm_tools_dir=DIR`).

import os

import lit.formats

config.name = "kiln"
# True: lit's internal shell, so RUN lines behave the same everywhere.
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

config.test_source_root = os.path.dirname(__file__)

if not hasattr(config, "kiln_tools_dir"):
    # No site config: running lit on the source tree directly.
    repo = os.path.dirname(os.path.dirname(config.test_source_root))
    config.kiln_tools_dir = lit_config.params.get(
        "kiln_tools_dir", os.path.join(repo, "build", "bin"))
    config.llvm_tools_dir = lit_config.params.get("llvm_tools_dir", "/usr/lib/llvm-22/bin")
    config.test_exec_root = os.path.join(repo, "build", "test", "lit")
else:
    config.test_exec_root = config.kiln_lit_obj_dir

for tool, where in (("kiln-opt", config.kiln_tools_dir),
                    ("FileCheck", config.llvm_tools_dir)):
    if not os.path.isfile(os.path.join(where, tool)):
        lit_config.fatal("%s not found in %s: build it first "
                         "(cmake --build build --target kiln-opt)" % (tool, where))

# kiln-opt, FileCheck and not are found through PATH, kiln's tools first.
config.environment["PATH"] = os.pathsep.join(
    [config.kiln_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
