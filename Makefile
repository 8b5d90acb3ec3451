# make movie  - train the orbit experiment (source 000) if needed and render its movie
# make test   - lint (ruff check, ruff format --check, mypy, lint-imports), then run every test
# make test-fast - the unit tests (tests/unit) not marked slow; no lint (docs/benchmarks.md)
# Both bootstrap .venv on first use (test-fast without Ray, Playwright and TransformerLens, which
# make test adds). torch defaults to the CPU build; override with TORCH=torch.
# make test also needs Chromium for the browser tests, and strace and gcc for the fault tests (each
# installed with apt-get when missing and root).
PYTHON ?= python3
CHROMIUM ?= /usr/bin/chromium
TORCH ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
HM := $(VENV)/bin/headmovies
RUN := data/orbits.h5
# torch threads of the first phase's epochs (the grid term alone; the second phase's run on one
# thread, their terms overlapped on two cores): 2 for an idle 2-core machine; THREADS=1 when
# other jobs hold the cores
THREADS ?= 2
MOVIE_DIR := outputs/orbits

.PHONY: setup setup-all browser fault-tools lint test test-fast movie viewer retrain train-orbits figures bench clean ov-coherent induction induction-seeds census census-gallery census-screen census-score-scale docs-picture docs-picture-induction docs-picture-ov-coherent grokking induction-bump ov-coherent-knobs docs-picture-ov-coherent-knobs

# .ready: the package with the test extra (the unit tests, lint); .ready-all: the test-all extra
# too (Ray, Playwright, TransformerLens: the integration and browser tests, make grokking)
$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q "$(TORCH)"
	$(VENV)/bin/pip install -q -e ".[test]"
	touch $@

$(VENV)/.ready-all: $(VENV)/.ready
	$(VENV)/bin/pip install -q -e ".[test-all]"
	touch $@

setup: $(VENV)/.ready

setup-all: $(VENV)/.ready-all

