# One place for set-up and the everyday commands. `make demo` and `make test` work on a fresh clone
# with only python3: they create .venv, install the pinned CPU torch and the package, then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test check lint schema bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ctc-doctor demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile -q

lint: $(STAMP)
	$(BIN)/python -m ruff check ctc_doctor tests benchmarks
	$(BIN)/lint-imports

check: lint test

schema: $(STAMP)
	$(BIN)/ctc-doctor schema > ctc_doctor/reports/report.schema.json
	$(BIN)/ctc-doctor schema --sweep > ctc_doctor/sweep/summary.schema.json

bench: $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,bench]'
	$(BIN)/python benchmarks/analysis_overhead.py
	$(BIN)/python benchmarks/bisect_cost.py
	$(BIN)/python benchmarks/tui_open.py
	$(BIN)/python benchmarks/ingest_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
