# Entry points follow p4lang/tutorials: `make run`, `make stop`, `make clean`,
# plus `make experiment NAME=...`, `make figures` and `make test`.  Every target installs what
# it needs first (Debian packages, then the virtual environment).

VENV        ?= .venv
PY          := $(VENV)/bin/python
TESTBED     := $(VENV)/bin/testbed
NAME        ?= cbsw1
TARGET      ?=
EXPERIMENT_ARGS ?=
PYTEST_ARGS ?=
# `make test` runs on TEST_WORKERS pytest-xdist workers: the integration tests
# stay in one group, run one at a time on one worker (tests/conftest.py), while
# the unit tests take the others.  TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2
# Debian packages: Mininet and the tools its hosts use, Java for PySpark,
# python3-thrift for bmv2's CLI (only used when bmv2 is installed), tshark to
# read captures with the event dissector (tools/wireshark/), valgrind to count
# bmv2's instructions per event (make bench, and its test).  python3-six is
# listed by hand: Debian 12's python3-thrift imports `six` in its protocol
# module but does not depend on it, so on a minimal root every call to bmv2
# would fail with "No module named 'six'" (issue 48).  stress-ng is here, not
# only under `make stress`, so that the suite's tests of that load run
# rather than skip.
DEBS := python3-venv python3-pip mininet openvswitch-switch bridge-utils iproute2 \
        iputils-ping ethtool tcpdump procps psmisc openjdk-17-jre-headless python3-thrift python3-six \
        tshark valgrind stress-ng

.PHONY: deps debs venv experiment figures run stop clean test bench soak stress p4 plots distclean toolchain

deps: debs venv

debs:
	@scripts/install-debs.sh $(DEBS)

venv: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(PY) || /usr/bin/python3 -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,test]'
	touch $@

experiment: deps
	$(TESTBED) experiment $(NAME) $(if $(TARGET),--target $(TARGET),) $(EXPERIMENT_ARGS)

# Every paper figure and table, regenerated into results/figures/<experiment>/
# (about 30 minutes on 2 cores; EXPERIMENT_ARGS=--quick for a smoke test).
figures: deps
	$(TESTBED) experiment all $(if $(TARGET),--target $(TARGET),) $(EXPERIMENT_ARGS)

run: experiment

stop:
	$(TESTBED) clean

clean: 
	@if [ -x $(TESTBED) ]; then $(TESTBED) clean; fi
	rm -rf build logs pcaps

test: deps
	$(PY) -m pytest -ra -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The testbed's own speed and memory, into results/bench/<id>/ (not part of `make figures`).
bench: deps
	$(TESTBED) experiment bench $(EXPERIMENT_ARGS)

p4: venv
	$(PY) -m testbed.targets.bmv2.toolchain

# p4c and bmv2 built from source at the pins of testbed/targets/bmv2/toolchain.toml
# (docs/p4.md, "Toolchain"), into P4_PREFIX (default /opt/p4); P4_SOURCES=DIR
# takes the sources from local clones there instead of upstream git.  Both
# reach the script through the environment, never through the shell line.
# Debian's Python, since the virtual environment may not exist yet.
export P4_PREFIX P4_SOURCES
toolchain:
	/usr/bin/python3 scripts/toolchain.py

plots: deps
	$(TESTBED) plot $(RUN)    # a run or an experiment directory

distclean: clean
	rm -rf $(VENV) *.egg-info

# Not part of `make test`: 20 start/abort cycles at random phases, then the
# leaks counted (processes, interfaces, namespaces, mounts, temp files).
soak: deps
	$(TESTBED) experiment soak $(EXPERIMENT_ARGS)

# Not part of `make test`: the suite 3 times and each shipped scenario 5 times
# while stress-ng keeps every core half busy; the stability table goes to
# results/stress/<id>/stability.md (hours on 2 cores; STRESS_ARGS to narrow it,
# e.g. STRESS_ARGS="--suite-runs 1 --repeat 2 --scenario cbsw1").
STRESS_ARGS ?=
stress: deps
	$(TESTBED) stress $(STRESS_ARGS)
