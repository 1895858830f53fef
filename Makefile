# The README's two commands are `make standalone` and `make test`; both set up
# the virtualenv first if it is missing or older than pyproject.toml.
PYTHON3 ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
DATA_DIR ?= ./data

.PHONY: setup standalone cluster test lint protos docs bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON3) -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

standalone: $(VENV)/.installed
	$(VENV)/bin/magnetar standalone --data-dir $(DATA_DIR)

cluster: $(VENV)/.installed
	$(VENV)/bin/magnetar local-cluster --data-dir ./data-cluster

test: $(VENV)/.installed
	$(PYTHON) -m pytest

lint: $(VENV)/.installed
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy protos metastore bookie broker client spark tests benchmarks
	$(PYTHON) tests/check_structure.py

protos: $(VENV)/.installed
	$(PYTHON) -m protos.generate

docs: $(VENV)/.installed
	$(PYTHON) -m broker.settings_doc > docs/configuration.md

clean:
	rm -rf $(VENV) build *.egg-info
