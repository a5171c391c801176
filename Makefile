# Everything a fresh clone needs: `make test` and `make demo` create .venv themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Idle OpenMP/BLAS thread pools steal the two cores of small machines.
export OMP_WAIT_POLICY := PASSIVE

.PHONY: test demo clean mcu-toolchain test-mcu bench-c

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

# tools/install_test_tools.sh: best effort (apt-get as root when clang, the ARM toolchain or QEMU is
# missing; INTQ_NO_APT=1 skips it); tests needing a missing tool skip and say why.
test: $(STAMP)
	-@sh tools/install_test_tools.sh
	$(PY) -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/intq demo --output out/digits_int8.tflite --force

# The C backend on Cortex-M (tests/export/c/test_mcu.py): Debian's ARM cross toolchain, newlib and
# QEMU (and clang with UBSan), installed with apt-get when missing; fails if they cannot be.
mcu-toolchain:
	sh tools/install_test_tools.sh --required

test-mcu: $(STAMP) mcu-toolchain
	$(PY) -m pytest -q -rs tests/export/c/test_mcu.py

# Instructions per inference (callgrind) and arenas: the generated C vs TensorFlow Lite Micro.
bench-c: $(STAMP)
	$(PY) benchmarks/c_callgrind.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
