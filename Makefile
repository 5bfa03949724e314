# The single entry point. Every target creates the virtual environment first if it is missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test doctor lint docs bench clean

$(BIN)/lakehouse: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

demo: $(BIN)/lakehouse
	$(BIN)/lakehouse demo

test: $(BIN)/lakehouse
	$(BIN)/python -m pytest

doctor: $(BIN)/lakehouse
	$(BIN)/lakehouse doctor

# The documentation site (docs/ and the API reference from the docstrings) into site/; warnings fail it.
docs: $(BIN)/lakehouse
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(BIN)/lakehouse
	$(BIN)/ruff check lakehouse jobs tests bench
	$(BIN)/ruff format --check lakehouse jobs tests bench

clean:
	rm -rf $(VENV) warehouse spark-warehouse metastore_db derby.log
