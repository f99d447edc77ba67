#!/usr/bin/env bash
# LMK fine-tuning + eval on the lent H200 (device tool). Prepare here first:
#   python benchmarks/gpu_finetune.py prepare [--model FOLDER]   # -> .gpu_carry (base model fp16, pairs, eval sets)
# then call the device tool with: command="bash benchmarks/gpu_finetune.sh", carry=[".gpu_carry"], timeout_s=540
# and score the fetched file here: python benchmarks/gpu_finetune.py score <files_at>/runs.json.gz
# Uses the device image's packages (torch, transformers, numpy, typer, tqdm, filelock) and platformdirs from the
# carry folder; no registry.
# CPU smoke test: OUT=/tmp/gpu_out GPU_FT_ARGS="--max-steps 2 --max-seconds 1200 --batch-size 4 --batch-tokens 512 --hard-negatives 1 --limit-queries 4 --sets manpages-needle/L2048" bash benchmarks/gpu_finetune.sh
set -euo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD:$PWD/.gpu_carry/site${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:?set OUT to the folder for the results}"
PY="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | tee "$OUT/hardware.txt" || echo cpu > "$OUT/hardware.txt"
# shellcheck disable=SC2086  # GPU_FT_ARGS is a list of options
"$PY" benchmarks/gpu_finetune.py run --out "$OUT" ${GPU_FT_ARGS:-} 2>&1 | tee "$OUT/log.txt"
