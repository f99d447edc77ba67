# The two set-up commands of the README: `make demo` and `make test`. Both build .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
INTEGRATIONS := $(wildcard integrations/*/pyproject.toml)
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

LOCK := requirements/lock.txt
# What the benchmarks and the studies import beyond the package (the tests import both); pinned by $(LOCK).
BENCH_REQUIREMENTS := benchmarks/requirements.txt benchmarks/studies/requirements.txt

.PHONY: demo test report install lock clean

install: $(VENV)/.installed

# torch==2.13.0 first: it is the CPU wheel; any other torch request pulls a multi-GB CUDA build.
# Every package at the version of $(LOCK) (pip constraints: the lock pins, pyproject says what to install).
$(VENV)/.installed: pyproject.toml $(INTEGRATIONS) $(LOCK) $(BENCH_REQUIREMENTS)
	python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet torch==2.13.0 -c $(LOCK)
	$(PIP) install --quiet -c $(LOCK) -e ".[dev]" $(foreach p,$(INTEGRATIONS),-e $(dir $(p))) \
		$(foreach r,$(BENCH_REQUIREMENTS),-r $(r))
	touch $@

demo: install
	$(PY) examples/demo.py

test: install
	$(PY) -m pytest -q -p no:cacheprovider

report: install
	$(PY) benchmarks/report.py

# Regenerates $(LOCK) from pyproject's dev extra and the benchmarks' requirements, keeping pins that still fit
# (LOCK_FLAGS=--upgrade: newest of all).
# The integrations add only llama-index-core, which the dev extra already holds; the local lmk-rag line is dropped.
lock:
	python3 -m venv .lock-venv
	.lock-venv/bin/pip install --quiet pip-tools==7.6.2
	CUSTOM_COMPILE_COMMAND="make lock" .lock-venv/bin/pip-compile --quiet $(LOCK_FLAGS) --extra dev --strip-extras --annotation-style=line \
		--no-emit-index-url --no-emit-find-links \
		--output-file $(LOCK) pyproject.toml requirements/torch.in $(BENCH_REQUIREMENTS)
	sed -i '/^lmk-rag @ /d' $(LOCK)

clean:
	rm -rf $(VENV) demo_store
