# Two commands do everything on a fresh clone: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
# The benchmarks get their own venv: the peers they install (Celery, Procrastinate) stay out of
# the environment the tests and linters run in.
BENCH_VENV  := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed-bench

.PHONY: run test lint fmt clean bench bench-check

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The tour's examples need a command (python3) and a container image (alpine) besides python:
# a worker runs neither unless told to (docs/worker_policy.md), so the tour says so explicitly.
run: $(STAMP)
	$(BIN)/tickwheel server --definitions examples/definitions \
		--command python3 --container-image 'docker.io/library/alpine:*'

# Two xdist workers (the CI machine has two cores), each test file on one worker and the
# real-process tests on one worker in turn (tests/xdist_schedule.py).
# TEST_ARGS to change, e.g. make test TEST_ARGS='-n 0' for one process.
TEST_ARGS ?= -n 2
test: $(STAMP)
	$(BIN)/python -m pytest -q -rs --durations=25 --dist loadfile $(TEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy
	$(BIN)/lint-imports

fmt: $(STAMP)
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

$(BENCH_STAMP): pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

# B1-B5 at full size, 3 runs each (hours on 2 cores, and a 10 M-row backlog database kept
# for B4); BENCH_ARGS to change, e.g. make bench BENCH_ARGS='--n 5000 --backlog 200000 --runs 1'.
bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m bench all $(BENCH_ARGS)

# The peers' adapters (PgQueuer, Procrastinate, Celery, APScheduler) need the bench extra, which
# the test venv leaves out: their tests run here, in the bench venv, and CI runs this too so that
# they never skip there.
BENCH_DEV_STAMP := $(BENCH_VENV)/.installed-bench-dev
$(BENCH_DEV_STAMP): $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[bench,dev]'
	touch $(BENCH_DEV_STAMP)

bench-check: $(BENCH_DEV_STAMP)
	$(BENCH_VENV)/bin/python -m pytest -q -rs -p no:xdist tests/bench

clean:
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache
