#!/bin/bash
# Part B steps on the device, after setup.sh: bash steps.sh STEP... (results in ${DEV_ROOT:-/root}/res, tarred to $OUT)
H=$(cd "$(dirname "$0")" && pwd)
. $H/env.sh
R=${DEV_ROOT:-/root}/res; mkdir -p $R/dml; cd ${DEV_ROOT:-/root}/src
tag=$(echo "$*" | tr ' ' '_')
# numba.cuda.is_available(), which torch.testing._internal.common_cuda calls on import, starts the
# CUDA driver in measure_truth's parent; its forked workers then see no Vulkan adapter ("Invalid
# device_id argument supplied 0. device_id must be in range [0, 0)"): keep numba out of the truth runs
nonumba() {
  mkdir -p ${DEV_ROOT:-/root}/nonumba/numba
  echo 'raise ImportError("numba kept out: it starts the CUDA driver before fork")' > ${DEV_ROOT:-/root}/nonumba/numba/__init__.py
  export NUMBA_DISABLE_CUDA=1 PYTHONPATH=${DEV_ROOT:-/root}/nonumba:$PYTHONPATH
}
save() { tar cJf $OUT/res_$tag.tar.xz -C ${DEV_ROOT:-/root} res 2>/dev/null; }
trap 'save; ls -la $OUT' EXIT
for step in "$@"; do
  t0=$(date +%s)
  case $step in
  import)
    VKD3D_DEBUG=info timeout 90 python3 -c "
