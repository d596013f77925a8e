# The two commands of the README: `make demo` runs the platform (broker, Airflow UI, streaming
# jobs, traffic; `tideline platform`), `make test` runs the tests.
# Both set up what is missing first: Java 17 (apt), the venv at .venv, pinned packages.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint bench soak clean

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml infra/setup.sh
	@bash infra/setup.sh
	@touch $(STAMP)

demo: setup
	$(VENV)/bin/tideline platform

test: setup
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q --durations=30

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	$(PY) -m bench.pipeline_throughput

# An hour of `tideline platform` on the embedded broker: record batches per partition, jobs'
# progress, broker RSS/CPU, hours until the broker degrades (BENCHMARKS.md, platform soak).
soak: setup
	$(PY) -m bench.platform_soak

clean:
	rm -rf lake .pytest_cache
