# Every target sets itself up: .venv is created on first use and everything is installed into it.
# torch is pinned to the CPU wheel (2.13.0) only when the venv cannot import torch yet, so a machine
# that already has a CUDA torch in .venv keeps it and a CPU machine never pulls CUDA wheels.
PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.fx-conformance-installed
PROFILE ?= fx-ci
CONFORMANCE_PROFILE ?= dev

# Byte code in __pycache__ (ignored by git): Python's for each module, pytest's for each test module
# with its asserts rewritten. Where a machine sets PYTHONDONTWRITEBYTECODE, every process of a run (the
# workers, each subprocess a test starts: about 40) compiled and rewrote them again, 2 s a pytest
# process (measured on the 2-core AMD EPYC): the targets here write them.
unexport PYTHONDONTWRITEBYTECODE

# Trigger discovery's cache (conformance/search/trigger_cache.py): in the tree, not the user's home.
export FX_CONFORMANCE_CACHE ?= $(CURDIR)/.fx-conformance-cache

WORKERS ?= auto
# Each test worker runs torch's CPU kernels on one thread (OMP_NUM_THREADS, read when torch loads):
# the workers already fill the cores, and each one's own thread team (OpenMP threads spinning
# between the small kernels of drawn graphs) took CPU from the others. Measured on the 2-core AMD
# EPYC: 200 drawn graphs 2.19 s on two threads, 1.84 s on one; make test's tests 506 s of worker
# time against 518 s (one run each: within the machine's noise). The searches' forked drivers ran
# on one thread already (isolate.in_forked_child).
# Exported for make test and make sweep (and the install before them); the nightly sets it on its
# sweep alone: timed runs (make bench, the nightly's benchmarks) keep torch's own thread count.
TEST_THREADS ?= 1
test sweep: export OMP_NUM_THREADS = $(TEST_THREADS)
PYTEST_FLAGS = -q -p no:cacheprovider --hypothesis-profile=$(PROFILE)
# make test: each test file runs whole in one worker (--dist loadfile), so a module's set-up (its
# fixtures, what it draws once and caches, the kernels it compiles) is paid once, not in every worker
# its tests went to (worksteal spread them: 13 min of CPU for make test, 10.7 with loadfile, on the
# 2-core AMD EPYC). The files go out in collection order, the longest first (conftest.py; without
# --no-loadscope-reorder xdist sends them by number of tests instead). The
# sweeps, whose long tests crowd into a few files (every torch-pass row at every seed), steal work.
DIST_TEST := --dist loadfile --no-loadscope-reorder
DIST_SWEEP := --dist worksteal
# Tests whose expected values come from eager CPU kernels (docs/design.md, "Where it runs").
# (benchmarks/test_kernels.py's smoke run checks the golden graphs' kernels, which
# test_pointwise_golden.py judges here, and Inductor's, whose compile is 11 s a run: not repeated.)
NUMERICS := tests/test_pointwise_table.py tests/test_pointwise_golden.py tests/test_pointwise.py \
	tests/test_specials.py tests/test_verify.py conformance/suite/test_pointwise_lowering.py
CAPABILITIES ?= default avx2
# The capabilities among its arguments that this CPU has, in order: make test runs under the last
# of them and the numerics tests again under each other one (on x86: all of it under avx2, the
# numerics again under default, the same on an AVX-512 or an AVX2 machine; without AVX2: default).
export HELD_CAPABILITIES = import sys, torch; \
	has = {"default": True, "avx2": torch.cpu._is_avx2_supported(), "avx512": torch.cpu._is_avx512_supported()}; \
	print(" ".join(c for c in sys.argv[1:] if has.get(c)))

NIGHTLY_PROFILE ?= nightly
NIGHTLY_DIR := reports/nightly

.PHONY: test sweep conformance bench nightly install clean

install: $(STAMP)

