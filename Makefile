# lance_ops: every target creates the virtualenv on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test protos lint bench ui clean

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

test: $(STAMP)
	$(PY) -m pytest -q tests

protos: $(STAMP)
	$(PY) -m lance_ops.format._proto.regen

lint: $(STAMP)
	$(PY) -m ruff check lance_ops tests bench
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	$(PY) -m bench.run $(if $(QUICK),--quick,)

clean:
	rm -rf $(VENV) .lance_ops
