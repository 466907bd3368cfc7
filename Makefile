# Developer entry points. `make test` is the one command that installs what tests need and runs them all.
PY := .venv/bin/python
export PATH := $(CURDIR)/.tools:$(CURDIR)/.venv/bin:$(PATH)
# Python reuses a compiled module, and pytest a rewritten test module, only where it may write them: with
# PYTHONDONTWRITEBYTECODE set (as it is on our CI image) each of the suite's processes (four workers,
# every demo, emulator and adapter they start) compiles all it imports again: 15 s of CPU a worker to
# collect the tests, where 6 s do with the caches, and 3.5 s to import the demo where 1.4 s do. The
# caches are __pycache__/ folders, which git ignores.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install tools generate verify lint test unit integration bench demo

install: .venv/.installed   ## the package (with the lab's plotting extra) in a local virtualenv

# A stamp, so `make demo` installs only when pyproject.toml changed (the install is editable).
.venv/.installed: pyproject.toml
	python3 -m venv .venv && .venv/bin/pip install -q -U "pip>=25.1" && .venv/bin/pip install -q -e ".[lab]"
	touch $@

tools:              ## everything the tests need (Prometheus, Alertmanager, helm, test/lint groups)
	scripts/install-tools

generate:           ## regenerate checked-in artifacts (rules, dashboards, chart copies)
	$(PY) -m alerts.generate
	$(PY) -m dashboards.generate
	$(PY) -m adapter.config.reference > docs/configuration.md

verify: generate    ## fail if a generated artifact differs from the committed copy
	git diff --exit-code -- alerts dashboards helm docs/configuration.md

lint:               ## ruff, mypy (strict, one worker a core: 38 -> 23 s on 2 cores) and import-linter contracts
	ruff check adapter lab tests bench dashboards alerts scripts helm/files
	ruff format --check adapter lab tests bench dashboards alerts scripts helm/files
	mypy --num-workers auto
	lint-imports

# Many tests wait on real processes (Prometheus, engines, the rehearsal's days on the wall clock): on a
# fresh clone three workers kept the 2 cores busy 155 % of the time (pytest 443 s); four took 380-437 s
# over six fresh clones, a gain inside this VM's noise (docs/test-durations.md). tests/workers.py says
# how they share it. `PYTEST_WORKERS=0`: one process.
PYTEST_WORKERS ?= 4
XDIST := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: tools lint    ## install tools, lint, then run every test (the slowest 20 listed: docs/test-durations.md)
	$(PY) -m pytest -q $(XDIST) --durations=20

unit:
	$(PY) -m pytest -q $(XDIST) --ignore=tests/integration

integration:
	$(PY) -m pytest -q $(XDIST) tests/integration

demo: install
	.venv/bin/vllm-autoscale demo
