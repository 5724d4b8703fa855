# The two commands a newcomer needs:  make audit   and   make test
# Both create .venv and install what they need. Where the system python already has torch (a GPU image),
# the venv sees it (--system-site-packages) and keeps it; otherwise torch is pinned to the 2.13.0 CPU build
# so that pip never pulls a multi-GB CUDA build.
# The first install takes a minute or two: each stage says what it is doing and pip shows what it fetches.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The interpreter a venv would be made from: under an active venv, `python3` is that venv's, whose torch a
# --system-site-packages venv would not see; its base interpreter is what decides.
BASE_PYTHON := $(shell $(PYTHON) -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))')
TORCH_PIN ?= torch==2.13.0
# --no-compile: pip would byte-compile every module of torch and the rest at install (two thirds of the
# install's time); Python compiles what is imported, once, when it is first imported.
PIP_INSTALL := $(PY) -m pip --disable-pip-version-check install --no-compile
# Python caches each module's bytecode when it is first imported, whatever the shell says: with
# PYTHONDONTWRITEBYTECODE set, every process would compile torch and pandas from source again (`import torch`
# 3.3 s from source, 1.7 s from its cache), and compiling all of site-packages up front takes 30 s.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: audit test install install-dev lint bench clean test-no-native test-no-compiler test-native-asan \
        test-native-asan-quick browser fixtures-wheel

# The venv itself, with torch: the system python's (GPU image) or the pinned CPU build.
$(VENV)/.venv:
	@if $(BASE_PYTHON) -c "import torch" >/dev/null 2>&1; then \
	  echo "kernlint: creating $(VENV) (using the torch that $(BASE_PYTHON) already has)"; \
	  $(BASE_PYTHON) -m venv --system-site-packages $(VENV); \
	else \
	  echo "kernlint: creating $(VENV)" && $(BASE_PYTHON) -m venv $(VENV) && \
	  echo "kernlint: installing $(TORCH_PIN) (CPU build)" && \
	  $(PIP_INSTALL) "$(TORCH_PIN)"; \
	fi
	@touch $@

# `make audit` needs kernlint with the capture extra; `make test` the dev extras too (which include it).
$(VENV)/.installed: pyproject.toml setup.py kernlint/trace/_kineto_chunk.c $(VENV)/.venv
	@echo "kernlint: installing kernlint with the capture extra (editable)"
	$(PIP_INSTALL) -e ".[capture]"
	@touch $@
	@echo "kernlint: $(VENV) is ready"

$(VENV)/.installed-dev: pyproject.toml setup.py kernlint/trace/_kineto_chunk.c $(VENV)/.venv
	@echo "kernlint: installing kernlint and its dependencies (editable, with the dev extras)"
	$(PIP_INSTALL) -e ".[dev]"
	@touch $@ $(VENV)/.installed
	@echo "kernlint: $(VENV) is ready (dev)"

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

audit: install
	$(VENV)/bin/kernlint audit

# The HTML report's browser tests drive a headless chromium: they run where it is installed and skip, saying
# how to install it (`make browser`), where it is not. `make test` changes nothing outside the checkout.
# pytest-xdist runs the suite on every CPU (-n auto); an idle worker takes tests from a busy one (worksteal):
# on 2 cores 351 s against 371-392 s with a file per worker, the long end-to-end files no longer finish alone.
test: install-dev
	$(PY) -m pytest -q -n auto --dist worksteal

# The native reader's legs (README, "The native reader: CI legs"); CI runs test-no-native and
# test-native-asan-quick after `make test`, whose tests/test_native_no_compiler.py is the no-compiler install.
# The trace-reading tests with the built extension ignored (KERNLINT_NATIVE=0): traces read whole, every chunk
# and every nesting walk by the Python path.
NO_NATIVE_TESTS ?= tests/test_load.py tests/test_load_robustness.py tests/test_decode_traces.py
test-no-native: install-dev
	KERNLINT_NATIVE=0 $(PY) -m pytest -q -n 0 $(NO_NATIVE_TESTS)

# kernlint built with CC=false (no working compiler) into a fresh venv: installs, and checks traces through
# the Python path with the extension's findings.
test-no-compiler: install-dev
	$(PY) -m pytest -q -n 0 tests/test_native_no_compiler.py

# The native tests with the extension built under AddressSanitizer + UndefinedBehaviorSanitizer
# (KERNLINT_SANITIZE, setup.py) in a temporary folder, libasan preloaded; -quick: their C-heavy part.
test-native-asan: install-dev
	$(PY) scripts/native_sanitized.py

test-native-asan-quick: install-dev
	$(PY) scripts/native_sanitized.py --quick

# The headless chromium and chromedriver of the HTML report's browser tests: Debian's packages, with apt-get,
# as root (scripts/install_browser.sh; nothing when both are there). CI runs it before `make test`.
browser:
	bash scripts/install_browser.sh

# The kernlint-fixtures wheel into dist/ (the rule cases, the recorded traces and baselines they name, the
# regressed workloads; scripts/build_fixtures_wheel.py): installed beside kernlint, `audit --replay`,
# `audit --include-regressed` and `kernlint run fp8-block-linear-new-ones` work without a checkout.
fixtures-wheel: install-dev
	$(PY) scripts/build_fixtures_wheel.py --outdir dist

lint: install-dev
	$(PY) -m ruff check kernlint tests bench scripts

bench: install-dev
	$(PY) bench/trace_speed/generate.py grow fixtures/traces/gpu-decode/large-decode-clean-range.pt.trace.json.gz --size 150MB --out /tmp/kernlint-bench/decode-150MB.pt.trace.json
	$(PY) bench/trace_speed/run.py /tmp/kernlint-bench/decode-150MB.pt.trace.json

clean:
	rm -rf $(VENV) build dist *.egg-info
