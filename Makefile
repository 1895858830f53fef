PYTHON ?= .venv/bin/python
PROTOS := protos/common.proto protos/metastore.proto protos/bookie.proto protos/broker.proto

.PHONY: protos test lint docs
protos:
	$(PYTHON) -m protos.generate

test:
	$(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check . && $(PYTHON) -m ruff format --check . && $(PYTHON) -m mypy .

docs:
	$(PYTHON) -m protos.settings > docs/configuration.md
