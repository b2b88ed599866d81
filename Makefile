# onnxruntime-ep-mlx: the two commands are `make run` and `make test`; both set up and build
# first when needed. Versions are pinned in deps/pins.env (read here and by scripts/setup.sh).
include deps/pins.env

VENV      := .venv
PY        := $(VENV)/bin/python
# The venv's site-packages (empty until set-up has made the venv; the build re-reads it).
SITE      := $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
MLX_DIR   := $(SITE)/mlx
MLX_REL   := $(patsubst $(CURDIR)/%,%,$(MLX_DIR))
ORT_INC   := .deps/ort/include
BUILD     := build
LIB       := $(BUILD)/libonnxruntime_ep_mlx.so
STAMP     := .deps/setup.stamp

C_SRCS    := $(sort $(wildcard src/*/*.c src/*/*/*.c))
CXX_SRCS  := $(sort $(wildcard src/mlx/*.cpp))
OBJS      := $(C_SRCS:%.c=$(BUILD)/%.o) $(CXX_SRCS:%.cpp=$(BUILD)/%.o)
DEPS      := $(OBJS:.o=.d)

# Registry rows are positional initializers whose trailing optional fields (a per-node compile
# class hook) are left out and so zero, as C guarantees; -Wextra would flag each such row.
WARN      := -Wall -Wextra -Werror
C_ONLY    := -Wno-missing-field-initializers
CFLAGS    ?= -O2 -g
CXXFLAGS  ?= -O2 -g
ALL_CFLAGS   := -std=c11 -D_GNU_SOURCE $(WARN) $(C_ONLY) -fPIC -fvisibility=hidden -Isrc -isystem $(ORT_INC) -MMD -MP $(CFLAGS)
ALL_CXXFLAGS := -std=c++20 $(WARN) -fPIC -fvisibility=hidden -Isrc -isystem $(MLX_DIR)/include -MMD -MP $(CXXFLAGS)
# MLX's CUDA wheel ships its allocator's header; with CUDA's own headers there too (CUDA_HOME), the
# bridge copies Run outputs from device memory directly (src/mlx/host_io.cpp says why).
CUDA_HOME ?= /usr/local/cuda
CUDA_IO   := $(and $(wildcard $(MLX_DIR)/include/mlx/backend/cuda/allocator.h),$(wildcard $(CUDA_HOME)/include/cuda_runtime.h))
ALL_CXXFLAGS += $(if $(CUDA_IO),-DMXB_CUDA_IO -isystem $(CUDA_HOME)/include)
# MLX's Linux CPU wheel calls cblas_sgemm from a bundled reference BLAS. The plugin exports its
# own (src/cpu/sgemm/), which libmlx binds to when the plugin loads it (the plugin heads the lookup
# scope). Debian's OpenBLAS is linked ahead of libmlx for MLX's LAPACK calls and as the A/B
# alternative (ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM=1); built without it when the library is absent
# (make OPENBLAS=). Measured in docs/BENCHMARKS.md.
OPENBLAS  ?= $(wildcard /usr/lib/x86_64-linux-gnu/libopenblas.so.0)
comma     := ,
BLAS_LINK := $(if $(OPENBLAS),-Wl$(comma)--no-as-needed $(OPENBLAS) -Wl$(comma)--as-needed)
# Where the loader looks for libmlx: the checkout's venv, relative to build/ and then absolute.
# The wheel build (setup.py) sets it to $$ORIGIN/../mlx/lib, the installed mlx package beside it.
MLX_RPATH ?= $$ORIGIN/../$(MLX_REL)/lib:$(abspath $(MLX_DIR)/lib)
LDFLAGS_LIB  := -shared -Wl,--version-script=src/ep/exports.map -Wl,--no-undefined \
                $(BLAS_LINK) -L$(MLX_DIR)/lib -lmlx -Wl,-rpath,'$(MLX_RPATH)' -lpthread \
                $(if $(CUDA_IO),-ldl)

.PHONY: setup build run test clean operators bench wheel wheel-check
setup:
	@bash scripts/setup.sh

$(STAMP): deps/pins.env scripts/setup.sh scripts/ort_headers.sh
	@bash scripts/setup.sh

build: $(STAMP)
	@$(MAKE) --no-print-directory $(LIB)
	@$(MAKE) --no-print-directory $(DUMP) $(FLOOR)
	@# development install: the venv finds python/ (its site-packages is read now, after set-up)
	@$(PY) -c 'import sys, sysconfig; open(sysconfig.get_paths()["purelib"] + "/onnxruntime_ep_mlx.pth", "w").write(sys.argv[1] + "\n")' "$(abspath python)"

$(LIB): $(OBJS) src/ep/exports.map
	$(CXX) -o $@ $(OBJS) $(LDFLAGS_LIB) $(EXTRA_LDFLAGS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -c $< -o $@

# docs/OPERATORS.md is printed by a small program linked with the registry itself.
DUMP := $(BUILD)/registry_dump
$(DUMP): $(BUILD)/tools/registry_dump.o $(filter-out $(BUILD)/src/ep/%,$(OBJS))
	$(CXX) -o $@ $^ -L$(MLX_DIR)/lib -lmlx -Wl,-rpath,$(abspath $(MLX_DIR)/lib) -lpthread $(EXTRA_LDFLAGS)

FLOOR := $(BUILD)/mlx_floor
$(FLOOR): $(BUILD)/tools/mlx_floor.o $(CXX_SRCS:%.cpp=$(BUILD)/%.o)
	$(CXX) -o $@ $^ -L$(MLX_DIR)/lib -lmlx -Wl,-rpath,$(abspath $(MLX_DIR)/lib) -lpthread

operators: build
	@$(MAKE) --no-print-directory $(DUMP)
	$(DUMP) > docs/OPERATORS.md

run: build
	$(PY) -m onnxruntime_ep_mlx run

bench: build
	$(PY) bench/run.py

test: build
	$(PY) -m pytest -q tests

.PHONY: conformance
conformance: build
	$(PY) conformance/run.py

# Differential fuzzing (tools/fuzz/): FUZZ_CASES generated graphs per seed, each on ORT's CPU
# provider and on the EP in three modes; reproducers of failures go to build/fuzz/. Exits
# non-zero when any case fails. Reads the registry through $(DUMP).
FUZZ_CASES   ?= 2000
FUZZ_SEED    ?= 1
FUZZ_WORKERS ?= 2
FUZZ_ARGS    ?=
.PHONY: fuzz
fuzz: $(LIB) $(DUMP)
	PYTHONPATH=$(CURDIR)/python $(PY) tools/fuzz/run.py --seed $(FUZZ_SEED) --cases $(FUZZ_CASES) \
	    --workers $(FUZZ_WORKERS) --out $(BUILD)/fuzz $(FUZZ_ARGS)

# AddressSanitizer + UBSan: the plugin built into build-asan/ (the normal build is untouched),
# then tests run with libasan preloaded (python itself is not instrumented, so leak checking is
# off: python, numpy and ORT keep memory to exit by design). Sanitizer reports are written to
# build-asan/logs/ and printed at the end; an ASan error aborts the process it is in. libstdc++
# is preloaded after libasan: python does not link it, and ASan's __cxa_throw interceptor must
# find the real one when ORT or onnx throw a C++ exception. ASan aborts on an allocation it
# cannot serve, even ORT's own (a C++ new of 256 GiB), so tests keep ORT's CPU provider from
# asking for more memory than the machine has.
ASAN_BUILD   := build-asan
ASAN_FLAGS   := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=address
# one pytest per file, so that an ASan abort loses only the rest of that file; about 7 minutes
# on 2 cores. The test files live in one folder per room (tests/ops, tests/ep, tests/plan,
# tests/cpu, tests/models). Left out: the fuzz slice (the fuzz run below covers it) and
# test_cpu_kernels.py (it rebuilds MLX's CPU kernels with g++ in fresh folders: 7 minutes, none
# of it plugin code).
ASAN_TESTS   ?= $(filter-out tests/ops/test_fuzz_slice.py tests/cpu/test_cpu_kernels.py,$(sort $(wildcard tests/*/test_*.py)))
ASAN_FUZZ_CASES ?= 300
ASAN_ENV = LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libstdc++.so)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=$(CURDIR)/$(ASAN_BUILD)/logs/asan \
	UBSAN_OPTIONS=print_stacktrace=1:log_path=$(CURDIR)/$(ASAN_BUILD)/logs/ubsan \
	ONNXRUNTIME_EP_MLX_LIBRARY=$(CURDIR)/$(ASAN_BUILD)/libonnxruntime_ep_mlx.so \
	PYTHONPATH=$(CURDIR)/python
