#!/usr/bin/env bash
# Build benchmarks/st_baselines/.venv: sentence-transformers with its ONNX and OpenVINO backends (requirements.txt),
# for benchmarks/encode_throughput.py. torch==2.13.0 first, as in the Makefile: it is the CPU wheel.
set -euo pipefail
cd "$(dirname "$0")"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet torch==2.13.0
.venv/bin/python -m pip install --quiet -r requirements.txt
.venv/bin/python -c "import optimum.onnxruntime, optimum.intel, sentence_transformers; print('st_baselines venv ready')"
