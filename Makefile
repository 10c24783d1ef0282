# The course's two commands (see README.md):
#   make lab    install everything into .venv, then open JupyterLab on notebooks/, in the learner copies
#   make test   install everything into .venv, then run every test (unit tests, notebooks, browser)
# Only Python 3.11 (or newer) with pip is needed beforehand.

PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
# The CPU build of torch brings no Triton (CUDA builds bring their own): the course's kernels need
# it, on CPU through its interpreter, so `make install` adds this version when torch did not.
TRITON_VERSION ?= 3.9.0
PORT ?= 8888
BIN := $(VENV)/bin
# Reinstall when the dependency files change.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile requirements.lock requirements-space.lock | cksum | cut -d' ' -f1)
# HASHES=1 (the Space's image): the lock is installed from requirements-space.lock, every wheel checked
# against its SHA-256 (pip --require-hashes); those hashes are of the Linux x86_64 CPython 3.11 wheels.
HASHES ?=
LOCK_INSTALL := $(if $(filter 1,$(HASHES)),--require-hashes --only-binary=:all: -r requirements-space.lock,-r requirements.lock)
PYTEST_WORKERS ?= 2
# Tests run in a new random order each time (pytest-randomly prints the seed): `make test SEED=N` replays one.
SEED ?=
RANDOM_ORDER := $(if $(SEED),--randomly-seed=$(SEED),)
SITE_DIR ?= site
SITE_NOTEBOOKS ?=
CHROMIUM ?= /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# JupyterLab refuses to start as root (a container, a cloud VM) unless told it may.
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
# Learner copies the tests run: generated afresh here, never the learner's own in notebooks/learner.
LEARNER_TEST_DIR ?= build/learner-test
# The lesson `make learner-reset NB=03` regenerates (its old copy is backed up first).
NB ?=

# The GPU test command (`make test-gpu`): unit tests and every notebook on a CUDA machine, notebooks four at a
# time as a workshop shares a GPU. GPU_PY=python3 uses a machine's own CUDA build of torch instead of .venv.
GPU_PY ?= $(BIN)/python
GPU_WORKERS ?= 8
GPU_NOTEBOOK_WORKERS ?= 4

.PHONY: install lab test test-gpu unit notebooks learner learner-reset learner-test browser browser-deps site clean
# nbmake's per-cell timeout (seconds); notebooks on CPU are designed to take well under it
NB_TIMEOUT ?= 300

install: $(STAMP)

# torch first (a CUDA build brings triton and CUDA libraries; the CPU build gets TRITON_VERSION),
# then the exact versions of everything else (requirements.lock, written by
# scripts/lock_environment.py), then the course package itself.
$(STAMP): pyproject.toml Makefile requirements.lock requirements-space.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch==$(TORCH_VERSION)"
	$(BIN)/python -c "import triton" 2>/dev/null || $(BIN)/python -m pip install --quiet "triton==$(TRITON_VERSION)"
	$(BIN)/python -m pip install --quiet $(LOCK_INSTALL)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $@

# JupyterLab serves notebooks/ (the full lessons, with solutions) and opens on notebooks/learner/
# (your copies: the ones you work in).
lab: install learner
	$(BIN)/jupyter lab --notebook-dir=notebooks --LabApp.default_url=/lab/tree/learner --port=$(PORT) $(ROOT_FLAG) $(LAB_ARGS)

# Every test: the repository's habits (pre-commit: notebooks without outputs, ruff lint and format);
# helpers' unit tests and every notebook (the lessons and freshly generated learner copies, never the
# ones in notebooks/learner: those are a learner's work) under nbmake, in parallel; then
# the course in JupyterLab in headless Chromium (tests/browser), on its own: one server and one
# browser at a time, not competing with nbmake for the CPU. All always run; the target fails if any
# failed. Screenshots go to test-output/.
test: install learner-test
	status=0; \
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pre-commit run --all-files --show-diff-on-failure || status=1; \
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not browser" $(RANDOM_ORDER) --durations=25 --nbmake --nbmake-timeout=$(NB_TIMEOUT) \
		--ignore=notebooks/learner tests notebooks $(LEARNER_TEST_DIR) || status=1; \
	$(BIN)/python -m pytest -m browser tests/browser || status=1; \
	exit $$status

# Every unit test and every notebook (lessons and fresh learner copies) on a CUDA GPU; browser tests are
# the CPU suite's. Installs .venv only when GPU_PY is its python.
test-gpu: $(if $(filter $(BIN)/python,$(GPU_PY)),install)
	@$(GPU_PY) -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'make test-gpu needs a CUDA GPU: use make test here')"
	rm -rf $(LEARNER_TEST_DIR)
	$(GPU_PY) scripts/make_learner_copies.py --dest $(LEARNER_TEST_DIR) --fresh
	status=0; \
	$(GPU_PY) -m pytest -n $(GPU_WORKERS) -m "not browser" $(RANDOM_ORDER) tests || status=1; \
	$(GPU_PY) -m pytest -n $(GPU_NOTEBOOK_WORKERS) --nbmake --nbmake-timeout=$(NB_TIMEOUT) --ignore=notebooks/learner \
		notebooks $(LEARNER_TEST_DIR) || status=1; \
	exit $$status

# Learner copies (solutions replaced by prompts) in notebooks/learner/: the missing ones are created,
# existing ones are the learner's and never overwritten (notebooks/learner may be a symbolic link).
learner: install
	$(BIN)/python scripts/make_learner_copies.py

# A fresh copy of one lesson, e.g. `make learner-reset NB=03`: the old copy goes to notebooks/learner/backups/.
learner-reset: install
	@test -n "$(NB)" || { echo "say which lesson: make learner-reset NB=03" >&2; exit 2; }
	$(BIN)/python scripts/make_learner_copies.py --force $(NB)

# Learner copies for the tests, generated afresh in a scratch folder.
learner-test: install
	rm -rf $(LEARNER_TEST_DIR)
	$(BIN)/python scripts/make_learner_copies.py --dest $(LEARNER_TEST_DIR) --fresh

notebooks: install learner-test
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --nbmake --nbmake-timeout=$(NB_TIMEOUT) --ignore=notebooks/learner \
		notebooks $(LEARNER_TEST_DIR)

unit: install
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not browser" tests

# Only the browser tests (JupyterLab and the rendered site in headless Chromium).
browser: install
	$(BIN)/python -m pytest -m browser tests/browser

# Debian's Chromium for the browser tests (the tests drive it with Playwright; no browser download).
browser-deps:
	@command -v $(CHROMIUM) >/dev/null 2>&1 || { \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; }
	$(CHROMIUM) --version

# The whole course executed and rendered to static HTML in $(SITE_DIR)/ (index.html links every lesson);
# `make site SITE_NOTEBOOKS=notebooks/00_*.ipynb` renders only some.
site: install
	$(BIN)/python scripts/build_site.py --out $(SITE_DIR) --timeout $(NB_TIMEOUT) $(SITE_NOTEBOOKS)

clean:
	rm -rf $(VENV) .pytest_cache site test-output $(LEARNER_TEST_DIR)
	@echo "notebooks/learner/ (your own copies) is kept: remove it yourself if you mean to"
