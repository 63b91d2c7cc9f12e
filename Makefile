# toolhub: `make run` serves the demo on the embedded default; `make test` runs every test.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python

# The test suite runs on the real services (PostgreSQL, Redis, Celery worker processes).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15

.PHONY: install run test test-fast worker lint bench bench-console bench-checkpoints chaos clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $@

# The embedded demo asks for DEBUG explicitly (development key, demo passwords, the demo notification tool's
# placeholder key: toolhub/settings.py); production never sets it.
EMBEDDED := env -u DATABASE_URL -u CELERY_BROKER_URL DJANGO_DEBUG=1

run: install
	$(EMBEDDED) $(PY) manage.py migrate --noinput
	$(EMBEDDED) $(PY) manage.py load_demo
	$(EMBEDDED) $(PY) manage.py runserver 127.0.0.1:8000

test: install
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
		$(PY) -m pytest $(PYTEST_ARGS)

test-fast: install
	env -u DATABASE_URL -u CELERY_BROKER_URL $(PY) -m pytest -m "not integration and not browser" $(PYTEST_ARGS)

# Fault injection over real services (its own database, private redis-server and queue); CHAOS_ARGS="--seconds 30 --seed 7".
chaos: install
	$(PY) -m benchmarks.chaos $(CHAOS_ARGS)

# A development worker beside `make run` on a broker (DEBUG on like the web); production: README "Production".
worker: install
	DJANGO_DEBUG=1 $(VENV)/bin/celery -A toolhub worker -B -l info

lint: install
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python -m mypy

clean:
	rm -rf $(VENV) db.sqlite3 .pytest_cache

# Benchmarks on the machine's PostgreSQL and a private redis-server with 2 worker processes; writes benchmarks/results/.
# DBOS Transact (the `bench` extra) is measured beside toolhub when it installs; without it that row says so.
bench: install
	$(VENV)/bin/pip install --quiet -e '.[dev,bench]' || echo "bench: DBOS Transact not installed; its row will say so"
	$(PY) -m benchmarks.run $(BENCH_ARGS)

# The console at 1M calls / 4M events in kept databases (toolhub_console_bench*; generated once, minutes).
bench-console: install
	$(PY) -m benchmarks.console_bench $(CONSOLE_BENCH_ARGS)

# Audit checkpoints of 1,000 tenants' chains: a full one and a delta, their sizes and checking them.
bench-checkpoints: install
	$(PY) -m benchmarks.checkpoint_bench $(CHECKPOINT_BENCH_ARGS)
