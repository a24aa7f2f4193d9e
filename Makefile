# One place for set-up and the everyday commands. `make demo` and `make test` work on a fresh clone
# with only python3: they create .venv, install the pinned CPU torch and the package, then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The compatibility run: a fast subset of the tests on a second torch (the newest pip may install here;
# a CUDA build that runs on the CPU, 5.4 GB, about 70 s to install from this machine's disk; where it is
# not on disk pip downloads it: `make test COMPAT_TORCH=` skips the run). One venv per release; its own
# constraints file (PIP_CONSTRAINT) stands in for any global one that caps torch below the release asked
# for (`make compat COMPAT_TORCH=2.15.0`).
COMPAT_TORCH ?= 2.14.1
COMPAT       := .venv-compat-$(COMPAT_TORCH)
COMPAT_STAMP := $(COMPAT)/.installed-$(COMPAT_TORCH)
# real libraries where their releases for that torch install (tests/test_libraries.py): torchvision from
# this machine's disk, and ultralytics, which needs it (the dev set-up has torchao; PyPI's torchvision does
# not import beside its torch)
# and the libraries of issue 62's advice cases (pure Python: tests/targets/ecosystem_targets.py, the `ecosystem` extra)
ECOSYSTEM := torch_geometric==2.8.1 kornia==0.9.0 monai==1.6.1 torchdiffeq==0.2.5 gpytorch==1.15.2 nnAudio==0.3.4 litgpt==0.5.13 e3nn==0.6.0
COMPAT_LIBRARIES := $(if $(filter 2.14.1,$(COMPAT_TORCH)),torchvision==0.29.1 torchao==0.18.0 ultralytics==8.4.190 $(ECOSYSTEM),)

.PHONY: demo test test-fast compat check lint schema bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ctc-doctor demo

# the package's bytecode written first: with PYTHONDONTWRITEBYTECODE set, each of the suite's ~200 child
# processes would compile the sources again (0.35 s each here)
test: $(STAMP)
	$(BIN)/python -m compileall -q ctc_doctor
	$(BIN)/python -m pytest -n 2 --dist loadfile -q
ifneq ($(COMPAT_TORCH),)
	$(MAKE) --no-print-directory compat
endif

# the inner loop: the tests marked `fast`, none runs a live torch.compile or analysis (docs/development.md#test-tiers)
test-fast: $(STAMP)
	$(BIN)/python -m compileall -q ctc_doctor
	$(BIN)/python -m pytest -n 2 --dist loadfile -q -m fast

$(COMPAT_STAMP): pyproject.toml constraints.txt
	@test -n "$(COMPAT_TORCH)" || { echo "make compat: COMPAT_TORCH is empty (e.g. COMPAT_TORCH=2.14.1)"; exit 2; }
	test -x $(COMPAT)/bin/python || $(PYTHON) -m venv $(COMPAT)
	grep -v '^torch==' constraints.txt > $(COMPAT)/constraints.txt
	echo 'torch==$(COMPAT_TORCH)' >> $(COMPAT)/constraints.txt
	PIP_CONSTRAINT=$(COMPAT)/constraints.txt $(COMPAT)/bin/python -m pip install -q torch==$(COMPAT_TORCH)
	PIP_CONSTRAINT=$(COMPAT)/constraints.txt $(COMPAT)/bin/python -m pip install -q -e . pytest pytest-xdist numpy $(COMPAT_LIBRARIES)
	touch $(COMPAT_STAMP)

# the zoo's analysis and the report contract on torch $(COMPAT_TORCH) (tests marked `compat`)
compat: $(COMPAT_STAMP)
	$(COMPAT)/bin/python -m pytest -n 2 --dist loadfile -q -m compat -p no:cacheprovider \
		tests/test_fixtures_zoo.py tests/test_reports.py tests/test_capture.py tests/test_libraries.py

# ruff (style, and formatting at the configured line length), mypy on the package, the import contracts
lint: $(STAMP)
	$(BIN)/python -m ruff check ctc_doctor tests benchmarks
	$(BIN)/python -m ruff format --check ctc_doctor tests benchmarks
	$(BIN)/python -m mypy ctc_doctor
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
	rm -rf $(VENV) $(COMPAT) .pytest_cache .ruff_cache *.egg-info
