#!/usr/bin/env bash
# Runs on the GPU machine (device tool, `.device` carried): unpacks what
# scripts/package-device.sh built, runs the GPU suites and the CLI checks, and writes
# logs under $OUT. Builds nothing. Prints a short table last.
set -u
cd "$(dirname "$0")/.."
# The device tool brings back at most 8 files: everything is written under $RES and packed
# into $OUT/results.tar.gz at the end.
OUT=${OUT:-/tmp/kiln-out}
RES=/tmp/kiln-results
# A machine may be handed out again with an earlier call's /tmp: start from an empty $RES so
# nothing stale comes back with this call's results.
rm -rf "$RES"
mkdir -p "$OUT" "$RES" /tmp/kiln
tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln
export LD_LIBRARY_PATH=/tmp/kiln/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# cuDNN (the attention's framework route and GPU reference) is not in the CUDA toolkit; the
# device's PyTorch wheel carries one. Named unless the caller named another.
if [ -z "${KILN_CUDNN_LIBRARY:-}" ]; then
  CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
  [ -f "$CUDNN_DIR/libcudnn.so.9" ] && export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9 LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$CUDNN_DIR
fi
K=/tmp/kiln/bin
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > "$RES/device.txt" 2>&1

declare -A result
# Packs what is there so far: after every step, so a call cut short by its time limit still
# brings back the steps that finished.
pack() { tar -C "$RES" -czf "$OUT/results.tar.gz.part" . && mv "$OUT/results.tar.gz.part" "$OUT/results.tar.gz"; }
run() { # name, log, command...
  local name=$1 log=$2; shift 2
  local t0=$(date +%s%N)
  "$@" > "$RES/$log" 2>&1; local rc=$?
  result[$name]="rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  tail -n 4 "$RES/$log"
  pack
}
# Steps (arguments; default: all): hopper (the sm_90a GEMM twin per width vs cuBLASLt; not
# in the default set), profile (ncu of the twin and of cuBLASLt's kernel; not in the default
# set), tunetwin (kiln tune over the twin's configs vs the untuned default; not in the
# default set), bench (issue 4: kiln bench + kiln-mlp), suite (GPU
# tests), gemm (kiln-bench-gemm + CLI runs), cache (issue 5: cold/warm compiles), tune
# (issue 5: kiln tune 4096^3 and its replay), sanitize (compute-sanitizer; not in the
# default set), ab (two builds' kiln bench, alternating; not in the default set), cases (each GPU test case in its own process, plain or under
# compute-sanitizer; not in the default set), tunedbench (kiln bench --tuned: the price of
# tuning per shape; not in the default set), mlptuned (kiln-mlp --tuned; not in the default set),
# floor (kiln-bench-hbm: the weight read alone beside cuBLASLt; not in the default set),
# timeline (ncu PM-sampling timelines of the twin and of cuBLASLt's kernel; not in the default set),
# host (kiln-bench-host: create, memory hit and launch costs on the host; not in the default set),
# warm (a cache made by `kiln warm` here, loaded there read-only: disk hits; not in the default set),
# decide (verdicts at 1.10x: kiln bench, kiln-mlp, example-decide; not in the default set).
STEPS=${*:-bench suite gemm cache tune}
want() { [[ " $STEPS " == *" $1 "* ]]; }
run_cases() {
  # Every test case of the GPU suite in a process of its own, CASE_JOBS at a time, under each
  # of CASE_TOOLS ("none": plain; else a compute-sanitizer tool), each case under
  # CASE_TIMEOUT seconds: a slow tool (racecheck) covers the suite over several calls, and
  # one case that runs out of time costs only itself. The twin's ragged-shape test runs one
  # section (kernel, dtype) per process. The [faults] tests exhaust device memory, so they
  # run alone after the others; the [sticky] one breaks its context and is the suite step's.
  # CASE_FILTER: a Catch2 spec picking the cases (default: all of them). A spec reads "," as
  # "or": name a case with commas by a wildcard or its tag. One that picks none fails the step.
  # CASE_BUDGET: seconds for the whole step (default 540), so it ends inside one call.
  # Logs: cases-<tool>/<n>.log and cases-<tool>.tsv (n, rc, seconds, summary, case).
  export CASE_DEADLINE=$(($(date +%s) + ${CASE_BUDGET:-540}))
  export CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  $K/kiln-gpu-tests --list-test-names-only ${CASE_FILTER:+"$CASE_FILTER"} | grep -v "^GPU suite on" | sed '/^$/d' > "$RES/cases-all.txt"
  if [ ! -s "$RES/cases-all.txt" ]; then
    echo "CASE_FILTER '${CASE_FILTER:-}' picks no test case"
    result[cases]="FAILED: CASE_FILTER picks no test case"
  fi
  $K/kiln-gpu-tests --list-test-names-only "[faults]" | grep -v "^GPU suite on" | sed '/^$/d' > "$RES/cases-alone.txt"
  twin="gpu: the sm_90a TMA + wgmma twin is right on ragged shapes, beside the portable kernel"
  : > "$RES/cases-jobs.txt"; : > "$RES/cases-alone-jobs.txt"; n=0
  while IFS= read -r c; do
    if [ "$c" = "$twin" ]; then
      for k in gemm gemm_bias_relu gemm_bias_gelu gemm_bias_residual; do
        for d in bf16 f16; do n=$((n + 1)); printf '%s\t%s\t%s\n' $n "$c" "$k $d" >> "$RES/cases-jobs.txt"; done
      done
    elif grep -qxF "$c" "$RES/cases-alone.txt"; then n=$((n + 1)); printf '%s\t%s\n' $n "$c" >> "$RES/cases-alone-jobs.txt"
    else n=$((n + 1)); printf '%s\t%s\n' $n "$c" >> "$RES/cases-jobs.txt"
    fi
  done < "$RES/cases-all.txt"
  for tool in ${CASE_TOOLS:-none}; do
    mkdir -p "$RES/cases-$tool"
    t0=$(date +%s)
    xargs -d '\n' -P ${CASE_JOBS:-8} -I{} scripts/device-case.sh $tool "$RES/cases-$tool" ${CASE_TIMEOUT:-300} {} \
      < "$RES/cases-jobs.txt" > "$RES/cases-$tool.tsv"
    xargs -d '\n' -I{} scripts/device-case.sh $tool "$RES/cases-$tool" ${CASE_TIMEOUT:-300} {} \
      < "$RES/cases-alone-jobs.txt" >> "$RES/cases-$tool.tsv"
    sort -n -o "$RES/cases-$tool.tsv" "$RES/cases-$tool.tsv"
    result[cases-$tool]="$(awk -F'\t' '$2 == 0' "$RES/cases-$tool.tsv" | wc -l) of $(wc -l < "$RES/cases-$tool.tsv") rc=0, $(($(date +%s) - t0)) s"
    pack
  done
}
export KILN_CACHE_DIR=/tmp/kiln-cache # never the machine's home; emptied where it matters
# ncu, and the kernels it is pointed at: kiln's sm_90a twins, and cuBLASLt's for the same GEMM
# (profile and timeline).
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
KILN_KERNELS="regex:sm90"
CUBLAS_KERNELS="regex:^(sm90_xmma|nvjet|cutlass)"

