# The two set-up commands of the README: `make demo` and `make test`. Both build .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
INTEGRATIONS := $(wildcard integrations/*/pyproject.toml)
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test report install clean

install: $(VENV)/.installed

# torch==2.13.0 first: it is the CPU wheel; any other torch request pulls a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml $(INTEGRATIONS)
	python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e ".[dev]" $(foreach p,$(INTEGRATIONS),-e $(dir $(p)))
	touch $@

demo: install
	$(PY) examples/demo.py

test: install
	$(PY) -m pytest -q -p no:cacheprovider

report: install
	$(PY) benchmarks/report.py

clean:
	rm -rf $(VENV) demo_store
