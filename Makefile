# Sharding in JAX — every command a reader, an instructor or CI needs. See README.md.
#   make book       build and execute the book into _build/html (creates .venv on first use)
#   make sources    regenerate each .ipynb from its MyST source: book/*.md, solutions/*/*.md
#   make test       everything CI checks, then a table of where the time went
#   make site-check the built site in Chromium at desktop and phone sizes (failures' screenshots: _build/screenshots)
#   make learner-path a Colab learner's path, setup cell to grade, on each of Colab's runtimes (tools/colab_runtimes.toml)
#   make pdf        the built site printed by Chromium into one file: _build/html/sharding-in-jax.pdf (after make book)
#   make exercises  regenerate solutions/*/*.ipynb from their .md, then exercises/ from them
#   make grade ASSIGNMENT=01_meshes SUBMISSIONS=path/to/downloads [JOBS=2] [ENGINE=ray] [UNSANDBOXED=1]
#   make regrade ASSIGNMENT=01_meshes  grade the stored submissions again; prints whose scores changed
#   make export ASSIGNMENT=01_meshes FORMAT=canvas|gradescope|csv [ROSTER=...]  scores for an LMS to import
#   make feedback-export ASSIGNMENT=01_meshes [ROSTER=...]  one comment + page per learner, zipped for an LMS
#   make bench      cost-model estimates next to published TPU measurements; make bench-grading: grading speed
#   make tpu-cache  run the book and the TPU tests, then keep only the programs compiled for a TPU they used
#   make bench-hosts  how often a 2-process run of shardbook.hosts fails to end (RUNS=40; OLD=1: the old ending)
#   make mutants    mutation testing of the graders (ASSIGNMENT=, SAMPLE=N, JOBS=); reports in _build/mutants

SHELL := /bin/bash
.DEFAULT_GOAL := help

# A Python >= 3.12: $(PYTHON) if given, else the first suitable interpreter found.
# pyenv's shims answer only for the selected version, so each version pyenv has is asked by name.
PYTHON ?= $(shell for p in python3.13 python3.12 python3 $$(command -v pyenv >/dev/null 2>&1 && \
	for v in $$(pyenv versions --bare 2>/dev/null); do PYENV_VERSION=$$v pyenv which python3 2>/dev/null; done); do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null \
	&& { command -v $$p; break; }; done)
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
export PATH := $(BIN):$(PATH)
export PYTHONPATH := $(CURDIR)
# Python keeps each module's bytecode (__pycache__/, ignored by git) even where the caller's environment
# says not to (PYTHONDONTWRITEBYTECODE, set in some containers): without it, every import of this
# repository's modules compiles them again, and the graders re-import grading/ and shardbook/ before
# every test cell (grading.preprocessors.HardenTests), pytest rewrites every test module in each worker.
# The unit tests took 450 -> 426 s of CPU (in-process gradings 167 -> 150 s; one run each, 2026-12-07).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: help venv system-packages book pdf pdf-check test lint unit notebooks sources chapters exercises check-exercises leaks site-check learner-path grade regrade export feedback-export bench tpu-cache bench-grading bench-hosts mutants clean

help:
	@sed -n '2,/^$$/p' Makefile | sed -e '/^$$/d' -e 's/^# *//'  # the comment block above, whole

$(VENV)/.installed: requirements.txt pyproject.toml
	@if [ -z "$(PYTHON)" ]; then echo "Python 3.12 or newer is needed: install it, or run make PYTHON=/path/to/python3.12"; exit 1; fi
	@echo "Creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version))"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q -e .
	$(PY) -m pip install -q -e ".[tpu]" || echo "The TPU compiler (libtpu) could not be installed here: \
	chapters read the programs compiled for a TPU from shardbook/data/tpu_compiled and say which one is missing."
	touch $@

venv: $(VENV)/.installed

