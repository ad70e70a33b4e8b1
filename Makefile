# The two promises of the README: `make run` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench lint clean browser

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/slotmap run

# Four workers on two cores: most tests wait on real processes. Quiet fresh clones, one
# 2-core box: two workers 8:51 (35% of the CPU idle), three 6:44, four 6:15; a faster
# 2-core box: three 4:50 (33% idle), four 4:32 (16% idle). Four stayed green three times
# in a row under ../shared/tools/test-under-load (bench/RESULTS.md has the runs).
# Files longest first (tests/file_order.py), not xdist's most-tests-first.
TEST_WORKERS ?= 4

# PYTHONDONTWRITEBYTECODE is unset for the run: with it, each worker rewrote every test
# module's asserts again on every run (collection 9.5 s of CPU against 3.7 s cached).
test: $(STAMP) browser
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=25

# The dashboard's browser tests drive Debian's Chromium; without it they skip and say why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "chromium could not be installed: browser tests will be skipped"; \
	  else echo "no chromium and no root: browser tests will be skipped"; fi; }

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/queue_server.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy queue_server config slot master manager admin_ui deploy

clean:
	rm -rf $(VENV) var build *.egg-info
