#!/bin/bash
# sweep.sh CMD FILE KIND... -- ARGS: for each KIND, `dmlprof CMD FILE ARGS` (this worktree), the last lines and exit code
cmd=$1; f=$2; shift 2; kinds=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do kinds+=("$1"); shift; done; shift
for k in "${kinds[@]}"; do echo "== $k"; KIND=$k PYTHONPATH=${WT:-/work/wt/probe22} nice -n 19 timeout 300 python3 -m dmlprof $cmd $f "$@" > /tmp/p22_$k.out 2>&1; rc=$?
 grep -E "^(PROBE|[0-9] )" /tmp/p22_$k.out | head -4; grep -vE "Warning|warn" /tmp/p22_$k.out | tail -4 | cut -c1-400; echo "rc=$rc"; done
