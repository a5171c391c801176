# Everything a fresh clone needs: `make test` and `make demo` create .venv themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Idle OpenMP/BLAS thread pools steal the two cores of small machines.
export OMP_WAIT_POLICY := PASSIVE

.PHONY: test demo clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

test: $(STAMP)
	$(PY) -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/intq demo --output out/digits_int8.tflite --force

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