# Chapters executed by `make notebooks` are not executed again: their outputs come from the execution
# cache it filled (tools/execution_cache.py). A second `make book` with nothing changed reads no page.
# env -u: a matplotlib backend set in the caller's environment (MPLBACKEND=Agg) would reach the kernels
# and turn every figure into "<Figure size ...>" text; the kernels' own inline backend draws images.
book: venv
	env -u MPLBACKEND SHARDBOOK_PHONE_FIGURES=1 $(BIN)/jupyter-book build . -W -n --keep-going --builder html
	cp _static/* _build/html/_static/  # a build with no page out of date does not copy a changed one
	@echo "Open $(CURDIR)/_build/html/index.html"

# actionlint reads every workflow of .github/workflows (expressions, action inputs, job graph); shellcheck
# and pyflakes on their run: scripts are off, so that the result is the same on a machine without them.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/actionlint -shellcheck= -pyflakes=

# Its own temporary folder: pytest prunes old numbered folders in /tmp/pytest-of-$USER, including those
# of another pytest session still running on the machine (a grading test then loses its course).
# One pytest worker per core (pytest-xdist); the tests that run `make grade` share one worker
# (xdist_group "grading"), the rest are spread. UNIT_JOBS=0 runs everything in this process.
# Every test's time is kept in _build/unit-times.xml (JUnit XML), to find what to make cheaper.
UNIT_JOBS ?= 2
unit: venv
	mkdir -p _build
	$(BIN)/pytest -q --durations=15 --junitxml=$(CURDIR)/_build/unit-times.xml --basetemp=$(CURDIR)/_build/pytest $(if $(filter-out 0,$(UNIT_JOBS)),-n $(UNIT_JOBS) --dist loadgroup)

# Chapters executed two at a time, the longest (chapter 11) first. Clean clone, quiet 2-core machine,
# three lanes (2026-12-03): make test 690 s with 2; 723 s with 1 (unit 580 s, but the chapters 567 s
# and the machine idle 17% of the run). CHAPTER_JOBS=1 runs them one by one.
CHAPTER_JOBS ?= 2

notebooks: venv
	$(PY) tools/notebooks.py sources --check
	$(PY) tools/notebooks.py hygiene
	$(PY) tools/notebooks.py points
	$(PY) tools/notebooks.py run --chapters --jobs $(CHAPTER_JOBS)
	$(PY) tools/notebooks.py prose

# One harness for "MyST source -> committed .ipynb": chapters (book/*.md) and assignments
# (solutions/*/*.md). `make chapters` is its name from before assignments had sources.
sources chapters: venv
	$(PY) tools/notebooks.py sources
	@echo "every .ipynb of book/ and solutions/ regenerated from its .md; commit them."

exercises: sources
	rm -rf exercises.new && mkdir exercises.new
	$(PY) -c "from pathlib import Path; from tools import notebooks; notebooks.generate_exercises(Path('exercises.new').resolve())"
	rm -rf exercises && mv exercises.new exercises
	@echo "exercises/ regenerated from solutions/; commit it."

check-exercises: venv
	$(PY) tools/notebooks.py exercises

leaks: venv
	$(PY) tools/notebooks.py leaks --require-html

# A fresh Colab-like runtime per Colab runtime of tools/colab_runtimes.toml (each built once per machine:
# ~/.cache/shardbook/) runs assignment 1's setup cell and answers; on the first, the Colab-shaped download
# must get full marks and assignment 11 follows. Needs PyPI only. LEARNER_PATH_FLAGS: e.g. --runtime latest
# --preinstalled-jax newest (the weekly canary, .github/workflows/canary.yml).
learner-path: venv
	$(PY) tools/learner_path.py $(LEARNER_PATH_FLAGS)

# The whole book in one PDF, printed from the built site by the site check's Chromium (tools/pdf.py):
# a table of contents, page numbers, every figure, code wrapped at A4 and Letter width, quiz answers at
# their chapter's end. PAPER=letter for US Letter. `make pdf-check` reads it back (make test does).
pdf: venv
	$(PY) tools/pdf.py build $(if $(PAPER),--paper $(PAPER))

pdf-check: venv
	$(PY) tools/pdf.py build --check

# The browser check of the built site. Without Chromium it fails loudly; outside CI,
# `make test SITE_CHECK_FLAGS=--allow-no-browser` lets it pass with a warning.
site-check: venv
	$(PY) tools/site_check.py $(SITE_CHECK_FLAGS)

