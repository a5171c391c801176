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

test: $(STAMP)
	$(PY) -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/intq demo --output out/digits_int8.tflite --force

# The C backend on Cortex-M (tests/export/c/test_mcu.py, skipped by `make test` without these):
# Debian's ARM cross toolchain, newlib and QEMU; installs them with apt-get when missing (root).
MCU_PACKAGES := gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm
mcu-toolchain:
	@if command -v arm-none-eabi-gcc >/dev/null && command -v qemu-system-arm >/dev/null \
	    && [ -e /usr/lib/arm-none-eabi/newlib/libc.a ]; then echo "ARM toolchain and QEMU present"; \
	else apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(MCU_PACKAGES); fi

test-mcu: $(STAMP) mcu-toolchain
	$(PY) -m pytest -q -rs tests/export/c/test_mcu.py

# Instructions per inference (callgrind) and arenas: the generated C vs TensorFlow Lite Micro.
bench-c: $(STAMP)
	$(PY) benchmarks/c_callgrind.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
