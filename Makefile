# Two commands for a fresh clone:
#   make run    set up .venv and start the web UI with an Assistant (embedded model when no key is set)
#   make test   set up .venv and run the whole test suite (what CI runs)
# and: make chat / make serve (the terminal chat, the OpenAI-compatible server; options in ARGS='...'),
#      make docs (the manual as a website in site/), make bench, make lint
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test setup lint bench docs chat serve

$(STAMP): pyproject.toml scripts/setup.sh tests/support/agui_client/package-lock.json
	bash scripts/setup.sh "$(PYTHON)" "$(VENV)"
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(PY) -m chatagent gui $(ARGS)

# the other two commands of `chatagent` (also .venv/bin/chatagent: the venv is not on PATH unless activated)
chat: setup
	$(PY) -m chatagent chat $(ARGS)

serve: setup
	$(PY) -m chatagent serve $(ARGS)

test: setup
	bash scripts/test.sh "$(VENV)"

# the manual as a website in site/ (MkDocs, offline, --strict: a broken link or API name fails it)
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
	$(VENV)/bin/basedpyright -p . --pythonpath $(PY)

# every benchmark, i.e. bench/*.py but the helpers: _*.py (shared code) and qa_*.py (Qwen-Agent's side of a
# benchmark, run by it with arguments inside Qwen-Agent's own venv)
BENCHES := $(filter-out bench/_% bench/qa_%,$(sort $(wildcard bench/*.py)))

bench: setup
	for b in $(BENCHES); do $(PY) $$b || exit 1; done