# Three lanes side by side on 2 cores: the tests; the book's execution and the checks that read the
# built book; lint and the learner's path (mostly pip and a kernel, waiting on the network and on disk).
# First, on a still quiet machine, the Ray cluster the grading engine's tests use. A lane stops at its
# first failure; tools/run_steps.py prints each step's log as it ends, then a table of seconds per
# step, the wall time and the CPU time.
# Quiet clean-clone runs (2026-12-03): two lanes (lint and unit; the rest) took 714 s, ray 21 + lint 29
# + unit 620 s against notebooks 406 + check-exercises 38 + book 15 + leaks 4 + site-check 88 +
# learner-path 122 s; these three 643-690 s (unit 602-649 s, notebooks 421-464 s). Three unit workers
# took 723 s (75 s more CPU). The machine is busy throughout (92-100%, the table's last line): the run
# is as long as its CPU time over 2 cores. Then, as CPU was cut (jsonschema's import; the phone
# figures' drawings and the spinning loop in two tests; the nbgrader server's warm-up): 598, 566 and
# 527 s (unit 566, 533, 505 s; the machine 1,101, 1,038, 992 s busy). With the PDF and two Colab
# runtimes, on a machine shared by 8 engineers (load 17 on 2 cores, 2026-12-06): 2,703 s wall, 1,256 s
# CPU (unit 572, notebooks 389 with every chapter executed, check-exercises 42, site-check 39,
# pdf-check 48, learner-path 121 with the 26.07 stand-in built once, lint 15). Then test_parity read the
# reference solutions' one in-process grading instead of running their test cells again, the three
# hostile `make grade` batches became one and two tests that graded a solution again went: the unit
# tests alone (`pytest -n 2 --dist loadgroup`, /usr/bin/time, user + sys, this shared machine, the
# tests starting their own Ray cluster) took 553 and 570 s of CPU in two runs, against 723 s just before
# (2026-12-06).
# The merged tree after that, chapters executed from a clean cache (the helper package had changed), the
# machine otherwise quiet (2026-12-06): 891 s wall, 1,272 s CPU (unit 666, notebooks 373, learner-path
# 85, pdf-check 49, check-exercises 38, site-check 37, book 13, ray 8): over the 900 s of CPU issue 49
# asks for; chapter 11's layout table (16 XLA:CPU compiles, about 65 s) is the largest single piece left.
# Then shardbook.comms.analyze compiled its copy without the CPU passes only where a pass acted (bf16,
# combined all-reduces): unit tests alone as above, 626 -> 563 s of CPU, one run each on a shared
# machine (test_parity 231 -> 188 s); A/B per in-process grading: 06_moe 18.9 -> 16.0 s (2026-12-06).
# With that, the tests sharing one Chromium per process (the browser tests 86 -> 63 s of CPU), the
# analyzer's never-run copies at LLVM -O0 and chapter 11 lowering its CPU steps once (~9 s): make test
# on this tree, chapters executed from a clean cache, machine otherwise quiet (2026-12-06): 774 s wall,
# 1,037 s CPU (unit 547, notebooks 297, learner-path 73, site-check 36, check-exercises 33, pdf-check
# 29, book 12, ray 8); the run before was on a busier machine, so not all of the 235 s is these
# changes (their own A/B figures add up to about 55 s). Still over the 900 s issue 49 asks for.
# Then the multi-host workers forked from one Python that imported JAX (shardbook/workers.py; the
# multi-host tests 87 -> 56 s of CPU) and the phone figures measured without painting (chapters' figures
# 28 -> 17 s), with the cost model's new rules and 17 more fitted programs: make test, chapters executed
# again (the helper package had changed), on a machine busy with other work throughout (98% busy, 2,273
# s of CPU in 1,163 s), 2026-12-06: 1,064 s CPU (unit 560, notebooks 300, learner-path 71,
# check-exercises 37, site-check 36, pdf-check 30, book 14, ray 12): under such load a process's CPU
# time runs high, so this says little against the quiet 1,037 s above. Again from a clean chapter cache,
# the machine 100% busy (2,629 s of CPU in 1,316 s): 1,096 s (unit 565, notebooks 318, learner-path 75,
# site-check 40, check-exercises 40, pdf-check 34, book 14, ray 8).
# With the unit tests compiling through the session's JAX cache (cache51) and the cost model's rules of
# 2026-12-06 evening, on a machine whose other tenants used 480-610 s of CPU during every run (nothing
# else of ours running): chapters executed again, 1,334 s (unit 629, notebooks 379, ray 94); then,
# chapters re-executed, 1,140 s (unit 593, notebooks 323); then 899 s (unit 520, notebooks 172), but
# with three chapters (appendix A, B, 11, about 100 s) already executed into the cache before the run,
# so not a cold run. Then, every chapter but appendix A executed again (the helper had changed), the
# machine 94% busy (491 s of other CPU): 806 s wall, 1,028 s CPU (unit 543, notebooks 282,
# learner-path 68, check-exercises 41, site-check 38, pdf-check 31, book 15, ray 8): still over the
# 900 s of issue 49. At 15971c4, every chapter executed again, machine 95% busy (414 s of other CPU):
# 722 s wall, 950 s CPU (unit 483, notebooks 286, learner-path 68, pdf-check 29, site-check 33,
# check-exercises 31, book 11, ray 7).
# With cpu52 merged (db6716c: bytecode kept, mutants dumped once and made on one worker, the tests' own
# CPU compiles at LLVM -O0 sharing the in-process gradings' cached programs) and the cost model's rules
# of 2026-12-07, chapters executed again, machine 94% busy: 671 s wall, 893 s CPU (unit 443, notebooks
# 276, learner-path 63, check-exercises 31, site-check 31, pdf-check 28, book 12, ray 7; one test
# failed, intro's minutes). At f43011d, the execution cache moved aside (every chapter executed),
# machine 95% busy (about 400 s of other CPU): passed, 711 s wall, 938 s CPU (unit 475, notebooks 289,
# learner-path 59, check-exercises 36, pdf-check 32, site-check 32, book 3, ray 9). On this shared
# machine the same tree measures 890-940 s: not shown to be under the 900 s of issue 49.
# 2026-12-07 morning: at c7f4b68, every chapter executed, machine 94% busy: 930 s CPU (unit 472,
# notebooks 282). With cpu57 merged (pdftotext, papermill saving once, gradings forked from a zygote,
# Ray without log monitors, only other sites' requests intercepted) and every chapter executed, on a
# machine at load 16 (99% busy, about 1,670 s of other CPU in the run): passed, 1,352 s wall, 1,011 s
# CPU (unit 523, notebooks 313, learner-path 68, check-exercises 41, site-check 36, pdf-check 13): under
# that load a process's CPU runs high, so this run says nothing against the 900 s; measure again.
# cpu57 (2026-12-07), each change measured in pairs (user + sys, this shared machine, close in time):
# pdf-check reads the PDF back with poppler's pdftotext, not pypdf (the 408 pages' text 16 -> 1 s), and
# the site check and the PDF let the browser intercept only other sites' requests, not all ~1,900
# through a Python route (pdf-check 31 -> 13 s, site-check 35 -> 30 s); papermill writes an executed
# chapter once, not at each cell's start and end (its workers 15 -> 3 s; the 16 chapters 256 -> 238 s);
# the in-process gradings are forked from one Python per test process that imported JAX, nbformat and
# the graders (tests/zygote.py; test_parity + test_submissions 200 -> 181 s); Ray's nodes start without
# a log monitor (about 100 s of CPU a run, which the table never counted: no step waited for them).
# make test with these, every chapter executed, while another engineer's make test shared the machine
# (93-95% busy): 993 s (unit 502, notebooks 313, learner-path 67, check-exercises 39, site-check 36,
# book 13, pdf-check 12) and, with the log monitors off, 1,012 s (unit 525, notebooks 305, learner-path
# 70, check-exercises 42, site-check 40, pdf-check 15). The tree before them (407e56c), right after, on
# a machine 98% busy: 1,157 s (ray 107, its log monitors counted this time; unit 508 with one test
# failed under the load, notebooks 324, pdf-check 31, site-check 35). Under such load every step takes
# more CPU than in the quieter runs above, so only the paired figures say what a change saved.
# 2026-12-07, a fresh machine (two AMD EPYC cores at 2.4 GHz; beside make test only light work of mine,
# yet 560-590 s of CPU a run went to processes outside the table), at 7d3bf95: the first run (venvs,
# bytecode and caches made) passed in 1,173 s wall, 1,675 s CPU; the second, every chapter executed,
# 1,113 s wall, 1,567 s CPU (unit 827, notebooks 493, learner-path 96, check-exercises 59, site-check
# 55, pdf-check 17). Against the runs above (on busier machines) unit took 1.6 to 1.9 times the CPU,
# notebooks 1.5 to 1.8, check-exercises and site-check 1.4 to 1.9, so these cores are slower and the
# 900 s cannot be read off this machine either. The table's new last line times 10 million Python additions
# (1.1 to 1.4 s of CPU here in three tries, the venv's Python 3.12): compare machines beside it. An
# hour later, on the same machine, at 77b07c5 (every chapter from the cache but appendix A): passed,
# 807 s wall, 973 s CPU (unit 701), the cores line 0.73 s before the lanes and 1.07 s after: the same
# cores' speed drifts by half over a run, so one run's CPU says little against a line like 900 s.
# Later that day, same machine, cores steady (0.82 s before the lanes, 0.86 after), with helper-35's faster
# HLO parser and the records' rows once a process: at 770b17a, every chapter executed, passed in 913 s wall,
# 1,299 s CPU (unit 655, notebooks 416, learner-path 88, check-exercises 50, site-check 44); at c80cbfb, the
# chapters from the cache, 768 s wall, 909 s CPU (unit 677, learner-path 86, check-exercises 53).
# 2026-12-07, fifth session: every "all" above left out the processes whose parent ended before them (a
# sandboxed kernel's bwrap after its grader, Chromium's renderers after the browser, a Ray node's raylet and
# the workers that graded the Ray batch): they went to init, and nothing counted them (at 9ac9701 the
# machine was 1,744 s busy against 1,282 counted). run_steps now adopts them (a child subreaper), waits for
# them at the end and prints them as a row, with the three commands that took the most. At f89886e, every
# chapter executed, cores 1.47 s before the lanes and 1.05 s after: passed, 1,151 s wall, 2,108 s CPU (unit
# 832, notebooks 530, learner-path 106, check-exercises 62, site-check 59, pdf-check 19, ray 16, book 5,
# orphans 475 in 130 processes), the machine 2,218 s busy. Again with the chapters from the cache (cores
# 1.43 and 1.23 s): 982 s wall, 1,733 s CPU, orphans 521 s (bwrap 264, chromium 221, python 23); once more
# (cores 1.10 and 1.48 s): 1,021 s wall, 1,794 s CPU (unit 914, orphans 558: bwrap 274, chromium 237). Alone
# on the quiet machine, the site check took 185 s of the machine's CPU, of which 64 s were counted before
# (in a separate run, Chromium's renderers took 99 s, its browser process 30 and its GPU process 17), and
# pdf-check 86 s (21 s counted). So make test's CPU in all is about twice the 900 s of issue 49 on this
# machine, and, adding the 460-520 s that went uncounted, about 1.5 times it on the machines of the 893-938
# s runs above, not at it as those tables read; "--disable-gpu-compositing" and
# "--disable-software-rasterizer" beside "--disable-gpu" changed nothing (180 s against 185).
TEST_LANE_1 := unit
TEST_LANE_2 := notebooks check-exercises book leaks pdf-check site-check
TEST_LANE_3 := lint learner-path