if want bench; then
  SHAPES="--shape 4096x4096x4096 --shape 4097x4096x4096 --shape 1000x1000x1000 --shape 16x4096x4096 --shape 128x12288x4096"
  run kiln-bench kiln-bench.log $K/kiln bench gemm_bias_relu --backend=cuda --dtype bf16 $SHAPES --reps 30 --warmup 5 \
    --csv "$RES/kiln-bench.csv" --json "$RES/kiln-bench.json" --html "$RES/kiln-bench.html"
  run mlp mlp.log $K/kiln-mlp --csv "$RES/mlp.csv" --json "$RES/mlp.json" --html "$RES/mlp.html"
fi
if want hopper; then
  # The sm_90a GEMM twin: plain and + bias + ReLU, beside cuBLASLt (plain / fused epilogue) in
  # the same process, for each twin width (KILN_HOPPER_TILE_N), and with the twin off.
  # 8192^3 is verified against cuBLASLt (kiln bench does that above 2^33 multiply-adds).
  # HOPPER_VARIANTS: name=ENV[,ENV...] entries (default: both widths and the twin off);
  # HOPPER_KERNELS: which catalogue GEMMs (default: gemm gemm_bias_relu).
  # HOPPER_SHAPES: MxNxK entries in place of the six below; HOPPER_DTYPE: bf16 (default) or f16.
  SHAPES="4096x4096x4096 8192x8192x8192 4097x4096x4096 1000x1000x1000 128x12288x4096 16x4096x4096"
  SHAPES=$(printf -- '--shape %s ' ${HOPPER_SHAPES:-$SHAPES})
  for variant in ${HOPPER_VARIANTS:-128=KILN_HOPPER_TILE_N=128 256=KILN_HOPPER_TILE_N=256 off=KILN_HOPPER_GEMM=off}; do
    n=${variant%%=*}; env=${variant#*=}; env=${env//,/ }
    for k in ${HOPPER_KERNELS:-gemm gemm_bias_relu}; do
      run hopper-$k-$n hopper-$k-$n.log timeout ${HOPPER_TIMEOUT:-150} env $env $K/kiln bench $k --backend=cuda --dtype ${HOPPER_DTYPE:-bf16} $SHAPES \
        --routes kiln,framework --reps 30 --warmup 5 --no-progress \
        --csv "$RES/hopper-$k-$n.csv" --json "$RES/hopper-$k-$n.json" --html "$RES/hopper-$k-$n.html"
    done
  done
fi
if want ab; then
  # A/B of two builds in one process tree: AB_PACKAGES names archives in .device/ (default:
  # kiln-old.tar.xz, made by packing the base commit, and kiln-device.tar.xz), each unpacked
  # apart; AB_ROUNDS rounds (default 2), each running every build in turn, so drift in the
  # GPU's clock falls on both alike. Each run: kiln bench of AB_KERNELS over AB_SHAPES with
  # cuBLASLt beside it (ab-<build>-<kernel>-<round>.csv).
  AB_PACKAGES=${AB_PACKAGES:-kiln-old.tar.xz kiln-device.tar.xz}
  for pkg in $AB_PACKAGES; do
    mkdir -p /tmp/ab/${pkg%%.*} && tar -xJf .device/$pkg -C /tmp/ab/${pkg%%.*}
  done
  SHAPES=$(printf -- '--shape %s ' ${AB_SHAPES:-1000x1000x1000 1024x1024x1024})
  for r in $(seq ${AB_ROUNDS:-2}); do
    for pkg in $AB_PACKAGES; do
      v=${pkg%%.*}
      for k in ${AB_KERNELS:-gemm gemm_bias_relu}; do
        run ab-$v-$k-$r ab-$v-$k-$r.log env LD_LIBRARY_PATH=/tmp/ab/$v/lib:/usr/local/cuda/lib64 timeout 200 \
          /tmp/ab/$v/bin/kiln bench $k --backend=cuda --dtype bf16 $SHAPES --routes kiln,framework --reps ${AB_REPS:-50} \
          --warmup 5 --no-progress --csv "$RES/ab-$v-$k-$r.csv"
      done
    done
  done
fi
if want profile; then
  # ncu (full set, one launch) of kiln's twin and of cuBLASLt's kernel on PROFILE_SHAPES,
  # bf16 PROFILE_KERNEL (default gemm_bias_relu): reports, per-instruction stall samples and
  # raw metrics under $RES, named <kiln|cublas>-<kernel>-<shape>.
  # PROFILE_ENV: variables for kiln's run (e.g. KILN_HOPPER_CLUSTER=2); PROFILE_NCU: more ncu
  # arguments for both (e.g. --clock-control none: at the boost clock, not ncu's base clock).
  pk=${PROFILE_KERNEL:-gemm_bias_relu}
  for s0 in ${PROFILE_SHAPES:-1000x1000x1000 4096x4096x4096}; do
    s=$pk-$s0
    env KILN_CACHE_DIR=off ${PROFILE_ENV:-} timeout 200 $NCU -f ${PROFILE_NCU:-} --kernel-name "$KILN_KERNELS" --launch-count 1 --set full -o "$RES/kiln-$s" \
      $K/kiln run $pk --backend=cuda --shape $s0 --dtype bf16 > "$RES/ncu-kiln-$s.log" 2>&1
    KILN_CACHE_DIR=off timeout 200 $NCU -f ${PROFILE_NCU:-} --kernel-name "$CUBLAS_KERNELS" --launch-skip 2 --launch-count 1 \
      --set full -o "$RES/cublas-$s" $K/kiln bench $pk --backend=cuda --dtype bf16 --routes framework \
      --shape $s0 --reps 3 --warmup 1 --no-progress > "$RES/ncu-cublas-$s.log" 2>&1
    for r in kiln cublas; do
      [ -f "$RES/$r-$s.ncu-rep" ] || { result[profile-$r-$s]="no report"; continue; }
      $NCU --import "$RES/$r-$s.ncu-rep" --page source --csv --print-source sass > "$RES/src-$r-$s.csv" 2>&1
      $NCU --import "$RES/$r-$s.ncu-rep" --page raw --csv > "$RES/raw-$r-$s.csv" 2>&1
      $NCU --import "$RES/$r-$s.ncu-rep" --page details --section SpeedOfLight --section LaunchStats 2>&1 |
        grep -E "^  [a-z_]|Duration|SM Frequency|Compute \(SM\)|Memory Throughput|Registers|Grid Size|Cluster Size" > "$RES/sol-$r-$s.txt"
      result[profile-$r-$s]="$(grep -m1 Duration "$RES/sol-$r-$s.txt" | awk '{print $NF, $(NF-1)}')"
    done
    pack
  done
fi
if want timeline; then
  # Where in a kernel DRAM goes idle: ncu's PM sampling alone (TIMELINE_INTERVAL, default
  # 1000) over TIMELINE_LAUNCHES launches (default 4, after 3 skipped) of kiln's twin and of
  # cuBLASLt's kernel, bf16 TIMELINE_KERNEL (default gemm) at each TIMELINE_SHAPES; per launch
  # the DRAM, tensor-pipe, L2 and active-cluster series (scripts/pm-timeline.py) in
  # timeline-<kiln|cublas>-<kernel>-<shape>.txt. A dip in one launch of either kernel is the
  # GPU's (both show them); one in every launch of one kernel is that kernel's.
  tk=${TIMELINE_KERNEL:-gemm}
  PM="--clock-control none --section PmSampling --pm-sampling-interval ${TIMELINE_INTERVAL:-1000} --launch-skip 3 --launch-count ${TIMELINE_LAUNCHES:-4}"
  for s0 in ${TIMELINE_SHAPES:-128x12288x4096}; do
    s=$tk-$s0
    for r in kiln cublas; do
      if [ $r = kiln ]; then names=$KILN_KERNELS routes=kiln; else names=$CUBLAS_KERNELS routes=framework; fi
      KILN_CACHE_DIR=off timeout 200 $NCU -f $PM --kernel-name "$names" -o "$RES/pm-$r-$s" $K/kiln bench $tk --backend=cuda \
        --dtype bf16 --routes $routes --shape $s0 --reps 8 --warmup 2 --no-progress > "$RES/pm-$r-$s.log" 2>&1
      $NCU --import "$RES/pm-$r-$s.ncu-rep" --page raw --csv --print-metric-instances values > "$RES/pm-$r-$s.csv" 2>&1
      python3 scripts/pm-timeline.py "$RES/pm-$r-$s.csv" > "$RES/timeline-$r-$s.txt" 2>&1
      result[timeline-$r-$s]="$(grep -c '^== launch' "$RES/timeline-$r-$s.txt") launches"
    done
    pack
  done
fi
if want floor; then
  # The floor under decode GEMMs: how fast the GPU reads the weight alone, beside cuBLASLt's
  # GEMM on the shape (bench/hbm_floor.cpp). FLOOR_SHAPES: MxNxK entries (default: its own).
  run hbm-floor hbm-floor.log $K/kiln-bench-hbm --csv "$RES/hbm-floor.csv" ${FLOOR_SHAPES:-}
fi
if want warm; then
  # A cache made by `kiln warm` on the build machine (no GPU), used here read-only: every
  # kernel of scripts/warm-manifest.txt must be a disk hit, run and verify.
  cp -r /tmp/kiln/warm-cache /tmp/kiln-warm-cache && chmod -R a-w /tmp/kiln-warm-cache
  warm_run() { # kernel dtype shape
    KILN_CACHE_DIR=/tmp/kiln-warm-cache KILN_CACHE_READ_ONLY=1 $K/kiln run "$1" --backend=cuda --dtype "$2" --shape "$3"
  }
  run warm-gemm-bf16 warm-gemm-bf16.log warm_run gemm_bias_relu bf16 4097x4096x4096
  run warm-gemm-f16 warm-gemm-f16.log warm_run gemm_bias_relu f16 257x135x65
  run warm-softmax warm-softmax.log warm_run softmax bf16 33x3000
  run warm-attention warm-attention.log warm_run attention bf16 1x8x2x512x128
fi
if want host; then
  # What kiln costs the host per call (bench/host_bench.cpp): Runtime::create, a memory
  # cache hit, a launch enqueued on a stream; on the GPU and, for comparison, the CPU.
  run host-cuda host-cuda.log $K/kiln-bench-host --backend cuda --csv "$RES/host.csv"
  run host-cpu host-cpu.log $K/kiln-bench-host --backend cpu --csv "$RES/host.csv"
  # A launch allocates nothing (operator new counted), here on the GPU too.
  run alloc alloc.log $K/kiln-alloc-tests
fi
if want tunetwin; then
  # kiln tune over the twin's own configs (scripts/twin-space.json: widths, ring depths,
  # clusters) on the target shapes: is the untuned default within 10% of the best?
  for s in ${TUNE_SHAPES:-4096x4096x4096 8192x8192x8192 4097x4096x4096 1000x1000x1000 128x12288x4096}; do
    rm -f "$RES/tunetwin-$s.json"
    run tunetwin-$s tunetwin-$s.log timeout 240 $K/kiln tune gemm_bias_relu --backend cuda --shape $s --dtype bf16 \
      --reps 20 --space scripts/twin-space.json --db "$RES/tunetwin-$s.json" --no-progress
  done
fi
if want tunedbench; then
  # The price of tuning beside the fixed config, on the same five shapes (a search per shape).
  SHAPES="--shape 4096x4096x4096 --shape 4097x4096x4096 --shape 1000x1000x1000 --shape 16x4096x4096 --shape 128x12288x4096"
  rm -f "$RES/bench-tune.json"
  run tuned-bench tuned-bench.log $K/kiln bench gemm_bias_relu --backend=cuda --dtype bf16 $SHAPES --reps 20 \
    --warmup 3 --routes kiln,framework --tuned "$RES/bench-tune.json" \
    --csv "$RES/tuned-bench.csv" --json "$RES/tuned-bench.json" --html "$RES/tuned-bench.html"
fi
if want mlptuned; then
  rm -f "$RES/mlp-tune.json"
  run mlp-tuned mlp-tuned.log $K/kiln-mlp --tuned "$RES/mlp-tune.json" --csv "$RES/mlp-tuned.csv" \
    --json "$RES/mlp-tuned.json" --html "$RES/mlp-tuned.html"
fi
if want decide; then
  # The decision on the GPU: kiln bench with verdicts at 1.10x (the large and the decode
  # shapes; DECIDE_SHAPES in place of them), kiln-mlp's model-level verdict, and
  # example-decide (a fused residual add + RMSNorm against add-then-RMSNorm).
  S=$(printf -- '--shape %s ' ${DECIDE_SHAPES:-4096x4096x4096 8192x8192x8192 1000x1000x1000 16x4096x4096 96x4096x4096 128x12288x4096})
  run decide-bench decide-bench.log $K/kiln bench gemm_bias_relu --backend=cuda --dtype bf16 $S --routes kiln,framework,framework-eager \
    --reps 30 --warmup 5 --no-progress --accept 1.10 --csv "$RES/decide-bench.csv" --json "$RES/decide-bench.json" --html "$RES/decide-bench.html"
  run decide-mlp decide-mlp.log $K/kiln-mlp --accept 1.10 --csv "$RES/decide-mlp.csv" --json "$RES/decide-mlp.json" --html "$RES/decide-mlp.html"
  run decide-example decide-example.log $K/example-decide --csv "$RES/decide-example.csv"
fi
if want suite; then
  run cuda-support cuda-support.log $K/kiln-cuda-support-tests
  # Every case in a process of its own, eight at a time (run_cases above, CASE_TOOLS=none):
  # in one process the suite outgrew its 480 s (H200, 2026-12-02: the twin's ragged test alone
  # takes 20-73 s per kernel and dtype); a case that hangs costs only itself.
  # SUITE_FILTER: a Catch2 test spec to run part of the suite (e.g. "[sm90]").
  CASE_TOOLS=none CASE_FILTER=${SUITE_FILTER:-} run_cases
  run gpu-sticky gpu-sticky.log $K/kiln-gpu-tests "[sticky]"   # resets the context: own process
  # nvJitLink missing at run time (test/faults/fail_dlopen.c preloaded): the driver's JIT
  # compiles the PTX instead (a module with an sm_90a twin goes to it anyway), and the
  # results still verify.
  NOJL="env LD_PRELOAD=/tmp/kiln/lib/libkiln-fail-dlopen.so KILN_TEST_FAIL_DLOPEN=nvJitLink KILN_CACHE_DIR=off $K/kiln run"
  run no-nvjitlink no-nvjitlink.log sh -c "$NOJL softmax --backend=cuda --shape 7x3000 --dtype f16 > $RES/no-nvjitlink.out 2>&1; \
    $NOJL gemm_bias_relu --backend=cuda --shape 257x129x65 --dtype bf16 >> $RES/no-nvjitlink.out 2>&1; cat $RES/no-nvjitlink.out; \
    grep -q 'built by: CUDA driver PTX JIT .*nvJitLink unavailable: nvJitLink not found' $RES/no-nvjitlink.out && \
    test \$(grep -c 'reference_ok=true' $RES/no-nvjitlink.out) = 2"
fi
if want sanitize; then
  # compute-sanitizer: each of SANITIZE_TOOLS over SANITIZE_RUNS (SANITIZE_TOOLS="" skips
  # them); then each of SANITIZE_SUITE_TOOLS (default memcheck) over the GPU suite's tests that
  # SANITIZE_FILTER selects (default: the launch checks and hand-written kernels).
  # Logs: sanitize-<tool>-<kernel>-<shape>.log, sanitize-suite-<tool>.log.
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # SANITIZE_RUNS: kernel:shape:dtype entries, each run by `kiln run` under each tool. The
  # default covers every catalogue kernel, shapes meant to reach each sm_90a twin (128x128
  # at 256x256x512, 128x256 at 2048x2048x256, the 64-row tile at 16x512x256, the stacked
  # pair at 1000x1000x256; each log's `launch:` line says which ran) and the portable
  # kernel (257x129x65, 300x200x100).
  RUNS=${SANITIZE_RUNS-gemm_bias_relu:256x256x512:bf16 gemm_bias_relu:257x129x65:bf16 gemm:2048x2048x256:bf16 \
    gemm:16x512x256:bf16 gemm_bias_gelu:1000x1000x256:f16 gemm_bias_residual:300x200x100:bf16 softmax:7x3000:f16 \
    rmsnorm:33x1000:bf16 add:100x300:f32}
  for tool in ${SANITIZE_TOOLS-memcheck racecheck synccheck initcheck}; do
    for r in $RUNS; do
      IFS=: read -r kern shape dt <<< "$r"
      run sanitize-$tool-$kern-$shape sanitize-$tool-$kern-$shape.log timeout ${SANITIZE_TIMEOUT:-120} $CS --tool $tool \
        --error-exitcode 9 $K/kiln run $kern --backend=cuda --dtype $dt --shape $shape --seed 3
    done
  done
  # API errors are not reported here: compile_cuda probes a kernel's parameters with
  # cuFuncGetParamInfo until it answers CUDA_ERROR_INVALID_VALUE (past the last one).
  for tool in ${SANITIZE_SUITE_TOOLS:-memcheck}; do
    run sanitize-suite-$tool sanitize-suite-$tool.log timeout ${SANITIZE_SUITE_TIMEOUT:-300} $CS --tool $tool \
      --report-api-errors no --error-exitcode 9 $K/kiln-gpu-tests --durations yes "${SANITIZE_FILTER:-[errors],[handwritten]}"
  done
fi
want cases && run_cases
if want gemm; then
  run bench bench.log $K/kiln-bench-gemm "$RES/bench.csv"
  run big-gemm cli-run.log $K/kiln run gemm_bias_relu --backend=cuda --shape 4097x4096x4096 --dtype bf16
  for k in gemm gemm_bias_gelu softmax add rmsnorm; do
    shape=1000x129x4097; case $k in softmax|add|rmsnorm) shape=4097x1000;; esac
    for d in f32 bf16 f16; do
      $K/kiln run $k --backend=cuda --shape $shape --dtype $d >> "$RES/cli-run.log" 2>&1 || result[cli-$k-$d]="FAILED"
    done
  done
