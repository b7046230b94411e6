# Two commands on a fresh machine with Python >= 3.11, pip and make:
#   make demo   set up .venv and run one probe cycle on the bundled demo pool
#   make test   set up .venv with the test extras and run the whole suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test bench clean

# Re-installs only when pyproject.toml changes, so re-runs are fast.
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $@

$(BIN)/.installed-test: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/fairacct probe once --config config/demo.toml

test: $(BIN)/.installed-test
	$(BIN)/python -m pytest -q

# Speed and memory targets, run on demand (never part of `make test`); each prints PASS/FAIL.
bench: $(BIN)/.installed-test
	-$(BIN)/python benchmarks/bench_readers.py
	-$(BIN)/python benchmarks/bench_accounting.py
	-$(BIN)/python benchmarks/bench_usage.py
	-$(BIN)/python benchmarks/bench_store.py
	-$(BIN)/python benchmarks/bench_sinks.py

clean:
	rm -rf $(VENV) .demo