# Debian's chromium (the site check), bubblewrap (the grading sandbox) and poppler-utils (pdftotext reads
# the PDF back), what make test needs besides PyPI: installed with apt-get when run as root, else named in
# the first seconds.
system-packages:
	@$(or $(PYTHON),python3) tools/system_packages.py

test: system-packages venv
	@$(PY) tools/run_steps.py --ray-cluster "$(TEST_LANE_1)" "$(TEST_LANE_2)" "$(TEST_LANE_3)"

grade: venv
	@if [ -z "$(ASSIGNMENT)" ] || [ -z "$(SUBMISSIONS)" ]; then \
		echo "usage: make grade ASSIGNMENT=01_meshes SUBMISSIONS=path/to/folder/of/ipynb"; exit 2; fi
	$(PY) -m grading.grade $(ASSIGNMENT) $(SUBMISSIONS) $(if $(JOBS),--jobs $(JOBS)) $(if $(ENGINE),--engine $(ENGINE)) $(if $(UNSANDBOXED),--unsandboxed) \
		$(if $(COURSE),--course $(COURSE)) $(if $(TIMES),--times $(TIMES))

# After a grader changed: the submissions `make grade` kept, graded again; who gained or lost what.
regrade: venv
	@if [ -z "$(ASSIGNMENT)" ]; then echo "usage: make regrade ASSIGNMENT=01_meshes [JOBS=2] [ENGINE=ray]"; exit 2; fi
	$(PY) -m grading.grade $(ASSIGNMENT) --regrade $(if $(JOBS),--jobs $(JOBS)) $(if $(ENGINE),--engine $(ENGINE)) $(if $(UNSANDBOXED),--unsandboxed) \
		$(if $(COURSE),--course $(COURSE)) $(if $(TIMES),--times $(TIMES))