fi
if want cache; then
  # Five fresh processes on an empty cache (cold), each followed by a fresh process on the
  # cache it left (disk hit); each process also measures a memory hit and a second kernel.
  # Each with a compile on every core (the default) and on one thread (compile_threads 1:
  # LLVM, MLIR's lowering and the driver's JIT each on one), alternating. CACHE_JITS: the
  # KILN_HOPPER_JIT values to alternate too (default: driver; "driver ptxas" for the A/B of
  # the toolkit's ptxas in place of the driver's JIT: compile-ptxas.csv beside compile.csv;
  # "auto", kiln's default, which takes ptxas where it finds one: compile-auto.csv).
  # CACHE_KERNELS: catalogue kernels as NAME:SHAPE (default: gemm_bias_relu on its own
  # shape; e.g. swiglu:512x1024x512 for a two-product kernel), rows told apart by `kernel`.
  # CACHE_THREADS: the compile_threads values (default "0 1").
  for i in 1 2 3 4 5; do
    for t in ${CACHE_THREADS:-0 1}; do
      for jit in ${CACHE_JITS:-driver}; do
        csv="$RES/compile.csv"; [ "$jit" = driver ] || csv="$RES/compile-$jit.csv"
        for ks in ${CACHE_KERNELS:-gemm_bias_relu}; do
          kargs=(--kernel "${ks%%:*}"); [[ "$ks" == *:* ]] && kargs+=(--shape "${ks#*:}")
          rm -rf /tmp/kiln-cache-bench
          for pass in cold disk; do
            KILN_HOPPER_JIT=$jit $K/kiln-bench-compile --dir /tmp/kiln-cache-bench --backend cuda --compile-threads $t \
              "${kargs[@]}" --csv "$csv" >> "$RES/compile.log" 2>&1
          done
        done
      done
    done
  done
  result[compile-bench]="$(cat "$RES"/compile*.csv | grep -c ',true,') verified"
