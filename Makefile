# Two commands a new user needs (README, Quickstart):
#   make book   set everything up, run the reproduction and build the book (executes every notebook)
#   make test   set everything up and run the whole test suite (what CI runs)
# Everything lives in ./.venv, built from pyproject.toml with the exact pins of constraints.txt.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)

# The offline copy of the benchmarks that sits beside the repository on the project's machines.
# Users elsewhere need nothing: the loaders download into ~/.cache/minitorch_proto.
# load_pathology also looks in the sibling folder ../shared/data/pathology (UCSB breast cancer).
SHARED_DATA := $(abspath ../shared/data/mil)
ifneq ($(wildcard $(SHARED_DATA)/Musk1.csv),)
export MINITORCH_PROTO_DATA ?= $(SHARED_DATA)
endif

.PHONY: setup test book reproduce browser lab clean help
.DEFAULT_GOAL := help

help:
	@echo "make book       set up, then build the executable book (notebooks run with full settings)"
	@echo "make test       set up, then run every test (unit, notebooks via papermill, book build, browser)"
	@echo "make reproduce  set up, then 5x10-fold CV on the five benchmarks -> results/"
	@echo "make lab        set up, then open the notebooks in JupyterLab"

setup: $(STAMP)

$(STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --progress-bar off -q --upgrade pip
	$(BIN)/python -m pip install --progress-bar off -q -c constraints.txt -e ".[test,book]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (minitorch_proto)" >/dev/null
	rm -f $(VENV)/.installed-*
	touch $@

# Debian's Chromium for the browser test of the built book (no download of a browser build).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Two workers, each taking whole test modules (--dist loadscope): a module's shared fixtures, such as the
# quick book build, are made once, and the unit tests run beside the book's on the second core
# (805 s against 1,014 s in one process, 2026-11-26).
test: setup browser
	$(BIN)/python -m pytest -q -n 2 --dist loadscope -p no:cacheprovider

reproduce: setup
	$(BIN)/minitorch-proto reproduce --methods prototype,prototype-compat --out results

book: setup
	$(BIN)/python tools/build_book.py

lab: setup
	$(BIN)/jupyter lab notebooks/

clean:
	rm -rf _build results .pytest_cache
