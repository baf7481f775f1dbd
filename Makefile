# make demo : build .venv, install every distribution editable + torch==2.13.0 (CPU) + mindspore==2.10.0, run the demo
# make test : same install, then the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.probe-installed

# torch and mindspore share one environment (and one process in the cross-framework tests); mindspore 2.x
# needs numpy<2, pinned in the framework install step and in requirements-dev.txt.
# Every distribution of this repository, installed editable in one pip call so local ones satisfy
# each other's dependencies.
DISTS := probe_core[dask] plugins/compare plugins/modes plugins/config_check plugins/parallel_merge plugins/acc_check plugins/monitor plugins/overflow_check plugins/merge_result plugins/data2db plugins/recover plugins/graph plugins/report plugins/locate probe_torch probe_mindspore

.PHONY: demo test install clean gpu-check browser

install: $(STAMP)

$(STAMP): Makefile requirements-dev.txt $(wildcard */pyproject.toml plugins/*/pyproject.toml */setup.py plugins/*/setup.py) $(wildcard probe_core/src/probe_core/*.c probe_core/src/probe_core/*/*.c plugins/*/src/*/*.c)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	$(PIP) install -q torch==2.13.0 mindspore==2.10.0 "numpy<2"
	$(PIP) install -q -r requirements-dev.txt torch==2.13.0 "numpy<2"  # the test extras must not move torch
	$(PIP) install -q --no-build-isolation $(foreach d,$(DISTS),-e "$(d)")
	touch $(STAMP)

# The main job on the embedded example: collect the same small transformers training script (a 2-layer
# LlamaForCausalLM, 4 AdamW steps) twice with `probe run` (unmodified script), once with a quiet config drift
# (RMSNorm epsilon 1e-5 instead of 1e-6), then let probe find where the two runs first diverge: `probe compare`
# (CSV/XLSX + summary) and `probe graph` (.vis.db), and write `probe report`'s HTML page of the compare (its
# path printed last). examples/shim on PYTHONPATH lets transformers import the registry's CUDA torchvision
# beside the CPU torch (see examples/shim/sitecustomize.py).
DEMO_OUT := demo_output
DEMO_ENV := PYTHONPATH=examples/shim$${PYTHONPATH:+:$$PYTHONPATH}

demo: $(STAMP)
	$(VENV)/bin/probe --version
	$(VENV)/bin/probe plugins
	rm -rf $(DEMO_OUT)
	$(DEMO_ENV) $(VENV)/bin/probe run --dump-path $(DEMO_OUT)/bench examples/train_demo.py
	$(DEMO_ENV) $(VENV)/bin/probe run --dump-path $(DEMO_OUT)/target examples/train_demo.py --rms-eps
	$(VENV)/bin/probe compare $(DEMO_OUT)/target $(DEMO_OUT)/bench -o $(DEMO_OUT)/compare
	$(VENV)/bin/probe graph $(DEMO_OUT)/target $(DEMO_OUT)/bench -o $(DEMO_OUT)/graph
	$(VENV)/bin/probe report $(DEMO_OUT)/compare -o $(DEMO_OUT)/report.html

# The report's browser tests (tests/report/test_browser.py) render pages in headless Chromium, Debian's package:
# installed here when apt-get can (root); elsewhere those tests skip, saying so.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } || \
		echo "make browser: chromium not installed (needs root and apt-get); the browser tests will skip"

# The suite runs on up to 4 workers (pytest-xdist); tests that share fixtures stay on one, the longest start first
# (tests/conftest.py); the 20 slowest tests are listed at the end.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0))))")

test: $(STAMP) browser
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=20

# The GPU-marked tests, then the dump overhead benchmark, on a CUDA machine (under 6 minutes); without CUDA it
# says so and succeeds. NOTE: benchmarks/dump_overhead.py has no device option yet: its figures are CPU ones.
gpu-check: $(STAMP)
	@if ! $(PY) -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then \
		echo "make gpu-check: skipped (torch sees no CUDA device)"; exit 0; fi; \
	timeout 360 sh -c '$(PY) -m pytest -q -m gpu tests && \
		$(PY) benchmarks/dump_overhead.py --hidden 256 --layers 2 --batch 8 --seq 64 --steps 8 --no-msprobe'

clean:
	rm -rf $(VENV) .venv-msprobe .venv-msprobe.lock
