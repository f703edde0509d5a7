# radstack — the two commands of the README:
#   make quickstart   set everything up and run the main job on the embedded stack
#   make test         set everything up and run the whole test suite (what .ci/run calls)
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
JVM_STAMP := .jvm/.fetched

.PHONY: quickstart test test-fast lint jvm venv system clean help

help:
	@echo "make quickstart  - set up and run the end-to-end demo on the embedded stack"
	@echo "make test        - set up and run the whole test suite (unit + integration)"
	@echo "make test-fast   - unit tests only (no JVM services)"
	@echo "make lint        - ruff"

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# System packages from Debian: Java 17 + Maven for the JVM components, PostgreSQL for the
# metadata-store tests. Installed only when missing.
system:
	@bash deploy/scripts/install-system-packages.sh

# JVM components from Maven Central, as listed in deploy/jvm/pom.xml, into .jvm/<module>/.
$(JVM_STAMP): deploy/jvm/pom.xml deploy/jvm/*/pom.xml
	mvn -q -B -f deploy/jvm/pom.xml dependency:copy-dependencies
	touch $(JVM_STAMP)

jvm: $(JVM_STAMP)

test: system venv jvm
	$(PY) -m ruff check .
	$(PY) -m pytest -q

test-fast: venv
	$(PY) -m pytest -q -m "not slow"

lint: venv
	$(PY) -m ruff check .

quickstart: system venv jvm
	$(VENV)/bin/radctl quickstart

clean:
	rm -rf $(VENV) .jvm .pytest_cache
