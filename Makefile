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

.PHONY: quickstart test test-fast test-reliability test-druid test-druid-qa test-cluster lint jvm venv system clean help airflow

help:
	@echo "make quickstart  - set up and run the end-to-end demo on the embedded stack"
	@echo "make test        - set up and run the whole test suite (unit + integration)"
	@echo "make test-fast   - unit tests only (no JVM services)"
	@echo "make test-reliability - hostile input, load with version swaps, kill -9 loops (also part of make test)"
	@echo "make test-druid  - the Druid-cluster path against a real Apache Druid (the oracle)"
	@echo "make test-druid-qa - Druid's own SQL QA suite, every case, with a per-suite report (build/druid-qa/)"
	@echo "make test-cluster - the multi-node path: Kafka x3, HDFS NameNode + 2 DataNodes, Spark standalone (also part of make test)"
	@echo "make lint        - ruff + the import-linter layer contracts"

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

# ... and the Spark driver's class-data sharing archive for this JDK and PySpark (.jvm/cds/, ~35 s once;
# every Spark start after it is ≈3 s faster). Rebuilt only when the JDK or PySpark changes.
jvm: $(JVM_STAMP) venv
	@$(PY) -m operations.class_sharing_build

# Airflow 3 lives in its own virtualenv: its pins fight pyspark's (the Spark provider pulls
# pyspark-client, which overwrites pyspark). radstack goes in without dependencies (plus datasketches,
# which radstack.spec imports) so the DAGs can
# import batch/; the Spark work itself runs as `radctl backfill --via local` of the main venv.
AIRFLOW_VENV := .venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed

$(AIRFLOW_STAMP): pyproject.toml
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install -q --upgrade pip
	$(AIRFLOW_VENV)/bin/pip install -q 'apache-airflow>=3.1,<3.4' 'apache-airflow-providers-apache-spark>=5,<6' 'httpx>=0.27,<0.29' \
		'datasketches>=5.0,<6'
	$(AIRFLOW_VENV)/bin/pip install -q --no-deps -e .
	touch $(AIRFLOW_STAMP)

airflow: $(AIRFLOW_STAMP)

# Two passes: the unit, integration and browser tests on two workers (most of their time is spent
# waiting for JVMs, brokers and micro-batch triggers, not computing) together with the reliability
# tests that bound no time (the fuzzers, the authorization and probe-file checks), then the tests marked
# `alone` and the cluster suite one at a time (they time latencies under load, kill processes in loops or
# start a dozen JVMs each). Both passes always run; the target fails if either did.
test: system venv jvm airflow
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	@status=0; \
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m 'not druid and not alone and not cluster' --durations=20 || status=1; \
	$(PY) -m pytest -q -m 'alone or cluster' --durations=20 || status=1; \
	exit $$status

# The reliability suite alone (~17 min, the attack suite of #49 included; RADSTACK_SOAK=1 for the long version, RADSTACK_RELIABILITY_SEED=random
# for a fresh corpus). `make test` runs it too; its figures are printed at the end of the run.
test-reliability: system venv jvm
	$(PY) -m pytest -q -m reliability tests/reliability

test-fast: venv
	$(PY) -m pytest -q -m "not slow"

# The Druid-cluster path against a real single-machine Apache Druid (tests marked `druid`, excluded
# from the default run): fetches Druid's jars (~190 MB, profile `druid` of deploy/jvm/pom.xml) once,
# then ~1.5–2 min. See docs/druid-cluster.md.
test-druid: system venv
	mvn -q -B -f deploy/jvm/pom.xml -Pdruid -pl druid dependency:copy-dependencies
	$(PY) -m pytest -q -m druid

# Druid's own SQL QA suite (its quidem cases and datasets, read from ../shared/druid-qa, never copied):
# every case, with a local Druid 33 as the referee of the cases that fail (the expected tables are
# Druid master's; a case Druid 33 answers as radstack does is counted apart), ~40 min; the per-suite
# report goes to build/druid-qa/ (summary.md, failures.json, as-druid33.json).
# `make test` runs a fixed 1-in-25 sample of it as a regression guard (tests/druid_qa/test_druid_qa.py).
test-druid-qa: venv jvm
	$(PY) -m tests.druid_qa --referee --out build/druid-qa

# The multi-node path on real processes (tests marked `cluster`, ~4 min; also part of `make test`):
# `radctl cluster up`'s 3 Kafka nodes, HDFS with 2 DataNodes and Spark standalone with 2 workers, a broker
# and a DataNode killed mid-run. See docs/deployment.md ("Ran here").
test-cluster: system venv jvm
	$(PY) -m pytest -q -m cluster

lint: venv
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports

quickstart: system venv jvm
	$(VENV)/bin/radctl quickstart

clean:
	rm -rf $(VENV) $(AIRFLOW_VENV) .jvm .pytest_cache
