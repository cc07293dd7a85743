#!/bin/bash
# call 1: what the machine has, then Part A (overhead rounds on CUDA).
#   run("bash tools/gpu_dml/call1.sh", carry=["tools/gpu_dml/cargo/c1"])   (or carry a copy of the checkout as tools/gpu_dml/cargo/src)
I=$OUT/info.txt
{
echo "== python"; which python3; python3 -V; python3 -c "import sys,sysconfig;print(sys.prefix, sysconfig.get_paths()['purelib'])"
echo "== glibc"; ldd --version | head -1; uname -a; nproc; free -g | head -2; df -h / /tmp | cat
echo "== torch"; python3 -c "import torch,os;print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0));print(os.path.dirname(torch.__file__))"
SP=$(python3 -c "import sysconfig;print(sysconfig.get_paths()['purelib'])")
echo "== pip list"; python3 -m pip list 2>/dev/null | grep -i -E "torch|nvidia|numpy|sympy|triton|pandas|tabulate|jinja|tqdm|networkx|filelock|fsspec|typing"
echo "== torch/lib"; ls -la $SP/torch/lib
echo "== nvidia libs"; ls -la $SP/nvidia/*/lib 2>&1 | grep -v "^total"
echo "== pip cache"; python3 -m pip cache dir; python3 -m pip cache list 2>&1 | head; du -sh $(python3 -m pip cache dir) 2>&1; ls "$HOME/.cache" 2>&1
echo "== vulkan"; ls -la /usr/local/nvidia/share/vulkan/icd.d /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1; cat /usr/local/nvidia/share/vulkan/icd.d/*.json 2>&1; ldconfig -p | grep -i -E "vulkan|GLX|EGL|glvnd|libdxcore|d3d12"; ls /usr/local/nvidia/lib64 2>&1 | head -80
echo "== nvidia-smi"; nvidia-smi 2>&1 | head -15
echo "== env"; env | grep -i -E "LD_LIBRARY|CUDA|NVIDIA|PATH" 
} > $I 2>&1
cat $I | head -150
# the project's source: carried as tools/gpu_dml/cargo/src (a copy of the checkout), or chunk 1's src.tar.xz
if [ -d tools/gpu_dml/cargo/src/dmlprof ]; then cd tools/gpu_dml/cargo/src
else mkdir -p "$HOME/src" && tar xJf tools/gpu_dml/cargo/c1/src.tar.xz -C "$HOME/src" && cd "$HOME/src"; fi
G=$OLDPWD/tools/gpu_dml
export PYTHONUNBUFFERED=1
for spec in "models/resnet18.py:" "models/vit_tiny.py:" "models/lenet5.py:" "models/resnet18.py:64"; do
  m=${spec%%:*}; bs=${spec##*:}; name=$(basename $m .py)${bs:+_bs$bs}
  timeout 135 python3 $G/overhead_rounds.py --repo . --model $m ${bs:+--batch-size $bs} --device cuda --rounds 10 --steps 8 --out $OUT/overhead_$name.json > $OUT/log_$name.txt 2>&1
  echo "$name rc=$?"; grep -E "round|wall_s" $OUT/log_$name.txt | tail -3
done
