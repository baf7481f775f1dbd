# make demo : build .venv, install every distribution editable + torch==2.13.0 (CPU), run the demo
# make test : same install, then the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.probe-installed

# Every distribution of this repository, installed editable in one pip call so local ones satisfy
# each other's dependencies.
DISTS := probe_core plugins/modes plugins/config_check plugins/parallel_merge probe_torch

.PHONY: demo test install clean

install: $(STAMP)

$(STAMP): Makefile requirements-dev.txt $(wildcard */pyproject.toml plugins/*/pyproject.toml)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -r requirements-dev.txt
	$(PIP) install -q --no-build-isolation $(foreach d,$(DISTS),-e $(d))
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/probe --version
	$(VENV)/bin/probe plugins

test: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV)