fi
if want tune; then
  rm -rf /tmp/kiln-cache "$RES/tune.json"   # the search's compile cost, from nothing
  run tune tune.log $K/kiln tune gemm_bias_relu --backend cuda --shape 4096x4096x4096 --dtype bf16 --reps 20 \
    --db "$RES/tune.json"
  run tune-replay tune-replay.log $K/kiln tune gemm_bias_relu --backend cuda --shape 4096x4096x4096 --dtype bf16 \
    --reps 20 --db "$RES/tune.json"
fi

echo
pack
# Only the archive comes back whole: the device tool returns at most 8 files from $OUT.
cat "$RES/device.txt"
printf '%-14s %s\n' "check" "result"
for n in "${!result[@]}"; do printf '%-14s %s\n' "$n" "${result[$n]}"; done | sort
if want gemm; then
  grep -c "reference_ok=true" "$RES/cli-run.log" | sed 's/^/cli runs verified: /'
  grep "reference_ok=false" "$RES/cli-run.log" | head -5
  grep -vE "^(cuda|NVIDIA)" "$RES/bench.log" | cut -c1-90
fi
if want bench; then
  grep -E "^(route|kiln|framework|framework-eager|cuda) " "$RES/kiln-bench.log"
  tail -n 12 "$RES/mlp.log"
