# Developer shortcuts. The venv is .venv; `make install` creates it.
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint format bench run

install:
	python -m venv $(VENV) && $(BIN)/pip install -c constraints.txt -e '.[dev]'

test:
	$(BIN)/pytest

lint:
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy bot && $(BIN)/lint-imports

format:
	$(BIN)/ruff check --fix . && $(BIN)/ruff format .

bench:
	$(BIN)/python -m bench --quick

run:
	$(BIN)/rl-bot serve
