# make movie  - train the orbit experiment (seed 000) if needed and render its movie
# make test   - run the tests
# Both bootstrap .venv on first use. torch defaults to the CPU build; override with TORCH=torch.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
RUN := data/orbits.h5
MOVIE_DIR := outputs/orbits

.PHONY: setup test movie retrain train-orbits figures bench clean

$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q "$(TORCH)"
	$(VENV)/bin/pip install -q -e ".[test]"
	touch $@

setup: $(VENV)/.ready

test: setup
	$(PY) -m pytest

train-orbits: setup
	$(PY) -m pipeline train orbits --out $(RUN) --reuse

movie: train-orbits
	$(PY) -m render movie $(RUN) --out $(MOVIE_DIR)

retrain: setup
	$(PY) -m pipeline train orbits --out $(RUN) --force

figures: train-orbits
	$(PY) -m render figures $(RUN) --out outputs/orbits/figures

bench: setup
	$(PY) bench/train_speed.py

clean:
	rm -rf outputs/* data/*.h5 data/*.ckpt
