#!/usr/bin/env bash
# expect_hang_report.sh NP TIMEOUT_S MPIRUN_COMMAND...
# Runs the watchdog scenario and passes only if the job fails (non-zero) within TIMEOUT_S plus a
# margin, and every rank printed one watchdog line naming sequence number #2. WANT_OP (default
# all_reduce): the op the ranks other than the last one wait in.
set -u
want_op="${WANT_OP:-all_reduce}"
np="$1"; timeout_s="$2"; shift 2
export ZT_COMM_TIMEOUT_S="$timeout_s" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
margin=15
start_ms=$(( $(date +%s%N) / 1000000 ))
out=$(timeout $((timeout_s + 60)) "$@" -x ZT_COMM_TIMEOUT_S 2>&1)
rc=$?
elapsed_ms=$(( $(date +%s%N) / 1000000 - start_ms ))
echo "$out" | grep "comm watchdog" || true
echo "exit status $rc after ${elapsed_ms} ms (timeout ${timeout_s}s)"
fail=0
if [[ $rc -eq 0 ]]; then echo "FAIL: the job exited 0"; fail=1; fi
if [[ $rc -eq 124 ]]; then echo "FAIL: the job hung (killed by timeout)"; fail=1; fi
if (( elapsed_ms > (timeout_s + margin) * 1000 )); then echo "FAIL: took longer than timeout + ${margin}s"; fail=1; fi
if echo "$out" | grep -q UNEXPECTED; then echo "FAIL: a skipped collective completed"; fail=1; fi
for ((r = 0; r < np; r++)); do
  if [[ $r -eq $((np - 1)) ]]; then want='#2 barrier label="after-the-skip"'; else want="#2 $want_op label=\"bucket 7\""; fi
  line=$(echo "$out" | grep "\[zerotrain rank $r host .*\] comm watchdog: .*$want" | grep "last completed #1 all_reduce" || true)
  if [[ -z "$line" ]]; then echo "FAIL: no watchdog line from rank $r naming '$want'"; fail=1; fi
  nlines=$(echo "$out" | grep -c "\[zerotrain rank $r host .*\] comm watchdog" || true)
  if [[ $nlines -ne 1 ]]; then echo "FAIL: rank $r printed $nlines watchdog lines, want 1"; fail=1; fi
done
if [[ $fail -ne 0 ]]; then echo "---- full output ----"; echo "$out"; exit 1; fi
echo "PASS"
