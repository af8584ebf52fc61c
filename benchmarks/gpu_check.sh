#!/usr/bin/env bash
# The checks that need a GPU, as one script for a machine with one NVIDIA card (CI has none):
# the CUDA tests, then the scale page's figures on the GPU (the streaming trainer on the synthetic
# pathology-like collection, float32 and bf16, beside one CPU process on the same machine) and
# bf16's accuracy effect on Musk1 and Musk2 with the tensor engine on the GPU.
#
#   MINITORCH_PROTO_DATA=../shared/data/mil bash benchmarks/gpu_check.sh [OUT_DIR]
#
# STEPS="test_cuda scale_cuda" runs only those steps (a device budget may not hold them all).
# Each step has its own time limit, so one that hangs costs only its share; logs go to OUT_DIR
# (default benchmarks/out/gpu). benchmarks/scale_results.md freezes what it printed.
set -u
out=${1:-${OUT:-benchmarks/out/gpu}}
mkdir -p "$out"
export PYTHONPATH=. PYTHONUNBUFFERED=1 MINITORCH_PROTO_DATA=${MINITORCH_PROTO_DATA:-../shared/data/mil}
py=${PYTHON:-python3}
data=${SCALE_DATA:-/tmp/minitorch_proto_scale}
steps=" ${STEPS:-test_cuda scale_cuda scale_cuda_bf16 bf16_cv_cuda scale_cpu} "
step() {  # step NAME SECONDS COMMAND...: run it under a limit, log it, say how it ended
    local name=$1 limit=$2; shift 2
    [[ $steps == *" $name "* ]] || return 0
    local t0=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    echo "== $name: exit $? after $((SECONDS - t0)) s"
    tail -n 12 "$out/$name.log"
}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nproc
  "$py" -c "import torch, numpy, numba, sklearn; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'numpy', numpy.__version__, 'numba', numba.__version__, 'sklearn', sklearn.__version__)"
  git rev-parse --short HEAD 2>/dev/null || true; } >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
step test_cuda 150 "$py" -m pytest -q -p no:cacheprovider tests/test_cuda.py
step scale_cuda 240 "$py" benchmarks/bench_scale.py --device cuda --procs 1 --data-dir "$data"
step scale_cuda_bf16 60 "$py" benchmarks/bench_scale.py --device cuda --autocast bf16 --procs 1 \
    --instance-sweep 2000 --bag-sweep 500 --data-dir "$data"
step bf16_cv_cuda 150 "$py" benchmarks/bench_scale.py --device cuda --bf16-cv musk1,musk2
step scale_cpu 90 "$py" benchmarks/bench_scale.py --device cpu --procs 1 --instance-sweep 2000 --bag-sweep 500 \
    --data-dir "$data"
