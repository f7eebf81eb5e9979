# Two commands do all set-up themselves: `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CONFIG ?= config.example.yaml
PYTEST_WORKERS ?= 2

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) tools/bootstrap_venv.py $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -q -e '.[test,pipeline]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/amqp-gateway run --config $(CONFIG)

lint: $(STAMP)
	$(BIN)/lint-imports

test: $(STAMP) lint
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -q

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info var
