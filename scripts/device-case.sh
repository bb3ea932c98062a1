#!/usr/bin/env bash
# device-case.sh TOOL LOGDIR TIMEOUT JOB: runs one job of the `cases` step of
# scripts/device-run.sh. JOB is "N<TAB>test case name[<TAB>section]"; TOOL is "none" or a
# compute-sanitizer tool. Writes LOGDIR/N.log and prints one tab-separated row:
# N, rc, seconds, the tool's summary line (or Catch2's), the case [/ section].
set -u
tool=$1 dir=$2 limit=$3
IFS=$'\t' read -r n name section <<< "$4"
K=/tmp/kiln/bin
# A Catch2 test spec reads , [ ] * ~ and \ as syntax: escape them in the name.
spec=$(printf '%s' "$name" | sed 's/[][\\,*~]/\\&/g')
args=("$spec")
[ -n "${section:-}" ] && args+=(-c "$section")
cmd=("$K/kiln-gpu-tests" "${args[@]}")
# API errors are not reported: compile_cuda probes a kernel's parameters with
# cuFuncGetParamInfo until it answers CUDA_ERROR_INVALID_VALUE (past the last one).
[ "$tool" != none ] && cmd=("${CS:-compute-sanitizer}" --tool "$tool" --report-api-errors no --error-exitcode 9 "${cmd[@]}")
t0=$(date +%s)
# CASE_DEADLINE (epoch seconds): the step's end; a job that would start past it is skipped
# (rc "-"), and none runs beyond it, so the step packs its logs before the call's limit.
if [ -n "${CASE_DEADLINE:-}" ]; then
  left=$((CASE_DEADLINE - t0))
  if [ "$left" -lt 5 ]; then printf '%s\t-\t0\tnot run, past the deadline of the step\t%s\n' "$n" "$name${section:+ / $section}"; exit 0; fi
  [ "$left" -lt "$limit" ] && limit=$left
fi
timeout "$limit" "${cmd[@]}" > "$dir/$n.log" 2>&1
rc=$?
# A section the case no longer has runs none of its checks, and Catch2 calls that a pass
# ("assertions: - none -", --warn NoAssertions notwithstanding): such a job fails here.
if [ "$rc" = 0 ] && [ -n "${section:-}" ] && grep -q "^assertions: - none -" "$dir/$n.log"; then
  rc=8
  echo "device-case.sh: no assertion ran: the case has no section '$section'" >> "$dir/$n.log"
fi
summary=$(grep -E "SUMMARY:|^All tests passed|^test cases:" "$dir/$n.log" | tr '\n' ' ' | sed 's/=\+ *//g; s/ *$//')
printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$rc" "$(($(date +%s) - t0))" "${summary:-no summary}" "$name${section:+ / $section}"
