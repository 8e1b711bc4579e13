#!/usr/bin/env bash
# The prepared GPU check (about 8 minutes on one GPU):
#   1. training throughput of the seed preset, 2 layers, against the plain-PyTorch model
#      (benchmarks/train_throughput.py), in fp32 and in bf16 autocast;
#   2. the natural-text recipe (--preset text: plain stdlib text, shortformer positions): the
#      2-layer model and its 1-layer control side by side, their curves, `interp-toolkit heads`
#      roles, in-context-learning score and repeated-passage loss (experiments/natural_text.py);
#   3. the seed preset (GPU scale) on natural text only: time until a layer-1 induction head
#      passes its null, and the 1-layer control (benchmarks/null_induction.py).
#
#   benchmarks/gpu_check.sh [OUT]            on the GPU (fails at once without one)
#   benchmarks/gpu_check.sh --dry-run [OUT]  the same steps, shrunk to seconds on the CPU
#
# OUT (default benchmarks/results/gpu_check) receives the JSON files and the two run folders.
# PYTHON picks the interpreter (default: python).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

DRY=0
if [[ "${1:-}" == "--dry-run" ]]; then
    DRY=1
    shift
fi
OUT=${1:-benchmarks/results/gpu_check}

if ((DRY)); then
    DEVICE=cpu PRESET=cpu
    THROUGHPUT=(--steps 6 --warmup 2 --repeats 1 --threads 2)
    INDUCTION=(--steps 10 --score-every 5)
    TEXT=(--steps 10)
else
    if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
        echo "error: no CUDA GPU is visible: run benchmarks/gpu_check.sh on a GPU machine, or --dry-run." >&2
        exit 2
    fi
    DEVICE=cuda PRESET=seed
    THROUGHPUT=(--steps 60 --warmup 10 --repeats 3)
    INDUCTION=(--steps "${STEPS:-3000}" --score-every 100)
    TEXT=()  # the text preset's own step budget
fi
if [[ -e "$OUT" ]] && [[ -n "$(ls -A "$OUT")" ]]; then
    echo "error: $OUT is not empty: give a new folder." >&2
    exit 2
fi
mkdir -p "$OUT"
"$PY" -c "import torch; print('torch', torch.__version__, '| cuda', torch.cuda.is_available() and torch.cuda.get_device_name())"

for precision in fp32 bf16; do
    echo "== throughput: preset $PRESET, 2 layers, $DEVICE, $precision"
    "$PY" benchmarks/train_throughput.py --preset "$PRESET" --layers 2 --device "$DEVICE" \
        --precision "$precision" "${THROUGHPUT[@]}" --json "$OUT/throughput_$precision.json"
done

echo "== the natural-text recipe (--preset text): 2 layers and the 1-layer control, side by side"
"$PY" experiments/natural_text.py --out "$OUT/text_runs" --device "$DEVICE" "${TEXT[@]+"${TEXT[@]}"}" \
    --json "$OUT/natural_text.json"

echo "== seed preset: time to a layer-1 induction head over its null (natural text), and the 1-layer control"
"$PY" benchmarks/null_induction.py --out "$OUT/runs" --preset "$PRESET" --layers 2,1 \
    --device "$DEVICE" --precision bf16 "${INDUCTION[@]}"
echo "wrote $OUT"
