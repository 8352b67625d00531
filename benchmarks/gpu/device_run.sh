#!/usr/bin/env bash
# The GPU session's one call for issue 36: the training step's rows on the device; its results land under $OUT.
#
# Once, here (the device has torch, Triton and sympy, not discopy or liger-kernel: both pure Python wheels):
#   echo /.whl/ >> "$(git rev-parse --git-common-dir)/info/exclude"
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl discopy==1.2.2 liger-kernel==0.8.5
# and napkin-cat's own wheel, for its entry points (the rule book, the accumulators: without them every row fails
# with "no rule book is registered", as the first call of 2026-12-04 did; the code run is the tree's, run.py puts
# it first on the path):
#   pip wheel --no-deps -w .whl .
# and, at the commit to measure, the rows' derivations for both models (about 4 CPU minutes here, 2026-12-04; on the
# device each row would search its own, tens of seconds of device time a row; benchmarks/gpu/derived is ignored):
#   python benchmarks/gpu/run.py --quick --only backward,flce,window,prefix-lm,document,alibi,softcap,decode,gqa \
#       --prederive --derived benchmarks/gpu/derived --models h200     # the device's kind (status says which)
# which also prints and compiles every kernel for the model's architecture with Triton here (no GPU) and exits 1
# naming any it cannot (run 5 met two such on the device: the search now offers only printable ones)
# Then one call:
#   run(command="bash benchmarks/gpu/device_run.sh", carry=[".whl", "benchmarks/gpu/derived"], timeout_s=590)
# A derivation is read only where the device's tree has the source hash it was searched under (prederived.py);
# every row records where its derivations came from ("derived"), and searches where the folder has none.
#
# PHASES (default "training masks decode"; "sweep", "launch", "profile" are others) names the phases run; RUN (e.g. run7)
# prefixes their files' tags, so that a second call on one day does not reuse the first's names; WHERE_TRAINING, WHERE_MASKS,
# WHERE_DECODE (e.g. N=2048,8192) give a phase run.py's --where (with QUICK= : the sizes a quick run left out).
# Three phases, each one run.py call under its own limit within one budget (a slow phase leaves the others' results,
# and each later phase gets the time the earlier leave, at least its minimum): 1. forward+backward
# of dense attention (--quick: d = 64, 128; N = 1,024, 4,096, 16,384) and the fused linear cross-entropy at a 128k
# vocabulary (Liger-Kernel and torch beside it); 2. the mask zoo at N = 4,096 (FlexAttention compiled beside each);
# 3. decoding at q = 1 (N = 4,096, 32,768, 131,072; GQA) and GQA at N = 4,096, SDPA's backends beside them.
# QUICK= (empty) runs every size of the issue instead of --quick's three (N = 1,024 … 16,384 for the training rows and
# each mask, decoding at N = 4,096 … 131,072 with the model's next tiles timed beside the pick): prederive without
# --quick first. Run 5 took 62 + 59 + 32 s for the --quick phases; the full rows are about 3× as many.
# What comes back is at most 8 files (the device tool's limit): the versions and clocks in one file, each phase's
# JSON, the phases' logs in one file (phases.txt), the budget; the plots are redrawn here (report.py --plots).
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
if ! ls .whl/napkin_cat-*.whl > /dev/null 2>&1; then
    echo "no napkin_cat wheel in .whl: its entry points register the rule book (pip wheel --no-deps -w .whl .)" \
        | tee "$OUT/results/budget.txt"
    exit 1
fi
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name(0))"
} > "$OUT/versions.txt" 2>&1
DERIVED=()
if [ -d benchmarks/gpu/derived ]; then DERIVED=(--derived benchmarks/gpu/derived); fi
# one budget for the three phases (BUDGET_S, within the call's limit): each phase gets what the earlier leave less
# the later phases' minimums, and at least its own minimum (each row is written as it finishes: a stopped phase keeps
# its rows)
BUDGET_S=${BUDGET_S:-560}
PHASES=${PHASES:-training masks decode}
phase() {   # phase NAME KINDS MIN_S LATER_MIN_S [run.py options]: one run.py call under what is left
    case " $PHASES " in *" $1 "*) ;; *) return ;; esac
    local name=$1 kinds=$2 least=$3 later=$4
    shift 4
    local left=$(( BUDGET_S - SECONDS - later ))
    if [ "$left" -lt "$least" ]; then left=$least; fi
    echo "phase $name ($kinds): ${left} s of ${BUDGET_S} s after ${SECONDS} s" >> "$OUT/results/budget.txt"
    timeout "$left" python3 benchmarks/gpu/run.py ${QUICK---quick} --only "$kinds" --tag "${RUN:+$RUN-}$name" --out "$OUT/results" \
        ${DERIVED[@]+"${DERIVED[@]}"} "$@" > "$OUT/results/$name.log" 2>&1
    echo "phase $name exit $? at ${SECONDS} s" >> "$OUT/results/budget.txt"
}
phase training backward,flce 120 "${LATER_S:-260}" ${WHERE_TRAINING:+--where "$WHERE_TRAINING"}
phase masks window,prefix-lm,document,alibi,softcap 180 "${DECODE_MIN_S:-70}" ${WHERE_MASKS:+--where "$WHERE_MASKS"}
phase decode decode,gqa "${DECODE_MIN_S:-70}" 0 ${WHERE_DECODE:+--where "$WHERE_DECODE"}
# PHASES=sweep: the tile assignments around the pick, one tile changed at a time (picks.neighbours), for decoding
# and the dense backward at d = 128: what a change to the time model is fitted on and tested against
phase sweep decode,backward 120 0 --where N=4096,32768,131072 --where d=128 --sweep "${SWEEP_K:-10}"
# PHASES=launch: the dense backward at N = 4,096 (d = 64, 128), its pick and the assignments around it, each also
# timed with its kernels launched at the time model's threads (relaunch.py: the printer launches every kernel of a
# plan with one num_warps, the model times each at its own; benchmarks/gpu/README.md item 10)
phase launch backward 120 0 --where N=4096 --where d=64,128 --sweep "${SWEEP_K:-4}" --relaunch
# PHASES=profile: decoding's parts kernel under Nsight Compute at p_x = 4, 8, 16 (N = 131,072, 128-key tiles): what
# sets their time where the model gives them alike (profile_decode.py; ncu's CSV in profile.log, in phases.txt)
case " $PHASES " in *" profile "*)
    echo "phase profile: ${PROFILE_S:-150} s after ${SECONDS} s" >> "$OUT/results/budget.txt"
    timeout "${PROFILE_S:-150}" ncu --csv --metrics "$(python3 benchmarks/gpu/profile_decode.py --metrics)" \
        --kernel-name regex:nc_kernel0 python3 benchmarks/gpu/profile_decode.py --N 131072 --parts 4 8 16 \
        > "$OUT/results/profile.log" 2>&1
    echo "phase profile exit $? at ${SECONDS} s" >> "$OUT/results/budget.txt" ;;
esac
rm -f "$OUT"/results/*.png
tail -n 30 "$OUT"/results/*.log
# at most 8 files come back: the phases' logs as one file (each under its name), beside each phase's JSON
for log in "$OUT"/results/*.log; do echo "===== $(basename "$log")"; cat "$log"; done > "$OUT/phases.txt"
rm -f "$OUT"/results/*.log
cat "$OUT/results/budget.txt"
ls -l "$OUT" "$OUT/results"
