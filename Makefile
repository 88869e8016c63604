PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo demo-zh test test-slow lint venv clean

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The project with one extra: train (what the demo needs to train) or test (the trainer's and the tests' needs).
# Each install is redone whenever pyproject.toml or the version (src/bertcorpus/__init__.py) is newer than its stamp.
$(VENV)/.installed-%: pyproject.toml src/bertcorpus/__init__.py | $(PY)
	$(PY) -m pip install --quiet -e '.[$*]'
	@touch $@

venv: $(VENV)/.installed-test

# The test extra holds the train and zh extras: an environment made for the tests runs both demos as it is.
TESTED := $(wildcard $(VENV)/.installed-test)
demo: $(if $(TESTED),$(VENV)/.installed-test,$(VENV)/.installed-train)
	$(VENV)/bin/bertcorpus demo --output demo-out

# The Chinese chain on the bundled Chinese samples (docs/chinese.md): the train extra and the zh extra.
demo-zh: $(if $(TESTED),$(VENV)/.installed-test,$(VENV)/.installed-train $(VENV)/.installed-zh)
	$(VENV)/bin/bertcorpus demo --zh --output demo-zh-out

# Two test processes (pytest-xdist), one per core of the 2-core machines the suite is sized for.
test: $(VENV)/.installed-test
	$(PY) -m pytest -q -n 2 --dist loadgroup tests

# The slow tests, minutes each, which `make test` leaves out: Spark and faults on Flink clusters, and the tiny model
# trained until it learns on TensorFlow and on JAX. One process: a fault test's timing must not share the cores
# with a training run. CI runs them after `make test`.
test-slow: $(VENV)/.installed-test
	$(PY) -m pytest -q -m slow tests

# The formatter and linter, as configured in pyproject.toml; CI runs this before the tests.
lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) demo-out demo-zh-out
