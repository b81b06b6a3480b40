# shoe-controller: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint docs docs-check bench fuzz soak venv clean deps-system deps-postgres

# Create the virtualenv and install the project (editable) with its dev tools.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "shoe-controller needs Python 3.11 or newer ($(PYTHON) is $$($(PYTHON) --version 2>&1))."; exit 1; }
	@if [ ! -x $(BIN)/python ]; then \
	  $(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      apt-get update -qq && apt-get install -y -qq python3-venv && $(PYTHON) -m venv $(VENV); \
	    else echo "Cannot create a virtualenv: install it with 'sudo apt-get install python3-venv'"; exit 1; fi; }; \
	fi
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# The integration tests start their own broker; install the binary when we can.
deps-system:
	@command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing mosquitto (the test suite runs its own broker on a free loopback port)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto mosquitto-clients socat; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto mosquitto-clients socat; \
	  else echo "MQTT tests need the mosquitto binary: install it with 'sudo apt-get install mosquitto'"; exit 1; fi; }
	@# a system-wide mosquitto service is not needed (nor used) by the tests
	@# The NATS JetStream cluster test (tests/test_nats_cluster.py) starts its own three nodes.
	@command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing nats-server (the NATS cluster test runs its own three nodes on free loopback ports)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server; \
	  else echo "The NATS cluster test needs the nats-server binary: install it with 'sudo apt-get install nats-server'"; exit 1; fi; }
	@# nor is a system-wide nats-server service (Debian's package starts one on 4222: the tests never use it)
	@# The roadmap display's browser test drives Debian's headless Chromium.
	@{ command -v chromium >/dev/null && command -v chromedriver >/dev/null; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing chromium and chromium-driver (the board's browser test)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	  else echo "The board's browser test needs Chromium and its driver: install them with" \
	    "'sudo apt-get install chromium chromium-driver' (/usr/bin/chromium, /usr/bin/chromedriver)"; exit 1; fi; }
	@true

# docs/board.png, the README's picture of the roadmap display: a whole shoe
# dealt through a real broker, the daemon and the board, shot by headless Chromium.
.PHONY: board-png
board-png: $(STAMP) deps-system
	$(BIN)/python -m tests.board_png --out docs/board.png

# The demo: the daemon on its embedded default (a fake shoe, punto banco,
# 8 decks, a new shoe each run, a dealer who errs now and then). On a terminal a line per coup; piped (make demo | jq .) the
# JSON lines. The install is quiet (its output goes to var/install.log),
# and every demo starts afresh in its own directory: its journal is the
# demo's alone, so a `run` elsewhere never loses the journal it resumes.
DEMO_DIR ?= var/demo
demo:
	@if ! $(MAKE) --no-print-directory -q $(STAMP) 2>/dev/null; then \
	  mkdir -p var; \
	  echo "Installing shoe-controller into $(VENV) (output in var/install.log)..." >&2; \
	  $(MAKE) --no-print-directory $(STAMP) >var/install.log 2>&1 || \
	    { tail -n 20 var/install.log >&2; echo "The install failed: var/install.log has it all." >&2; exit 1; }; \
	fi
	@rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	@echo "A fake shoe deals punto banco, 8 decks, a new shoe each run, with a dealer who errs now and then" >&2
	@echo "(a RESULT pressed early, an extra card, a card from another shoe): each error is flagged, then" >&2
	@echo "corrected or the coup voided, as the rules say. Ctrl-C stops it. (JSON lines: make demo | cat)" >&2
	@cd $(DEMO_DIR) && exec $(abspath $(BIN))/shoe-controller run

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The whole suite, on every core (pytest-xdist; JOBS=1 for one process):
# the tests that share a dear fixture (a daemon's whole shoe, the installed
# wheel) stay together on one worker and the long (slow) ones start first
# (tests/conftest.py), so that no worker idles at the end while another
# runs them. CI runs this, and nothing less.
# Python's bytecode cache stays on for the tests even where the environment
# turns it off (PYTHONDONTWRITEBYTECODE): else each worker rewrites and
# compiles every test module again, and each of the many shoe-controller
# processes the tests start compiles the whole program (3 times the CPU to
# collect the suite). The caches are __pycache__/ directories git ignores.
JOBS ?= auto
PYTEST_XDIST = -n $(JOBS) --dist loadgroup
PYTEST = env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest
test: $(STAMP) deps-system deps-postgres lint docs-check
	$(PYTEST) -q $(PYTEST_XDIST)

# The edit loop, under a minute: lint and types, then the fast tests on
# every core; no install, no broker or cluster, no long run (those are in
# make test). FILES="a.py b.py" lints only those; CHECK_TESTS=... picks tests.
CHECK_MARKERS ?= not slow and not install and not mqtt and not nats
CHECK_TESTS ?=
FILES ?= .
check: $(STAMP)
	$(BIN)/ruff check $(FILES)
	$(BIN)/ruff format --check $(FILES)
	$(BIN)/mypy
	$(PYTEST) -q $(PYTEST_XDIST) -m "$(CHECK_MARKERS)" $(CHECK_TESTS)

# The documentation site (mkdocs.yml, pages under docs/), built with --strict:
# a link to a missing page or anchor is an error (mkdocs.yml, validation:).
# docs-check builds into a temporary directory and keeps nothing; docs builds
# into site/ (not committed) and serves it on 127.0.0.1:8000.
docs-check: $(STAMP)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(BIN)/mkdocs build --strict --quiet --site-dir "$$tmp/site" && echo "docs: site built, every link and anchor found"

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site
	$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000

# The archive tests use the PostgreSQL on 127.0.0.1:5432 (trust auth; each
# run makes and drops its own database). Not installed or started for you:
# this says what to do on this machine (tests/support/postgres.py: install
# with apt-get, start with pg_ctlcluster <version> main start, or allow trust).
deps-postgres: $(STAMP)
	@$(BIN)/python -c 'import sys; from tests.support.postgres import unavailable; m = unavailable(); m and print("make test:", m, file=sys.stderr); sys.exit(bool(m))'

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The long soak and fault campaign (tests/soak): >= 10,000 coups against a real broker;
# then the dealer model (tests/dealer_model.py): >= 100,000 coups dealt with every
# dealing error on the three protocols, checked against the truth (its table of kinds
# injected, flagged and violations). Another protocol for the campaign:
# make soak SOAK_ARGS="--protocol angel-eye/2"; fewer model coups: DEALER_COUPS=20000.
# Last, the issue-28 broker faults on six tables with PostgreSQL (tests/soak/ack_faults.py):
# every journal in the archive with no backfill
DEALER_COUPS ?= 100000
soak: $(STAMP) deps-system
	$(BIN)/python -m tests.soak --coups 10000 $(SOAK_ARGS)
	$(BIN)/python -m tests.dealer_model --coups $(DEALER_COUPS) --jobs 2
	$(BIN)/python -m tests.soak.ack_faults --tables 6 --events 3000 --down 15
	@# the NATS cluster run's long form: six tables, three rounds of two node kills (docs/archive.md, "On a NATS JetStream cluster")
	NATS_FLOOR_TABLES=6 NATS_FLOOR_ROUNDS=3 $(BIN)/pytest -q -s -p no:cacheprovider tests/test_nats_cluster.py -k archive

fuzz: $(STAMP)
	$(BIN)/python -m pip install -q atheris
	$(BIN)/python -m fuzz

# Install on this box (docs/operations.md: "Installing on a table box"), as root: a venv
# in /opt/shoe-controller built from this tree, the systemd units, sysusers
# and udev files, a config in /etc/shoe-controller (never overwritten).
# DESTDIR=/some/dir stages it there instead; TABLE=T01 writes
# /etc/shoe-controller/T01.yaml for shoe-controller@T01; ARCHIVE=1 writes
# /etc/shoe-controller/archive-1.yaml for the floor archiver shoe-controller-archive@1.
.PHONY: install uninstall dist
install:
	deploy/install.sh $(if $(DESTDIR),--root "$(DESTDIR)") $(if $(TABLE),--table "$(TABLE)") \
	  $(if $(ARCHIVE),--archive "$(ARCHIVE)")

uninstall:
	deploy/install.sh --uninstall $(if $(DESTDIR),--root "$(DESTDIR)")

# The release: dist/shoe_controller-<version>.tar.gz (sources and the deploy
# kit, no tests) and the wheel built from it.
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

clean:
	rm -rf $(VENV) var build dist site *.egg-info .mypy_cache .ruff_cache .pytest_cache