fi
if want hopper; then
  for f in "$RES"/hopper-*.log; do echo "== $(basename "$f" .log)"; grep -E "^(kiln|framework) " "$f" | awk '{print $1, $2, $8, $9}'; done
fi
want profile && for f in "$RES"/sol-*.txt; do echo "== $(basename "$f" .txt)"; cat "$f"; done
want cache && for f in "$RES"/compile*.csv; do echo "== $(basename "$f")"; cat "$f"; done
if want ab; then
  python3 - "$RES" <<'PY'
import csv, glob, os, statistics, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ab-*.csv"))):
    build, kernel, rnd = os.path.basename(f)[3:-4].rsplit("-", 2)
    for r in csv.DictReader(open(f)):
        rows.setdefault((kernel, r["shape"], build, r["route"]), []).append(float(r["warm_ms"]) * 1000)
print("kernel shape build: kiln us per round | cuBLASLt us | cuBLASLt/kiln (median of rounds)")
for (kernel, shape, build, route), v in sorted(rows.items()):
    if route != "kiln": continue
    fw = rows.get((kernel, shape, build, "framework"), [float("nan")])
    ratio = statistics.median(f / k for f, k in zip(fw, v))
    print(kernel, shape, build, " ".join("%.2f" % x for x in v), "|", " ".join("%.2f" % x for x in fw), "| %.3f" % ratio)
