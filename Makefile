# Quick start:  make demo   (index Cranfield, train a small LDA, print QL, BM25, BM25+RM3 and LDA smoothing)
#               make test   (the test suite; make test-long: its end-to-end checks of minutes)
# Both install topicir and its dependencies into the current Python first (idempotent).
PYTHON ?= python3
IR_DATASETS_HOME ?= $(HOME)/.ir_datasets
SHARED_IRDS := ../shared/data/irds-cache/cranfield/cran.tar.gz

.PHONY: install demo test test-long browser wordnet
install:
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[test]'

demo: install
	@# Offline machines: seed ir_datasets' download cache from the shared data when it is there.
	@if [ -f $(SHARED_IRDS) ] && [ ! -f $(IR_DATASETS_HOME)/cranfield/cran.tar.gz ]; then \
		mkdir -p $(IR_DATASETS_HOME)/cranfield && cp $(SHARED_IRDS) $(IR_DATASETS_HOME)/cranfield/; fi
	IR_DATASETS_HOME=$(IR_DATASETS_HOME) $(PYTHON) -m retrieval demo

# Two workers, a test file each at a time: a file's tests share its fixtures and run in order.
# The 25 slowest tests are listed at the end, and the numba compiles (seconds per worker, kernels
# both workers compiled, the tests that compiled most): the suite is kept short. The folder is given
# with "=": pytest takes a separate path for a test path before it knows the option, and once the
# folder exists (a second run) it would not load tests/conftest.py, which defines the option.
# (pytest-benchmark, where some other package installed it, is not used here: off, with its warning.)
test: install browser wordnet
	$(PYTHON) -m pytest -q -n 2 --dist loadfile -p no:benchmark --durations=25 --numba-compiles=build/numba-compiles

# The end-to-end checks of minutes each (marked long), which the default suite leaves out; CI runs both.
test-long: install wordnet
	$(PYTHON) -m pytest -q -n 2 --dist loadfile -p no:benchmark -m long --runlong --durations=25

# Headless Chromium for the report screenshot test (Debian's package; skipped where apt is not ours).
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
		echo "chromium not installed: the report screenshot test will be skipped"

# WordNet 3.0 for the tree-LDA prior (Debian's wordnet-base, /usr/share/wordnet); elsewhere pass
# --wordnet DIR. Tests that need it skip without it.
wordnet:
	@[ -f /usr/share/wordnet/data.noun ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends wordnet-base >/dev/null; } || \
		echo "wordnet-base not installed: pass --wordnet DIR; the WordNet tests will be skipped"
