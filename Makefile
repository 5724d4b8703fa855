# The two commands a newcomer needs:  make audit   and   make test
# Both create .venv and install what they need. Where the system python already has torch (a GPU image),
# the venv sees it (--system-site-packages) and keeps it; otherwise torch is pinned to the 2.13.0 CPU build
# so that pip never pulls a multi-GB CUDA build.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
TORCH_PIN ?= torch==2.13.0

.PHONY: audit test install install-dev lint bench clean

$(VENV)/.installed: pyproject.toml
	@if $(PYTHON) -c "import torch" >/dev/null 2>&1; then \
	  $(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
	  $(PYTHON) -m venv $(VENV) && $(PY) -m pip install -q "$(TORCH_PIN)"; \
	fi
	$(PY) -m pip install -q -e ".[dev]"
	@touch $@

install: $(VENV)/.installed

audit: install
	$(VENV)/bin/kernlint audit

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) bench/bench_load.py

clean:
	rm -rf $(VENV) build dist *.egg-info