# The browser tests (tests/browser/) drive the system Chromium through Playwright, which
# cannot download its own browsers here.
browser:
	@if [ ! -x "$(CHROMIUM)" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing chromium with apt-get (for the browser tests)"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get install -y -q -o DPkg::Lock::Timeout=300 chromium >/dev/null 2>&1 || \
				{ apt-get update -q >/dev/null && apt-get install -y -q -o DPkg::Lock::Timeout=300 chromium >/dev/null; } || exit 1; \
			[ -x "$(CHROMIUM)" ] || { echo "error: apt-get installed chromium, but $(CHROMIUM) is missing: pass CHROMIUM=/path/to/chromium" >&2; exit 1; }; \
		else \
			echo "error: the browser tests need Chromium at $(CHROMIUM): install it (Debian: sudo apt-get install chromium) or pass CHROMIUM=/path/to/chromium" >&2; \
			exit 1; \
		fi; \
	fi

# The fault tests of a disk that stays full (tests/integration/test_faults_files_and_workers.py) inject ENOSPC with strace
# and with a preloaded shim built by gcc; a fault whose every test skipped fails the fault-table
# test, so `make test` installs both when they are missing, as it installs Chromium.
fault-tools:
	@missing=""; command -v strace >/dev/null || missing="strace"; command -v gcc >/dev/null || missing="$$missing gcc"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing$$missing with apt-get (for the fault tests)"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get install -y -q -o DPkg::Lock::Timeout=300 $$missing >/dev/null 2>&1 || \
				{ apt-get update -q >/dev/null && apt-get install -y -q -o DPkg::Lock::Timeout=300 $$missing >/dev/null; } || exit 1; \
		else \
			echo "error: the fault tests need$$missing: install it (Debian: sudo apt-get install$$missing)" >&2; \
			exit 1; \
		fi; \
	fi

# ruff (lint and format, pyproject.toml [tool.ruff]) on the package, tests and bench; mypy on the
# package ([tool.mypy]); the import contract ([tool.importlinter]: layers import downward only);
# any finding fails. `.pre-commit-config.yaml` runs the same.
define lint-steps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
endef

lint: setup
	$(lint-steps)

test: setup-all browser fault-tools
	$(lint-steps)
	HEADMOVIES_CHROMIUM=$(CHROMIUM) $(PY) -m pytest

# the quick loop while editing: the unit tests (tests/unit: no Chromium, Ray or TransformerLens)
# without those marked slow, no lint (pyproject.toml [tool.pytest.ini_options] markers)
test-fast: setup
	$(PY) -m pytest tests/unit -m "not slow"

# The first phase (to epoch 10,000, the grid term alone) with OpenMP's active waits, without
# which its THREADS threads gain nothing (11.9 against 21.8 ms an epoch on two idle cores); the
# second phase in a second process with passive waits, since its two overlapped terms would
# spin on each other's core. --reuse resumes the stopped run exactly: the same run bit for bit
# (docs/benchmarks.md, "Threads"). With THREADS=1 the waits change nothing.
REFINE_START := 10000
train-orbits: setup
	OMP_WAIT_POLICY=ACTIVE $(HM) train orbits --out $(RUN) --reuse --threads $(THREADS) --stop-at $(REFINE_START)
	$(HM) train orbits --out $(RUN) --reuse --threads $(THREADS)

movie: train-orbits
	$(HM) orbits check $(RUN)
	$(HM) movie $(RUN) --out $(MOVIE_DIR)

viewer: train-orbits
	$(HM) view $(RUN) --out $(MOVIE_DIR)

# make docs-picture - the README's picture: the default movie (make movie) as a small looping GIF,
# 560 px wide at 4 frames a second, 128 colours (about 0.43 MB), committed as documentation.
# make docs-picture-induction, docs-picture-ov-coherent - the results pages' pictures, from the
# reports of make induction and make ov-coherent, 1,100 px wide in 128 colours (under 0.2 MB).
# Remake them whenever the movie or the figures change. ffmpeg: the one on PATH, else imageio-ffmpeg's.
DOCS_PICTURE := docs/pictures/orbits.gif
FFMPEG = $$(command -v ffmpeg || $(PY) -c "import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())")
# $(call docs_png,SOURCE.png,TARGET.png): SOURCE scaled and quantised into TARGET, written aside first
docs_png = $(FFMPEG) -v error -y -i $(1) -vf \
	"scale=1100:-2:flags=lanczos,split[a][b];[a]palettegen=max_colors=128[p];[b][p]paletteuse=dither=none" \
	$(dir $(2)).partial-$(notdir $(2)) && mv $(dir $(2)).partial-$(notdir $(2)) $(2) && ls -l $(2)

docs-picture: movie
	$(FFMPEG) -v error -y -i $(MOVIE_DIR)/orbits.mp4 -filter_complex \
		"fps=4,scale=560:-2:flags=lanczos,split[a][b];[a]palettegen=max_colors=128:stats_mode=full[p];[b][p]paletteuse=dither=none:diff_mode=rectangle" \
		-loop 0 $(dir $(DOCS_PICTURE)).partial-$(notdir $(DOCS_PICTURE)) && mv $(dir $(DOCS_PICTURE)).partial-$(notdir $(DOCS_PICTURE)) $(DOCS_PICTURE)
	@ls -l $(DOCS_PICTURE)

docs-picture-induction: induction
	$(call docs_png,outputs/induction/induction-2l/attention.png,docs/pictures/induction-2l.png)

docs-picture-ov-coherent: ov-coherent
	$(call docs_png,outputs/ov-coherent/h2d1_seed0/analysis.png,docs/pictures/ov-coherent.png)

retrain: setup
	$(HM) train orbits --out $(RUN) --force --threads $(THREADS)

figures: train-orbits
	$(HM) figures $(RUN) --out outputs/orbits/figures

# make census - the orbit census (docs/results/orbits.md, "Census"): the orbit experiment on the
# seeds CENSUS_SEEDS (a range FIRST-LAST), CENSUS_CHUNK seeds at a time, under four recipes at the
# full default schedule: source 000's own objective (no pruning, no OV-bias penalty; about 8 min a
# run on one idle core), then the recipe with both additions (pruning and the OV-bias penalty), with pruning only and with
# the OV-bias penalty only (today's default), each forked from the seed-objective run at the start of its second
# phase (docs/sweeps.md, "Forks": the same runs, about 60 % of the time each). The chunks let the
# forks of a chunk start once its sources are done; each sweep runs up to CENSUS_CHUNK processes,
# one per core (raise CENSUS_CHUNK on a machine with more cores). Rerun to continue. Then the
# tables, figure and rows in docs/results/census/. A sweep exits 1 when some run failed; the census
# still counts the others. Each run file takes about 80 MB: 200 seeds under the four recipes need
# about 65 GB in data/census/ (the committed census rows need none of it).
# make census-screen - the early screen: SCREEN_SEEDS under source 000's objective, each trained only
# through epoch SCREEN_EPOCH of the full schedule (about 23 s per seed); `make census` then lists
# the seeds whose frequency groups fit an orbit. Continue chosen ones with
# `headmovies sweep orbits --out data/census/screen-seed-objective --seeds S1,S2 $(SEED_OBJECTIVE)`.
CENSUS_SEEDS ?= 0-199
CENSUS_CHUNK ?= 10
SCREEN_SEEDS ?= 200-299
SCREEN_EPOCH ?= 1500
# The census's rows were trained with the eager grid kernel (the default before 2026-12-08): every
# census sweep keeps it, so that its runs resume, its forks match and its rows stay one experiment.
CENSUS_KERNEL := --set grid_kernel=eager
SEED_OBJECTIVE := --set refine_prune=0 --set refine_ov_bias_weight=0 $(CENSUS_KERNEL)
CENSUS := data/census
CENSUS_DIRS := $(CENSUS)/seed-objective $(CENSUS)/with-additions $(CENSUS)/prune-only $(CENSUS)/bias-only
FORK := --fork-from $(CENSUS)/seed-objective $(CENSUS_KERNEL)

census: setup
	@s='$(CENSUS_SEEDS)'; case "$$s" in *[!0-9-]*|-*|*-|*-*-*|"") \
		echo "CENSUS_SEEDS must be a range FIRST-LAST or one seed, e.g. 0-199, got '$$s'" >&2; exit 2;; esac; \
	first=$${s%-*}; last=$${s#*-}; \
	for lo in $$(seq $$first $(CENSUS_CHUNK) $$last); do \
		hi=$$((lo + $(CENSUS_CHUNK) - 1)); [ $$hi -le $$last ] || hi=$$last; \
		echo "census: seeds $$lo-$$hi of $$first-$$last"; \
		$(HM) sweep orbits --out $(CENSUS)/seed-objective --seeds $$lo-$$hi $(SEED_OBJECTIVE); \
		rc=$$?; [ $$rc -le 1 ] || exit $$rc; \
		$(HM) sweep orbits --out $(CENSUS)/with-additions --seeds $$lo-$$hi --set refine_prune=0.25 $(FORK); \
		rc=$$?; [ $$rc -le 1 ] || exit $$rc; \
		$(HM) sweep orbits --out $(CENSUS)/prune-only --seeds $$lo-$$hi --set refine_prune=0.25 --set refine_ov_bias_weight=0 $(FORK); \
		rc=$$?; [ $$rc -le 1 ] || exit $$rc; \
		$(HM) sweep orbits --out $(CENSUS)/bias-only --seeds $$lo-$$hi --set refine_prune=0 $(FORK); \
		rc=$$?; [ $$rc -le 1 ] || exit $$rc; \
	done
	dirs=; for d in $(CENSUS_DIRS) $(CENSUS)/screen-seed-objective; do [ ! -d $$d ] || dirs="$$dirs $$d"; done; \
	$(HM) orbits census $$dirs --out docs/results/census --formats png

# make census-score-scale - the sharper-attention lever for the 12-orbit on unchosen consecutive seeds:
# LEVER_SEEDS (a range; default 0-99, the seeds the seed-objective census also ran) under source
# 000's objective with sharper attention (score_scale=2, no weight decay on W_Q and W_K; about 8 min
# a run on one idle core), then the census with it as the recipe "score-scale-2". Resumable; the
# committed census rows keep the recipes run elsewhere (docs/results/orbits.md, "Levers").
LEVER_SEEDS ?= 0-99
LEVER := --set score_scale=2 --set qk_decay=false

census-score-scale: setup
	$(HM) sweep orbits --out $(CENSUS)/score-scale-2 --seeds $(LEVER_SEEDS) $(SEED_OBJECTIVE) $(LEVER) || [ $$? -eq 1 ]
	$(HM) orbits census $(CENSUS)/score-scale-2 --out docs/results/census --formats png

# make census-gallery - rebuild docs/results/census/ (census.md, the figure and gallery.html, a tile
# per run) from the committed rows alone, no run file needed; `make census` writes the same.
census-gallery: setup
	$(HM) orbits census --rows docs/results/census/census.jsonl --out docs/results/census --formats png

census-screen: setup
	$(HM) sweep orbits --out data/census/screen-seed-objective --seeds $(SCREEN_SEEDS) \
		--stop-at $(SCREEN_EPOCH) $(SEED_OBJECTIVE) || [ $$? -eq 1 ]

# make ov-coherent - source 004: train 2 heads x d_head 1 (OV_COHERENT_SEEDS) and 1 head x d_head 4
# (OV_COHERENT_WIDE_SEEDS), one run at a time on one thread; table, figures and QK-plane movie, and
# each run's viewer (outputs/ov-coherent/<run>/viewer.html)
OV_COHERENT_SEEDS ?= 0 1 2 3 4 5 6 7 8 9
OV_COHERENT_WIDE_SEEDS ?= 0 1 2
OV_COHERENT_RUNS := $(foreach s,$(OV_COHERENT_SEEDS),data/ov-coherent/h2d1_seed$(s).h5) \
	$(foreach s,$(OV_COHERENT_WIDE_SEEDS),data/ov-coherent/h1d4_seed$(s).h5)

ov-coherent: setup
	mkdir -p data/ov-coherent
	for s in $(OV_COHERENT_SEEDS); do OMP_NUM_THREADS=1 $(HM) train ov-coherent \
		--out data/ov-coherent/h2d1_seed$$s.h5 --set seed=$$s --reuse || exit 1; done
	for s in $(OV_COHERENT_WIDE_SEEDS); do OMP_NUM_THREADS=1 $(HM) train ov-coherent \
		--out data/ov-coherent/h1d4_seed$$s.h5 --set seed=$$s --set n_heads=1 --set d_head=4 --reuse || exit 1; done
	$(HM) ov-coherent report $(OV_COHERENT_RUNS) --out outputs/ov-coherent
	for r in $(OV_COHERENT_RUNS); do $(HM) view $$r --out outputs/ov-coherent/$$(basename $$r .h5) || exit 1; done

# make ov-coherent-knobs - the knob sweep of docs/results/ov-coherent.md: seeds 0-9 of each
# setting, one knob away from the defaults at a time, two combinations and a uniform-attention
# control (seeds 0-2), one run at a time on one thread (143 runs, 45-60 minutes of one core at
# 12-16 s a default run; rerunning skips finished runs), then the table, rows and reversal-rate
# figure (python -m headmovies.sweeps.ov_coherent_knobs) in outputs/ov-coherent-knobs/
OV_KNOBS := data/sweeps/ov-coherent-knobs
OV_KNOBS_SEEDS ?= 0-9
OV_KNOBS_SWEEP = OMP_NUM_THREADS=1 $(HM) sweep ov-coherent --workers 1 --seeds $(OV_KNOBS_SEEDS) --out $(OV_KNOBS)

ov-coherent-knobs: setup
	$(OV_KNOBS_SWEEP)/default
	$(OV_KNOBS_SWEEP)/init_scale --grid init_scale=0.1,3
	$(OV_KNOBS_SWEEP)/lr --grid lr=0.003
	$(OV_KNOBS_SWEEP)/schedule --set warmup=1000 --grid lr_schedule=cosine
	$(OV_KNOBS_SWEEP)/weight_decay --grid weight_decay=1
	$(OV_KNOBS_SWEEP)/epochs --grid epochs=20000
	$(OV_KNOBS_SWEEP)/batch --grid batch=64,1000
	$(OV_KNOBS_SWEEP)/seq_len --grid seq_len=6
	$(OV_KNOBS_SWEEP)/signal --set signal_weights=4,3,2,1
	$(OV_KNOBS_SWEEP)/unembed --grid unembed=one-hot
	$(OV_KNOBS_SWEEP)/unembed_lr --set unembed=one-hot --grid lr=0.003
	$(OV_KNOBS_SWEEP)/unembed_lr_init --set unembed=one-hot --set lr=0.003 --grid init_scale=3
	OMP_NUM_THREADS=1 $(HM) sweep ov-coherent --workers 1 --seeds 0-2 --out $(OV_KNOBS)/uniform --set uniform_attention=true
	$(PY) -m headmovies.sweeps.ov_coherent_knobs $(addprefix $(OV_KNOBS)/,default init_scale lr schedule \
		weight_decay epochs batch seq_len signal unembed unembed_lr unembed_lr_init uniform) --out outputs/ov-coherent-knobs

# make docs-picture-ov-coherent-knobs - the results page's reversal-rate figure (under 0.2 MB)
docs-picture-ov-coherent-knobs: ov-coherent-knobs
	cp outputs/ov-coherent-knobs/knobs.png docs/pictures/.partial-ov-coherent-knobs.png
	mv docs/pictures/.partial-ov-coherent-knobs.png docs/pictures/ov-coherent-knobs.png
	@ls -l docs/pictures/ov-coherent-knobs.png

# make induction - source 003: train the 1-layer, smeared-key and 2-layer models (seed 0; complete
# runs are reused), then figures, tables and attention movies under outputs/induction/, and each
# run's viewer (outputs/induction/induction-<variant>/viewer.html).
# make induction-seeds - the comparison with source 003: INDUCTION_SEEDS x both position placements, one run at
# a time on one thread (seed 0 with the default placement, INDUCTION_DEFAULT_POSITIONS, is `make
# induction`'s run), plus INDUCTION_REPEAT_SEEDS with letters drawn independently (repeats allowed,
# as in source 003); no movies.
INDUCTION_VARIANTS := 1l smeared 2l
INDUCTION_SEEDS ?= 0 1 2
INDUCTION_POSITIONS ?= qk_vector qk_input
INDUCTION_DEFAULT_POSITIONS := qk_vector
INDUCTION_REPEAT_SEEDS ?= 0

induction: setup
	for v in $(INDUCTION_VARIANTS); do OMP_NUM_THREADS=1 $(HM) train induction-$$v \
		--out data/induction-$$v.h5 --reuse || exit 1; done
	$(HM) induction report $(foreach v,$(INDUCTION_VARIANTS),data/induction-$(v).h5) --out outputs/induction
	for v in $(INDUCTION_VARIANTS); do $(HM) view data/induction-$$v.h5 \
		--out outputs/induction/induction-$$v --no-progress || exit 1; done

induction-seeds: setup
	mkdir -p data/induction-seeds
	for s in $(INDUCTION_SEEDS); do for pos in $(INDUCTION_POSITIONS); do for v in $(INDUCTION_VARIANTS); do \
		if [ $$pos = $(INDUCTION_DEFAULT_POSITIONS) ] && [ $$s = 0 ]; then out=data/induction-$$v.h5; \
		else out=data/induction-seeds/$$v-$$pos-s$$s.h5; fi; \
		OMP_NUM_THREADS=1 $(HM) train induction-$$v --out $$out --set seed=$$s \
			--set positions=$$pos --reuse --no-progress || exit 1; done; done; done
	for s in $(INDUCTION_REPEAT_SEEDS); do for v in $(INDUCTION_VARIANTS); do \
		OMP_NUM_THREADS=1 $(HM) train induction-$$v --out data/induction-seeds/$$v-qk_vector-repeats-s$$s.h5 \
			--set seed=$$s --set positions=qk_vector --set distinct=false --reuse --no-progress || exit 1; done; done
	$(HM) induction report $(foreach pos,$(INDUCTION_POSITIONS),$(foreach s,$(INDUCTION_SEEDS),\
		$(foreach v,$(INDUCTION_VARIANTS),$(if $(filter $(INDUCTION_DEFAULT_POSITIONS)0,$(pos)$(s)),data/induction-$(v).h5,\
		data/induction-seeds/$(v)-$(pos)-s$(s).h5)))) \
		$(foreach s,$(INDUCTION_REPEAT_SEEDS),$(foreach v,$(INDUCTION_VARIANTS),data/induction-seeds/$(v)-qk_vector-repeats-s$(s).h5)) \
		--out outputs/induction/seeds --no-movie --no-progress

# make grokking - the recording API's worked example (docs/results/grokking.md): a one-layer
# TransformerLens model learning addition mod 53, recorded by examples/grokking.py (3 lines of
# headmovies.Recorder), then its movie and figures rendered as any run's (headmovies movie, figures)
GROKKING_RUN := data/grokking.h5
grokking: setup-all
	$(PY) examples/grokking.py --out $(GROKKING_RUN) --threads $(THREADS)
	$(HM) movie $(GROKKING_RUN) --out outputs/grokking
	$(HM) figures $(GROKKING_RUN) --out outputs/grokking/figures
	$(HM) view $(GROKKING_RUN) --out outputs/grokking

# make induction-bump - heads that change what they do (docs/results/induction-bump.md): a two-layer
# attention-only TransformerLens model learns repeated spans, recorded with the default probe;
# `headmovies heads --json` shows induction scores near chance at init and above 0.4 at the end
INDUCTION_BUMP_RUN := data/induction-bump.h5
induction-bump: setup
	mkdir -p outputs
	$(PY) examples/induction_bump.py --out $(INDUCTION_BUMP_RUN) --threads $(THREADS)
	$(HM) heads $(INDUCTION_BUMP_RUN) --json > outputs/induction-bump-heads.json
	$(HM) heads $(INDUCTION_BUMP_RUN)
	$(HM) movie $(INDUCTION_BUMP_RUN) --out outputs/induction-bump
	$(HM) figures $(INDUCTION_BUMP_RUN) --out outputs/induction-bump/figures

bench: setup
	$(PY) bench/train_speed.py

clean:
	rm -rf outputs/* data/*.h5 data/*.ckpt
