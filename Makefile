# Two commands for a fresh clone:
#   make run    set up .venv and start the web UI with an Assistant (embedded model when no key is set)
#   make test   set up .venv and run the whole test suite (what CI runs)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test setup lint bench

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh "$(PYTHON)" "$(VENV)"
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(PY) -m chatagent gui $(ARGS)

test: setup
	bash scripts/test.sh "$(VENV)"

lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: setup
	for b in bench/*.py; do $(PY) $$b || exit 1; done
