# The README's commands. Each sets up .venv on first use (Python 3.11+ is all a fresh machine needs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint demo bench-bp clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

# The main job on the shipped example: Dou & Coulondre's Table 1. Findings are expected (exit code 1).
run: $(VENV)/.installed
	@status=0; $(BIN)/streamdetect check topologies/dou-patients.yaml || status=$$?; \
	if [ $$status -eq 1 ]; then echo "make run: findings reported, as expected for this example (exit code 1)"; \
	else echo "make run: unexpected exit code $$status"; exit 1; fi

# Everything but the Kafka, Prometheus and CLI integration tests runs on every core (pytest-xdist); the
# integration tests, which start brokers and workers and wait on them, run one at a time after.
test: $(VENV)/.installed
	$(BIN)/python -m pytest -n auto --ignore=tests/integration
	$(BIN)/python -m pytest tests/integration

# A local Kafka broker, a worker and a publisher on Table 1; shows the findings as they arrive, then stops
# everything (needs a JDK 17+ and Maven for the broker).
demo: $(VENV)/.installed
	BIN=$(BIN) deploy/demo.sh

lint: $(VENV)/.installed
	$(BIN)/ruff check streamdetect tests
	$(BIN)/ruff format --check streamdetect tests
	$(BIN)/mypy

bench-bp: $(VENV)/.installed
	$(BIN)/streamdetect bench generate bp bench-out/bp
	$(BIN)/streamdetect bench run bench-out/bp/bp.yaml --vs duckdb

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis bench-out
