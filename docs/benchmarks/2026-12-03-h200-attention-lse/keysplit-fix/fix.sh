#!/usr/bin/env bash
# A/B of the key-split gain threshold (base: splits prefill too) + SDPA prefill + tests.
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT
SHAPES="attention:4x32x32x4096x128 attention_causal:4x32x32x4096x128 attention:4x32x32x4096x64 attention_causal:4x32x32x4096x64 attention_decode:1x32x32x1x32768x128 attention_decode:1x32x8x1x32768x128" \
  ROUNDS=2 REPS=10 TT=200 TESTS="gpu: attention's log-sum-exp*,gpu: attention over a K/V cache splits*,gpu: the sm_90a attention twin*" bash .device/ab.sh
python3 -W ignore .device/sdpa2.py 4x32x32x4096x128 c:4x32x32x4096x128 4x32x32x4096x64 c:4x32x32x4096x64 2>&1 | grep -v FLASH | tee /tmp/ab/sdpa-prefill.log
tar -C /tmp/ab -czf $OUT/ab.tar.gz .
