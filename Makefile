# lance_ops: every target creates the virtualenv on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test check protos lint bench ui clean install

$(PY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Python 3.11 is required (set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Reinstall only when the project metadata changed.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[all,dev]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m lance_ops.demo

# Every test (what CI runs): two xdist workers (one file per worker at a time), then the tests that
# need the machine to themselves (marker serial: live servers, the browser, the stress run).
# The UI tests install Debian's Chromium themselves (tests/browser.py).
test: $(STAMP)
	$(PY) -m pytest -q -m "not serial" -n 2 --dist loadfile --no-loadscope-reorder --durations=25 tests
	$(PY) -m pytest -q -m "serial" --durations=10 tests

# The fast tier: format, conformance and unit tests (a bare `pytest` runs the same).
check: $(STAMP)
	$(PY) -m pytest -q

ui: $(STAMP)
	@mkdir -p .lance_ops/demo/dagster_home
	@test -f .lance_ops/demo/dagster_home/dagster.yaml || printf 'telemetry:\n  enabled: false\nnux:\n  enabled: false\n' > .lance_ops/demo/dagster_home/dagster.yaml
	DAGSTER_HOME=$(CURDIR)/.lance_ops/demo/dagster_home $(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

protos: $(STAMP)
	$(PY) -m lance_ops.format._proto.regen

lint: $(STAMP)
	$(PY) -m ruff check lance_ops tests bench
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	$(PY) -m bench.run $(if $(QUICK),--quick,)

clean:
	rm -rf $(VENV) .lance_ops