.PHONY: asan asan-build
asan-build:
	@$(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) CFLAGS="$(ASAN_FLAGS)" \
	    CXXFLAGS="$(ASAN_FLAGS)" EXTRA_LDFLAGS="-fsanitize=address,undefined" \
	    $(ASAN_BUILD)/libonnxruntime_ep_mlx.so $(ASAN_BUILD)/registry_dump
asan: asan-build
	@rm -rf $(ASAN_BUILD)/logs && mkdir -p $(ASAN_BUILD)/logs
	@for f in $(ASAN_TESTS); do echo "== $$f"; $(ASAN_ENV) $(PY) -m pytest -q -p no:cacheprovider $$f \
	    2>&1 | tail -n 3 || true; done
	-$(ASAN_ENV) $(PY) tools/fuzz/run.py --seed 1 --cases $(ASAN_FUZZ_CASES) --minimize 0 \
	    --dump $(ASAN_BUILD)/registry_dump --out $(ASAN_BUILD)/fuzz
	@bash scripts/asan_report.sh $(ASAN_BUILD)/logs

# The pip wheel (pyproject.toml, setup.py): built by pip in an isolated environment from PyPI
# (its own pinned mlx, ORT's headers from npm), objects in build/wheel/, the wheel in dist/. Needs
# neither set-up nor the venv; uses the venv's pip when there is one.
WHEEL_PY  = $(if $(wildcard $(PY)),$(PY),python3)
wheel:
	$(WHEEL_PY) -m pip wheel --no-deps -w dist .

# The wheel as users get it: built, installed with [cpu] into a fresh venv outside the checkout,
# a model run fully on MLX and the report CLI, from a folder outside the checkout.
wheel-check:
	bash scripts/wheel_check.sh

clean:
	rm -rf $(BUILD)

-include $(DEPS)
