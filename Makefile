# Sharding in JAX — every command a reader, an instructor or CI needs. See README.md.
#   make book       build and execute the book into _build/html (creates .venv on first use)
#   make test       everything CI checks (make learner-path: a Colab learner's path, setup cell to grade)
#   make exercises  regenerate exercises/ from solutions/
#   make grade ASSIGNMENT=01_meshes SUBMISSIONS=path/to/downloads
#   make bench      cost-model estimates next to published TPU measurements; make bench-grading: grading speed

SHELL := /bin/bash
.DEFAULT_GOAL := help

# A Python >= 3.12: $(PYTHON) if given, else the first suitable interpreter found.
PYTHON ?= $(shell for p in python3.13 python3.12 /root/.pyenv/versions/3.12.1/bin/python3.12 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null \
	&& { command -v $$p; break; }; done)
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
export PATH := $(BIN):$(PATH)
export PYTHONPATH := $(CURDIR)
export MPLBACKEND := Agg

.PHONY: help venv book test lint unit notebooks exercises check-exercises leaks learner-path grade bench bench-grading clean

help:
	@sed -n '2,7p' Makefile | sed 's/^# *//'

$(VENV)/.installed: requirements.txt pyproject.toml
	@if [ -z "$(PYTHON)" ]; then echo "Python 3.12 or newer is needed: install it, or run make PYTHON=/path/to/python3.12"; exit 1; fi
	@echo "Creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version))"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q -e .
	touch $@

venv: $(VENV)/.installed

book: venv
	$(BIN)/jupyter-book build . -W -n --keep-going --builder html
	@echo "Open $(CURDIR)/_build/html/index.html"

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: venv
	$(BIN)/pytest -q

notebooks: venv
	$(PY) tools/notebooks.py hygiene
	$(PY) tools/notebooks.py run
	$(PY) tools/notebooks.py prose

exercises: venv
	rm -rf exercises.new && mkdir exercises.new
	$(PY) -c "from pathlib import Path; import sys; sys.path.insert(0, 'tools'); import notebooks; notebooks.generate_exercises(Path('exercises.new').resolve())"
	rm -rf exercises && mv exercises.new exercises
	@echo "exercises/ regenerated from solutions/; commit it."

check-exercises: venv
	$(PY) tools/notebooks.py exercises

leaks: venv
	$(PY) tools/notebooks.py leaks --require-html

# A fresh Colab-like runtime (cached in _build/learner-path/) runs assignment 1's setup cell and answers;
# its Colab-shaped download must get full marks. Needs PyPI only.
learner-path: venv
	$(PY) tools/learner_path.py --python "$(PYTHON)"

test: venv
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory lint unit notebooks check-exercises book leaks learner-path && \
	echo "make test: all checks passed in $$(( $$(date +%s) - start )) s"

grade: venv
	@if [ -z "$(ASSIGNMENT)" ] || [ -z "$(SUBMISSIONS)" ]; then \
		echo "usage: make grade ASSIGNMENT=01_meshes SUBMISSIONS=path/to/folder/of/ipynb"; exit 2; fi
	$(PY) -m grading.grade $(ASSIGNMENT) $(SUBMISSIONS) $(if $(JOBS),--jobs $(JOBS))

bench: venv
	$(PY) -m benchmarks.collective_matmul

bench-grading: venv
	$(PY) -m benchmarks.grading_throughput --assignment $(or $(ASSIGNMENT),01_meshes) --count $(or $(COUNT),30)

clean:
	rm -rf _build grading/submitted grading/autograded grading/feedback grading/reports grading/gradebook.db
