#pragma once
// Only symbols marked KILN_API leave libkiln.so; everything else (and all of the
// statically linked LLVM/MLIR) stays hidden so an engine never sees symbol clashes.
#if defined(KILN_BUILDING_LIBRARY)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif
