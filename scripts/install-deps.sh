#!/usr/bin/env bash
# Installs what kiln needs to build on Debian 12, skipping what is already there.
# Idempotent: a second run installs nothing and asks no registry.
set -euo pipefail

PACKAGES=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22 libclang-rt-22-dev
  libeigen3-dev catch2 nlohmann-json3-dev libcli11-dev libspdlog-dev
  cmake ninja-build ccache zlib1g-dev libzstd-dev libxml2-dev python3
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
