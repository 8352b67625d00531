#!/usr/bin/env bash
# The GPU session's one call for issue 36: the training step's rows on the device; its results land under $OUT.
#
# Once, here (the device has torch, Triton and sympy, not discopy or liger-kernel: both pure Python wheels):
#   echo /.whl/ >> "$(git rev-parse --git-common-dir)/info/exclude"
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl discopy==1.2.2 liger-kernel==0.8.5
# and, at the commit to measure, the rows' derivations for both models (about 4 CPU minutes here, 2026-12-04; on the
# device each row would search its own, tens of seconds of device time a row; benchmarks/gpu/derived is ignored):
#   python benchmarks/gpu/run.py --quick --only backward,flce,window,prefix-lm,document,alibi,softcap \
#       --prederive --derived benchmarks/gpu/derived
# Then one call:
#   run(command="bash benchmarks/gpu/device_run.sh", carry=[".whl", "benchmarks/gpu/derived"], timeout_s=590)
# A derivation is read only where the device's tree has the source hash it was searched under (prederived.py);
# every row records where its derivations came from ("derived"), and searches where the folder has none.
#
# Two phases, each one run.py call under its own limit within one budget (a slow phase leaves the other's results,
# and the masks get the time the first leaves): 1. forward+backward
# of dense attention (--quick: d = 64, 128; N = 1,024, 4,096, 16,384) and the fused linear cross-entropy at a 128k
# vocabulary (Liger-Kernel and torch beside it); 2. the mask zoo at N = 4,096 (FlexAttention compiled beside each).
# Every row first derives for the device's hardware model (read from benchmarks/gpu/derived where carried, else
# searched there: CPU time, tens of seconds a row), then gates and times.
# Afterwards, here: copy the returned results/*.json, .png and the logs into benchmarks/gpu/results/, commit them,
# and write the README's GPU section from them (python benchmarks/gpu/report.py --readme README.md); where the time
# model misses by more than 25 %, the results' notes say which assumption the measurement refutes.  A number that
# was not measured is never written.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/results"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$OUT/nvidia-smi.txt" 2>&1
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name(0))" \
    > "$OUT/versions.txt" 2>&1
DERIVED=()
if [ -d benchmarks/gpu/derived ]; then DERIVED=(--derived benchmarks/gpu/derived); fi
# one budget for both phases (BUDGET_S, within the call's limit): the masks get what the training rows leave, at
# least PHASE2_MIN_S; phase 1 stops at PHASE1_S (each row is written as it finishes: a stopped phase keeps its rows)
BUDGET_S=${BUDGET_S:-540}
timeout "${PHASE1_S:-300}" python3 benchmarks/gpu/run.py --quick --only backward,flce --tag training \
    --out "$OUT/results" ${DERIVED[@]+"${DERIVED[@]}"} > "$OUT/results/phase1-training.log" 2>&1
LEFT=$(( BUDGET_S - SECONDS ))
if [ "$LEFT" -lt "${PHASE2_MIN_S:-200}" ]; then LEFT=${PHASE2_MIN_S:-200}; fi
echo "phase 2 (masks): ${LEFT} s left of ${BUDGET_S} s after ${SECONDS} s" > "$OUT/results/budget.txt"
timeout "$LEFT" python3 benchmarks/gpu/run.py --quick --only window,prefix-lm,document,alibi,softcap \
    --tag masks --out "$OUT/results" ${DERIVED[@]+"${DERIVED[@]}"} > "$OUT/results/phase2-masks.log" 2>&1
tail -n 40 "$OUT/results/phase1-training.log" "$OUT/results/phase2-masks.log"
ls -l "$OUT/results"
