#!/bin/bash
# rdsweep.sh FILE KIND...: each KIND on realdml (rd.sh FILE dml), the printed lines or the last error line
f=$1; shift; d=$(dirname $0)
for k in "$@"; do echo "== $k"; KIND=$k $d/rd.sh $f dml > /tmp/p22rd_$k.out 2>&1; rc=$?
 grep -E "^(PROBE|[0-9] )" /tmp/p22rd_$k.out | head -4; grep -E "Error|error:" /tmp/p22rd_$k.out | tail -1 | cut -c1-300; echo "rc=$rc"; done
