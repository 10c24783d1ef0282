# The course's two commands (see README.md):
#   make lab    install everything into .venv, then open JupyterLab on notebooks/
#   make test   install everything into .venv, then run every test (unit tests and notebooks)
# Only Python 3.11 (or newer) with pip is needed beforehand.

PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
PORT ?= 8888
BIN := $(VENV)/bin
# Reinstall when the dependency files change.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)
PYTEST_WORKERS ?= 2

.PHONY: install lab test unit notebooks learner clean
# nbmake's per-cell timeout (seconds); notebooks on CPU are designed to take well under it
NB_TIMEOUT ?= 300

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch==$(TORCH_VERSION)" -e ".[course,test]"
	rm -f $(VENV)/.installed-*
	touch $@

lab: install learner
	$(BIN)/jupyter lab --notebook-dir=notebooks --port=$(PORT) $(LAB_ARGS)

# Every test: helpers' unit tests and every notebook (full and learner copies) under nbmake.
test: install learner
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --nbmake --nbmake-timeout=$(NB_TIMEOUT) tests notebooks

# Learner copies (solutions replaced by prompts) in notebooks/learner/, regenerated every time.
learner: install
	$(BIN)/python -m helpers.learner

notebooks: install learner
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --nbmake --nbmake-timeout=$(NB_TIMEOUT) notebooks

unit: install
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) tests

clean:
	rm -rf $(VENV) .pytest_cache notebooks/learner site test-output
