# kernelfarer — `make demo` and `make test` do all set-up on a fresh Debian bookworm machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
APT_PACKAGES := clang-19 lld-19 llvm-19 libomp-19-dev libopenblas-dev python3-venv cmake ccache distcc icecc gcc gdb \
                binutils \
                qemu-user libc6-dev-arm64-cross libgcc-12-dev-arm64-cross \
                libc6-dev-ppc64el-cross libgcc-12-dev-ppc64el-cross
# make bench's second reference (oneDNN's dnnl_sgemm), beside OpenBLAS
BENCH_APT_PACKAGES := libdnnl-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps system-deps bench-deps venv prepare demo test fuzz bench tune clean

all: test

# System packages (apt): only what is missing, so repeated runs are quick and offline.
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

system-deps:
	$(call apt_install,$(APT_PACKAGES))

bench-deps: system-deps
	$(call apt_install,$(BENCH_APT_PACKAGES))

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# compat: the checkout on sys.path (kernelfarer/__init__.py finds transforms/ and templates/)
	# instead of setuptools' import hook, which costs every kernelfarer-cc start-up 12 ms
	$(PY) -m pip install -q -e '.[test]' --config-settings editable_mode=compat \
	  || $(PY) -m pip install -q -e '.[test]'
	touch $@

# Byte-compiled modules, even where PYTHONDONTWRITEBYTECODE is set, and compiled templates:
# without them every kernelfarer-cc start-up compiles its modules again (up to 0.07 s per
# rewritten file), and a first build on the machine its templates (0.4 s per process).
venv: $(VENV)/.installed
	@$(PY) -m compileall -q kernelfarer transforms templates >/dev/null
	@$(PY) -c 'from kernelfarer.emit import precompile_templates; precompile_templates()'

# The support code kernelfarer-cc links into objects, compiled once for the usual configurations
# (a few seconds the first time; nothing once done): a first build then finds it compiled.
prepare: venv system-deps
	-@$(PY) -m kernelfarer prepare --quiet

deps: system-deps venv prepare

demo: deps
	$(PY) bench/demo.py samples/sgemm.c

# On every CPU the process may use (tests/parallel.py: a pytest process each, sharing the tests
# out; KERNELFARER_TEST_JOBS=1 for one plain pytest run)
test: deps
	$(PY) tests/parallel.py -q -m "not slow" tests/

fuzz: deps
	$(PY) tests/parallel.py -q -m slow tests/

# GEMM speed against OpenBLAS (and oneDNN), the kernels under llvm-mca beside what this core
# measures, and what a rewrite costs the compiler.
bench: deps bench-deps
	OPENBLAS_NUM_THREADS=1 $(PY) bench/bench_gemm.py
	$(PY) bench/mca_kernels.py
	$(PY) bench/compile_time.py
	OPENBLAS_NUM_THREADS=1 $(PY) bench/thin_shapes.py
	OPENBLAS_NUM_THREADS=1 $(PY) bench/epilogue.py
	$(PY) bench/int8.py
	$(PY) bench/tiny.py
	OPENBLAS_NUM_THREADS=1 $(PY) bench/views.py
	$(PY) bench/int8.py --a uint8
	$(PY) bench/bf16.py
	$(PY) bench/bf16.py --half fp16
	$(PY) bench/fp16_sums.py
	$(PY) bench/converted_results.py
	$(PY) bench/converted_results.py --kind bf16
	$(PY) bench/converted_results.py --kind int8
	$(PY) bench/converted_results.py --kind int8_rowcol
	$(PY) bench/converted_results.py --kind int8_zp
	$(PY) bench/threads.py
	$(PY) bench/cc_overhead.py

# Measure this machine's best cache blocks (about a minute); rewrites here use them afterwards.
tune: deps
	$(PY) -m kernelfarer tune

clean:
	rm -rf $(VENV) out build *.egg-info