# What make grade wrote, as a file Canvas or Gradescope imports (grading/export.py says the columns).
export: venv
	@if [ -z "$(ASSIGNMENT)" ]; then echo "usage: make export ASSIGNMENT=01_meshes FORMAT=canvas|gradescope|csv [ROSTER=path]"; exit 2; fi
	$(PY) -m grading.export $(ASSIGNMENT) --format $(or $(FORMAT),csv) $(if $(ROSTER),--roster $(ROSTER)) \
		$(if $(ASSIGNMENT_NAME),--name "$(ASSIGNMENT_NAME)") $(if $(CANVAS_ASSIGNMENT),--canvas-assignment $(CANVAS_ASSIGNMENT)) \
		$(if $(COURSE),--course $(COURSE))

# What make grade wrote, handed back: one comment and one feedback page per learner (grading/comments.py).
feedback-export: venv
	@if [ -z "$(ASSIGNMENT)" ]; then echo "usage: make feedback-export ASSIGNMENT=01_meshes [ROSTER=path]"; exit 2; fi
	$(PY) -m grading.comments $(ASSIGNMENT) $(if $(ROSTER),--roster $(ROSTER))

bench: venv
	$(PY) -m benchmarks.collective_matmul

# The programs compiled for a TPU (shardbook/data/tpu_compiled, committed): every chapter executed and
# the TPU tests run, each program they compile or read noted, then only those entries kept.
tpu-cache: venv
	mkdir -p _build && rm -f _build/tpu-used.txt
	SHARDBOOK_TPU_USED=$(CURDIR)/_build/tpu-used.txt $(PY) tools/notebooks.py run --chapters --force --jobs $(CHAPTER_JOBS)
	SHARDBOOK_TPU_USED=$(CURDIR)/_build/tpu-used.txt $(BIN)/pytest -q -p no:xdist tests/test_tpu.py
	$(PY) tools/tpu_cache.py prune _build/tpu-used.txt

bench-grading: venv
	$(PY) -m benchmarks.grading_throughput --assignment $(or $(ASSIGNMENT),01_meshes) --count $(or $(COUNT),30) --rounds $(or $(ROUNDS),5) \
		$(if $(CONFIGS),--configs $(CONFIGS)) $(if $(LOUD),--loud) $(if $(UNSANDBOXED),--unsandboxed)

bench-hosts: venv
	$(PY) -m benchmarks.hosts_endings --runs $(or $(RUNS),40) $(if $(OLD),--old-ending)

mutants: venv
	$(PY) -m grading.mutants $(if $(ASSIGNMENT),--assignment $(ASSIGNMENT)) $(if $(SAMPLE),--sample $(SAMPLE)) \
		$(if $(JOBS),--jobs $(JOBS))

clean:
	rm -rf _build grading/submitted grading/autograded grading/feedback grading/reports grading/gradebook.db
