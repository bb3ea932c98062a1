// Fault injection without a seam in the library: preloaded (LD_PRELOAD) into a test, this
// makes dlopen of any path containing $KILN_TEST_FAIL_DLOPEN fail as if the library were
// not installed, while every other dlopen goes to the C library's.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

void* dlopen(const char* file, int mode) {
  static void* (*real)(const char*, int);
  if (!real) real = (void* (*)(const char*, int))dlsym(RTLD_NEXT, "dlopen");
  const char* fail = getenv("KILN_TEST_FAIL_DLOPEN");
  if (file && fail && *fail && strstr(file, fail)) return NULL;
  return real(file, mode);
}
