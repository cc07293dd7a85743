#!/bin/bash
# Reproducer of re-probe 18's case 12, from the repository root:
#   bash docs/probe18/killsave.sh docs/probe18/sigkill_after_recorded_steps.py
# scans the script (--run-to-end), waits until it printed "done" (every recorded step long taken), then SIGKILLs
# the scanned child (what the out-of-memory killer does), never dmlprof itself.
S=$1; OUT=$(mktemp -d)
PYTHONPATH=$PWD timeout 300 python3 -m dmlprof scan "$S" --device emulated-dml --from cuda --run-to-end > "$OUT/out" 2> "$OUT/err" &
TO=$!   # timeout's pid; its python child is dmlprof's supervisor, whose python child is the scanned process
for i in $(seq 1 3000); do grep -q '^done' "$OUT/out" 2>/dev/null && break; sleep 0.05; done
SV=$(ps --ppid $TO -o pid=,comm= | awk '$2 ~ /python/ {print $1}' | head -1)
CH=$(ps --ppid "$SV" -o pid=,comm= | awk '$2 ~ /python/ {print $1}' | head -1)
[ -n "$CH" ] && kill -9 "$CH"
wait $TO; echo "exit $?"; grep -E "^run|PARTIAL|stopped early" "$OUT/out"; tail -1 "$OUT/err"
