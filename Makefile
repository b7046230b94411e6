# Three commands on a fresh machine with Python >= 3.11, pip and make:
#   make demo   set up .venv and run one probe cycle on the bundled demo pool
#   make test   set up .venv with the test extras and run the whole suite
#   make check  lint, format check and strict type check (the tools are pinned in the test extras)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo demo-usage test check browser apel-server gratia-judges bench bench-quick clean

# Re-installs only when pyproject.toml changes, so re-runs are fast.
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $@

$(BIN)/.installed-test: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

# The demo pool's snapshot and history fall in these days (config/demo/, UTC).
DEMO_FROM := 2026-11-01
DEMO_TO   := 2026-11-30

demo: $(BIN)/.installed
	$(BIN)/fairacct probe once --config config/demo.toml
	$(BIN)/fairacct summarize --config config/demo.toml --from $(DEMO_FROM) --to $(DEMO_TO)
	$(BIN)/fairacct export --config config/demo.toml --from $(DEMO_FROM) --to $(DEMO_TO) --by project,user,site,month --format xlsx --out .demo/usage.xlsx
	$(BIN)/fairacct report --config config/demo.toml --from $(DEMO_FROM) --to $(DEMO_TO) --lab --out .demo/report
	@echo
	@echo "The report:  file://$(CURDIR)/.demo/report/index.html (usage against the awards of config/demo/awards.csv first; open it in a browser; nothing is fetched)"
	@echo "The export:  $(CURDIR)/.demo/usage.xlsx (usage per project, user, site and month, with totals; the awards, the capacity and APEL's view beside it; the 'columns' sheet explains each)"

# Fair usage on a real workload (MetaCentrum's wagap-2013, in ../shared): who pays more under
# the multi-resource penalty than under a CPU-only count, and the fairshare report.
WAGAP := ../shared/data/metacentrum
demo-usage: $(BIN)/.installed
	$(BIN)/fairacct penalty --swf $(WAGAP)/wagap-2013.swf --machines $(WAGAP)/wagap-2013.machines
	$(BIN)/fairacct fairshare --swf $(WAGAP)/wagap-2013.swf --machines $(WAGAP)/wagap-2013.machines

# Six workers on two cores (pytest-xdist): the live-pool tests mostly wait on their pool's daemons (a subset of
# live and CPU-bound modules at a load of 11-15: 537 s on four workers, 477 s on six).
# loadfile: a module's tests on one worker (its fixtures once), in tests/conftest.py's order (the longest first).
TEST_WORKERS ?= 6
test: $(BIN)/.installed-test
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# What pyproject.toml configures: ruff's rules and format over the whole tree, mypy --strict
# over probes/ and collector/ ([tool.mypy] files).
check: $(BIN)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The headless browser the report's page test uses (Debian's chromium; needs root). Tests never
# install anything: without it that test skips and says so.
browser:
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# APEL's own server for the tests that load fairacct's messages into it (../shared/apel): Debian's
# MariaDB (needs root) and APEL's Python dependencies (the apel-test extra). Without them those
# tests skip and say so.
apel-server: $(BIN)/.installed-test
	command -v mariadbd >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server mariadb-client)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[apel-test]'

# The Gratia judges of the GRACC parity tests (tests/collector/gratia/test_condor_ap_judge.py): GRACC's
# own collector code built as ../shared/gratia/graccjson (Debian's golang-go, needs root; built offline) and
# the venv OSG's real condor-ap probe runs in (htcondor 24.x, the last with the v1 bindings it imports,
# and pyOpenSSL). Tests never download anything: without these they skip and say so.
GRATIA_SHARED := ../shared/gratia
gratia-judges:
	command -v go >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go)
	$(GRATIA_SHARED)/graccjson/build.sh $(CURDIR)/.gratia/graccjson-build
	$(PYTHON) -m venv .gratia/venv
	.gratia/venv/bin/python -m pip install --quiet --disable-pip-version-check 'htcondor>=24,<25' pyOpenSSL

# Speed targets, run on demand (never part of `make test`): one table of each benchmark's CPU
# beside its anchor in the same run, the ratio against its target, PASS/FAIL (benchmarks/README.md).
# bench-quick: the same rows on smaller inputs, under 3 minutes. E.g. BENCH_ARGS="--old faeff88
# --json bench.json" also measures an earlier revision and writes the table as JSON.
BENCH_ARGS ?=
bench: $(BIN)/.installed-test
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)

bench-quick: $(BIN)/.installed-test
	$(BIN)/python benchmarks/run.py --quick $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .demo
