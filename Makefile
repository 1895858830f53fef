# The README's two commands are `make standalone` and `make test`; both set up
# the virtualenv first if it is missing or older than pyproject.toml.
PYTHON3 ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
DATA_DIR ?= ./data

.PHONY: setup standalone cluster test lint protos docs bench clean image image-local compose-up compose-down report-demo

$(VENV)/.installed: pyproject.toml
	$(PYTHON3) -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[dev,spark]'
	touch $@

setup: $(VENV)/.installed

standalone: $(VENV)/.installed
	$(VENV)/bin/magnetar standalone --data-dir $(DATA_DIR)

cluster: $(VENV)/.installed
	$(VENV)/bin/magnetar local-cluster --data-dir ./data-cluster

test: $(VENV)/.installed
	$(PYTHON) -m pytest

# A standalone, a short load of a known shape, the three Spark reports from its
# stats topic (docs/reports.md); prints where the HTML report is. Needs Java 17.
report-demo: $(VENV)/.installed
	$(PYTHON) -m spark.demo

lint: $(VENV)/.installed
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy protos metastore bookie broker client spark tests benchmarks
	$(PYTHON) tests/check_structure.py

protos: $(VENV)/.installed
	$(PYTHON) -m protos.generate

docs: $(VENV)/.installed
	$(PYTHON) -m broker.settings_doc > docs/configuration.md

# Container images (docs/deploy.md): `image` from python:3.11-slim, `image-local`
# from a debootstrap base with no registry (as CI does).
image: $(VENV)/.installed
	deploy/build-image.sh

image-local: $(VENV)/.installed
	deploy/build-image.sh --local-base

compose-up:
	docker-compose -f deploy/compose/docker-compose.yml up -d

compose-down:
	docker-compose -f deploy/compose/docker-compose.yml down

# The performance matrix against the peers in one sitting (docs/benchmarks.md):
# starts Redis, a standalone and a small local cluster, runs every timed run
# under flock /tmp/bench.lock, prints the table and writes it to the docs.
bench: $(VENV)/.installed
	command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)
	$(PYTHON) -c "import redis, hiredis" 2>/dev/null || $(PYTHON) -m pip install -q redis==8.1.0 hiredis==3.5.0
	$(PYTHON) -m benchmarks.matrix --reps $(or $(REPS),3) --write-docs

clean:
	rm -rf $(VENV) build *.egg-info