PY
fi
if want cases; then
  for f in "$RES"/cases-*.tsv; do
    echo "== $(basename "$f" .tsv): $(awk -F'\t' '$2 != 0' "$f" | wc -l) of $(wc -l < "$f") jobs not rc=0"
    awk -F'\t' '$2 != 0' "$f" | cut -c1-160
  done
fi
want timeline && for f in "$RES"/timeline-*.txt; do echo "== $(basename "$f" .txt)"; cat "$f"; done
want floor && cat "$RES/hbm-floor.csv"
want host && cat "$RES/host.csv" "$RES/alloc.log"
want warm && grep -H -E "^compile:|reference_ok" "$RES"/warm-*.log
if want tunetwin; then
  for f in "$RES"/tunetwin-*.log; do echo "== $(basename "$f" .log)"; grep -E "^(chosen|runner-up|default|search cost)" "$f"; done
fi
want tunedbench && grep -E "^(route|kiln|framework)|compile" "$RES/tuned-bench.log"
want mlptuned && tail -n 20 "$RES/mlp-tuned.log"
want decide && grep -h -A30 "^verdicts" "$RES"/decide-*.log | grep -v "^wrote" && grep -h "^verdict:" "$RES/decide-example.log"
if want tune; then
  grep -E "^(tuning|chosen|runner-up|default|search cost|note)" "$RES/tune.log"
  grep -E "^(chosen|search cost|note)" "$RES/tune-replay.log"
fi
true