import time; t=time.time(); import torch; print('torch', torch.__version__, torch.__file__, 'cuda available', torch.cuda.is_available())
import torch_directml as dml; print('torch_directml', dml.__file__, 'devices', dml.device_count(), repr(dml.device_name(0)))
d=dml.device(); x=torch.ones(3, device=d)+1; print('ones+1', x.cpu().tolist(), 'in %.1f s' % (time.time()-t))
import subprocess, os; print('pid', os.getpid()); print(subprocess.run(['nvidia-smi'], capture_output=True, text=True).stdout[-900:])
" > $R/dml/import.log 2>&1; echo "import rc=$?"; grep -v -E "^$" $R/dml/import.log | grep -i -E "torch|ones|nvidia|device|adapter|error|fail|abort|python|MiB|pid" | grep -v "^[0-9]*:info" | head -40 ;;
  selftest)
    timeout 150 python3 ${DEV_ROOT:-/root}/src/tools/realdml/selftest.py > $R/dml/selftest.log 2>&1; echo "selftest rc=$?"; grep -E "OK|MISMATCH|\]|device|probe" $R/dml/selftest.log | head -40 ;;
  checks)
    timeout 150 python3 $H/../gpu_checks.py $R/dml/gpu_checks.json > $R/dml/gpu_checks.log 2>&1; echo "checks rc=$?"; cut -c1-220 $R/dml/gpu_checks.log | head -40 ;;
  checks_notiled)
    VKD3D_REALDML_NO_TILED=1 timeout 150 python3 $H/../gpu_checks.py $R/dml/gpu_checks_notiled.json > $R/dml/gpu_checks_notiled.log 2>&1; echo "checks_notiled rc=$?"; grep small_dtype $R/dml/gpu_checks_notiled.log | cut -c1-160 ;;
  scan_*)
    m=${step#scan_}
    timeout 240 python3 -m dmlprof scan models/$m.py --device dml --no-progress --out $R/dml/sessions --json $R/dml/$m.json > $R/dml/$m.txt 2>&1; echo "scan $m rc=$?"; head -30 $R/dml/$m.txt ;;
  scan2_*)
    m=${step#scan2_}
    timeout 300 python3 -m dmlprof scan models/$m.py --device dml --no-progress --out $R/dml/sessions2 --json $R/dml/${m}_2.json > $R/dml/${m}_2.txt 2>&1; echo "scan(2nd) $m rc=$?"; head -12 $R/dml/${m}_2.txt ;;
  truth)
    nonumba; timeout 300 python3 ${DEV_ROOT:-/root}/src/tools/realdml/measure_truth.py --only "$(cat $H/truth_labels.txt)" --out $R/dml/truth_subset.json > $R/dml/truth_subset.log 2>&1; echo "truth rc=$?"; tail -5 $R/dml/truth_subset.log ;;
  truthwrong)
    # the samples whose results the table marks wrong (on lavapipe): again on this adapter, two halves at once
    nonumba; for h in a b; do
      timeout 420 python3 ${DEV_ROOT:-/root}/src/tools/realdml/measure_truth.py --only "$(cat $H/truth_labels_wrong_$h.txt)" --out $R/dml/truth_wrong_$h.json > $R/dml/truth_wrong_$h.log 2>&1 &
    done; wait; echo "truthwrong done"; tail -n 2 $R/dml/truth_wrong_a.log $R/dml/truth_wrong_b.log ;;
  truthall)
    # the whole truth table (4,729 samples) on this adapter, in 8 groups of labels at once
    nonumba
    for h in 0 1 2 3 4 5 6 7; do
      timeout 470 python3 ${DEV_ROOT:-/root}/src/tools/realdml/measure_truth.py --only "$(cat $H/truth_all_$h.txt)" --out $R/dml/truth_all_$h.json > $R/dml/truth_all_$h.log 2>&1 &
    done; wait; echo "truthall done"; for h in 0 1 2 3 4 5 6 7; do tail -n 1 $R/dml/truth_all_$h.log; done ;;
  transparency)
    # every truth sample run plainly and under dmlprof's recorder, outputs and gradients compared bit for bit
    # (tools/realdml/transparency.py $TRANSPARENCY_ARGS, e.g. "--per-label 1"), in SHARDS (14) processes at once;
    # a later call with the same step resumes from the logs (each shard skips what its log already judged), so a
    # run cut by a call's limit goes on
    nonumba; n=${SHARDS:-14}
    for i in $(seq 0 $((n - 1))); do
      timeout ${TRANSPARENCY_TIMEOUT:-470} python3 ${DEV_ROOT:-/root}/src/tools/realdml/transparency.py $TRANSPARENCY_ARGS --shard $i/$n --resume --json $R/dml/transparency_$i.json --log $R/dml/transparency_$i.jsonl > $R/dml/transparency_$i.log 2>&1 &
    done; wait; echo "transparency done"; cat $R/dml/transparency_*.jsonl | wc -l; grep -h -E "^differs|^\{" $R/dml/transparency_*.log | tail -n 40 ;;
  why)
    # each layer of the recorder alone on the samples in WHY_KEYS (space-separated), against the CPU
    # (tools/realdml/why_differs.py): which layer makes a sample compute otherwise, and which run is right
    nonumba; timeout ${WHY_TIMEOUT:-240} python3 ${DEV_ROOT:-/root}/src/tools/realdml/why_differs.py $WHY_KEYS > $R/dml/why.log 2>&1; echo "why rc=$?"; grep -E "^\S.*\|.*:|^  " $R/dml/why.log | head -60 ;;
  journal_cuda)
    # the journal's cost on CUDA (benchmarks/journal_cost.py), on the machine's own PyTorch, not the kit's torch 2.4.1
    env -u LD_PRELOAD PYTHONPATH=${DEV_ROOT:-/root}/src timeout ${JOURNAL_TIMEOUT:-300} python3 ${DEV_ROOT:-/root}/src/benchmarks/journal_cost.py --device cuda --rounds ${ROUNDS:-8} --steps ${STEPS:-5} --out $R/journal_cost-cuda.json > $R/journal_cuda.log 2>&1; echo "journal_cuda rc=$?"; grep -E "with_vs|torch_version|device_name|Error" $R/journal_cuda.log | head ;;
  journal_breakdown)
    # where the journal's cost goes on CUDA: its variants that keep a part of the work (journal_cost.py --breakdown)
    env -u LD_PRELOAD PYTHONPATH=${DEV_ROOT:-/root}/src timeout ${JOURNAL_TIMEOUT:-300} python3 ${DEV_ROOT:-/root}/src/benchmarks/journal_cost.py --device cuda --breakdown --rounds ${ROUNDS:-24} --steps ${STEPS:-3} --out $R/journal_breakdown-cuda.json > $R/journal_breakdown.log 2>&1; echo "journal_breakdown rc=$?"; grep -A6 by_folder $R/journal_breakdown.log | head -20 ;;
  journal_cpu)
    env -u LD_PRELOAD PYTHONPATH=${DEV_ROOT:-/root}/src timeout ${JOURNAL_TIMEOUT:-300} python3 ${DEV_ROOT:-/root}/src/benchmarks/journal_cost.py --device cpu --rounds ${ROUNDS:-8} --steps ${STEPS:-5} --out $R/journal_cost-cpu.json > $R/journal_cpu.log 2>&1; echo "journal_cpu rc=$?"; grep -E "with_vs|torch_version|device_name|Error" $R/journal_cpu.log | head ;;
  journal_dml)
    timeout ${JOURNAL_TIMEOUT:-300} python3 ${DEV_ROOT:-/root}/src/benchmarks/journal_cost.py --device dml --rounds ${ROUNDS:-6} --steps ${STEPS:-4} --out $R/dml/journal_cost-dml.json > $R/dml/journal_dml.log 2>&1; echo "journal_dml rc=$?"; grep -E "with_vs|device_name|Error" $R/dml/journal_dml.log | head ;;
  overhead_*)
    # overhead_MODEL or overhead_MODEL@BATCH; OVERHEAD_TIMEOUT (s, default 300), ROUNDS (6), STEPS (5)
    spec=${step#overhead_}; m=${spec%@*}; bs=; [ "$spec" != "$m" ] && bs=${spec#*@}; name=$m${bs:+_bs$bs}
    timeout ${OVERHEAD_TIMEOUT:-300} python3 $H/../overhead_rounds.py --repo ${DEV_ROOT:-/root}/src --model models/$m.py ${bs:+--batch-size $bs} --device dml --rounds ${ROUNDS:-6} --steps ${STEPS:-5} --out $R/dml/overhead_$name.json > $R/dml/overhead_$name.log 2>&1; echo "overhead $name rc=$?"; grep -E "round|median\"" $R/dml/overhead_$name.log | head -20 ;;
  breakdown_*)
    # where recording's cost goes (tools/gpu_dml/recording_breakdown.py)
    m=${step#breakdown_}
    timeout ${BREAKDOWN_TIMEOUT:-300} python3 $H/../recording_breakdown.py --repo ${DEV_ROOT:-/root}/src --model models/$m.py --device dml --rounds ${ROUNDS:-6} --steps ${STEPS:-5} ${BREAKDOWN_VARIANTS:+--variants $BREAKDOWN_VARIANTS} --out $R/dml/breakdown_$m.json > $R/dml/breakdown_$m.log 2>&1; echo "breakdown $m rc=$?"; grep -E "^round|_vs_|per_call|warnings|calls_per|sync|small" $R/dml/breakdown_$m.log | head -40 ;;
  fallback_*)
    # what a fallback costs and what --replace saves (tools/gpu_dml/fallback_cost.py)
    m=${step#fallback_}
    timeout ${FALLBACK_TIMEOUT:-240} python3 $H/../fallback_cost.py --repo ${DEV_ROOT:-/root}/src --model models/$m.py --device dml --rounds ${FALLBACK_ROUNDS:-6} --out $R/dml/fallback_$m.json > $R/dml/fallback_$m.log 2>&1; echo "fallback $m rc=$?"; tail -c 2500 $R/dml/fallback_$m.log ;;
  esac
  echo "[$step: $(( $(date +%s) - t0 )) s]"
  save
done
