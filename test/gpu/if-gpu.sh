#!/usr/bin/env bash
# if-gpu.sh CMD...: runs CMD where an NVIDIA GPU and driver are present; elsewhere says why
# and exits 77, which ctest reports as skipped (never as passed).
if ! ls /dev/nvidia0 >/dev/null 2>&1 || ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  echo "SKIPPED: no NVIDIA GPU and driver on this machine (/dev/nvidia0, libcuda.so.1)"
  exit 77
fi
exec "$@"
