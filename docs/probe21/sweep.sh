#!/bin/bash
# sweep.sh CMD FILE KIND... -- ARGS: for each KIND, `dmlprof CMD FILE ARGS`, the last lines and exit code
cmd=$1; f=$2; shift 2; kinds=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do kinds+=("$1"); shift; done; shift
for k in "${kinds[@]}"; do echo "== $k"; KIND=$k PYTHONPATH=${WT:-/work/wt/probe21} nice -n 19 timeout 300 python3 -m dmlprof $cmd $f "$@" > /tmp/p21_$k.out 2>&1; rc=$?
 grep -E "^(PROBE|[0-9] )" /tmp/p21_$k.out | head -4; grep -vE "Warning|warn" /tmp/p21_$k.out | tail -5; echo "rc=$rc"; done