# A Python whose torch is a GPU build (a CUDA machine's image) lends it to the venv (system site
# packages), so a fresh clone there tests that torch instead of downloading a CPU one. A machine with
# no network passes its wheels: make test PIP_FLAGS="--no-index --find-links .whl --no-build-isolation".
PIP_FLAGS ?=
$(VPY):
	@if $(PYTHON) -c "import sys, torch; sys.exit(not (torch.version.cuda or torch.version.hip))" 2>/dev/null; then \
		echo "$(PYTHON) has a GPU build of torch: .venv uses it (--system-site-packages)"; \
		$(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
		$(PYTHON) -m venv $(VENV); \
	fi

# torch first, by pip (where the venv has none): pip takes the CPU wheel where the machine keeps one
# and honours the machine's pip configuration. Then the project, by uv where the venv holds its own
# torch (uv unpacks in parallel: 6 s against pip's 24 s for the project's packages on the 2-core AMD
# EPYC), pinned to that torch so uv never fetches another; by pip with PIP_FLAGS, where uv cannot be
# installed or fails, and where torch is the system's (uv does not see system site packages).
# --no-compile: pip byte-compiles every file it installs, one at a time (torch and triton: 28 of the
# 61 s of a fresh install on the 2-core AMD EPYC; uv compiles nothing); the runs compile what they
# import as they import it (about 10 s, once) and keep it in __pycache__ (PYTHONDONTWRITEBYTECODE
# is unexported above).
PIP_INSTALL = $(VPY) -m pip install --quiet --no-compile $(PIP_FLAGS)
export TORCH_PIN = import sys, importlib.util, importlib.metadata as m; s = importlib.util.find_spec("torch"); \
	print("torch==" + m.version("torch")) if s and s.origin.startswith(sys.prefix + "/") else sys.exit(1)
$(STAMP): $(VPY) pyproject.toml
	@$(VPY) -c "import torch" 2>/dev/null || $(PIP_INSTALL) torch==2.13.0
	@if [ -z "$(PIP_FLAGS)" ] && $(VPY) -c "$$TORCH_PIN" > $(VENV)/torch-pin.txt && $(PIP_INSTALL) uv 2>/dev/null; then \
		$(VPY) -m uv pip install --quiet --python $(VPY) --constraint $(VENV)/torch-pin.txt -e ".[cluster,test]" \
		|| { echo "uv did not install the project (above): pip installs it"; $(PIP_INSTALL) -e ".[cluster,test]"; }; \
	else \
		$(PIP_INSTALL) -e ".[cluster,test]"; \
	fi
	@touch $(STAMP)

# The project's tests, the benchmarks as smoke tests (timing disabled), the conformance suite, and
# the docstring examples of the three packages (DOCTESTED), in one run under the small,
# derandomized `ci` profile, on WORKERS processes (pytest-xdist), under the last capability of
# CAPABILITIES this CPU has; then the numerics tests again under each other one, so that no
# expected value holds on one CPU only (and a run means the same on AMD and Intel, AVX2 or AVX-512).
# Wider sweeps of the same properties (more seeds; the cases beyond an even spread of them,
# conformance/suite/_tiers.py) are marked `sweep`: `make sweep`, `make nightly`.
DOCTESTED := strategies reference_lowering $(wildcard conformance/*.py) conformance/symbolic
test: $(STAMP)
	@caps="$$($(VPY) -c "$$HELD_CAPABILITIES" $(CAPABILITIES))"; main="$${caps##* }"; \
	echo "make test under ATEN_CPU_CAPABILITY=$${main:-(this CPU's own)}"; \
	env $${main:+ATEN_CPU_CAPABILITY=$$main} $(VPY) -m pytest tests benchmarks conformance/suite $(DOCTESTED) $(PYTEST_FLAGS) $(DIST_TEST) \
		-n $(WORKERS) -m "not sweep" --benchmark-disable --doctest-modules \
		-W ignore::hypothesis.errors.NonInteractiveExampleWarning || exit 1; \
	for cap in $$caps; do \
		[ "$$cap" = "$$main" ] && continue; \
		echo "numerics tests again under ATEN_CPU_CAPABILITY=$$cap"; \
		ATEN_CPU_CAPABILITY=$$cap $(VPY) -m pytest $(NUMERICS) $(PYTEST_FLAGS) $(DIST_TEST) -n $(WORKERS) --benchmark-disable \
			|| exit 1; \
	done

sweep: $(STAMP)
	$(VPY) -m pytest tests conformance/suite $(PYTEST_FLAGS) $(DIST_SWEEP) -n $(WORKERS) -m sweep

# The conformance run over the reference implementations, with a per-module summary.
conformance: $(STAMP)
	$(VENV)/bin/fx-conformance run --profile $(CONFORMANCE_PROFILE)

# Timed benchmarks (pytest-benchmark); results saved under .benchmarks/.
bench: $(STAMP)
	$(VPY) -m pytest benchmarks -q -p no:cacheprovider --benchmark-only --benchmark-autosave

# The nightly report: the conformance run (counts), the timed benchmarks (kernels against eager and
# Inductor, harness, prover, strategies, functionalization), the static (compile-only) figures of the
# kernel corpus for sm_90/sm_80/gfx942 beside Inductor's, then `fx-conformance report`, which
# writes reports/nightly/<UTC date>/report.{json,md,html} with plots, appends reports/history.jsonl
# and exits 1 on a regression against the last run on this machine kind (gate median:5%). With
# NIGHTLY_CAMPAIGN=FILE (CAMPAIGN_ARGS: say --cluster auto --db redis://...) the campaign runs too and
# is a section of the report, with its plot.
NIGHTLY_CAMPAIGN ?=
CAMPAIGN_ARGS ?=
nightly: $(STAMP)
	mkdir -p $(NIGHTLY_DIR)
	-OMP_NUM_THREADS=$(TEST_THREADS) $(VPY) -m pytest tests $(PYTEST_FLAGS) $(DIST_SWEEP) -n $(WORKERS) -m sweep
	-$(VENV)/bin/fx-conformance run --profile $(NIGHTLY_PROFILE) -- --fx-summary-json $(NIGHTLY_DIR)/conformance.json
	$(if $(NIGHTLY_CAMPAIGN),-$(VENV)/bin/fx-conformance campaign $(NIGHTLY_CAMPAIGN) $(CAMPAIGN_ARGS) \
		--json $(NIGHTLY_DIR)/campaign.json)
	$(VPY) -m pytest benchmarks -q -p no:cacheprovider --benchmark-only --benchmark-json $(NIGHTLY_DIR)/benchmarks.json
	env -u TRITON_INTERPRET TRITON_DEFAULT_FP_FUSION=0 $(VPY) -m benchmarks.static_kernels $(NIGHTLY_DIR)/static.json
	$(VENV)/bin/fx-conformance report --benchmarks $(NIGHTLY_DIR)/benchmarks.json \
		--conformance $(NIGHTLY_DIR)/conformance.json --static $(NIGHTLY_DIR)/static.json \
		$(if $(NIGHTLY_CAMPAIGN),--campaign $(NIGHTLY_DIR)/campaign.json) $(REPORT_ARGS)

clean:
	rm -rf $(VENV) .hypothesis .benchmarks *.egg-info .fx-conformance-cache
