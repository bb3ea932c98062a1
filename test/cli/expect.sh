#!/usr/bin/env bash
# expect.sh RC REGEX CMD...: runs CMD, passes when it exits RC and its output matches REGEX.
set -u
want_rc=$1; regex=$2; shift 2
out=$("$@" 2>&1); rc=$?
echo "$out"
if [ "$rc" != "$want_rc" ]; then echo "FAIL: exit status $rc, expected $want_rc"; exit 1; fi
if ! grep -Eq -- "$regex" <<<"$out"; then echo "FAIL: output does not match /$regex/"; exit 1; fi
echo "ok: exit $rc, output matches /$regex/"
