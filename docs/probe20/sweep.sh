#!/bin/bash
# sweep.sh CMD FILE KIND...: for each KIND, `dmlprof CMD FILE ...` (rest after --), the last lines and exit code
cmd=$1; f=$2; shift 2; kinds=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do kinds+=("$1"); shift; done; shift
for k in "${kinds[@]}"; do echo "== $k"; KIND=$k PYTHONPATH=/work/wt/probe20 nice -n 19 timeout 300 python3 -m dmlprof $cmd $f "$@" > /tmp/p20_$k.out 2>&1; rc=$?
 grep -E "^(h|nbytes|off|shared|set_to|aligned|ssize|st|save|id|p2v|guard|dlp|PROBE)" /tmp/p20_$k.out | head -2; grep -vE "Warning|warn" /tmp/p20_$k.out | tail -6; echo "rc=$rc"; done
