# dapo top-level Makefile.
#
#   make              build every library, daemon and tool into build/ (CPU always; CUDA when nvcc is found)
#   make test         install missing Debian packages, build, run every test (prints "N passed, N failed")
#   make run          the main job: build, warm-start the tiny model, launch the local cluster
#   make bench        every benchmark; make bench-<name> one of them (bench/<name>/)
#   make fixtures     regenerate test fixtures with the Python reference scripts (pip packages)
#   make check-long   long fuzzing and soak checks
#   make deps         install the Debian packages in deps/debian-packages.txt
#   make SANITIZE=1   ASan + UBSan build (into build-san/)
#   make CUDA=0|1     never / always build the CUDA backend (default: auto, when nvcc is found)
#
# Layout rules (so adding a file never needs a Makefile edit):
#   common/<concern>/*.c         -> build/lib/libdapo.a
#   common/backend/cuda/*.cu     -> build/lib/libdapo_cuda.a (CUDA builds only)
#   services/<svc>/main.c        -> build/bin/dapo-<svc>; the other .c files of that folder -> libsvc_<svc>.a
#   tools/<name>.c               -> build/bin/<name>
#   tests/unit/test_*.c, tests/integration/test_*.c -> build/tests/<name> (cmocka)
#   tests/fuzz/fuzz_*.c          -> build/fuzz/<name> (clang, libFuzzer + ASan)
#   bench/<name>/bench_*.c       -> build/bench/bench_* (built by make bench / bench-<name>)

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
  BUILD ?= build-san
else
  BUILD ?= build
endif
CUDA ?= auto
ifeq ($(origin CC),default)
  CC := gcc
endif
FUZZ_CC ?= clang
comma := ,

# ---------------------------------------------------------------------------------------------- toolchain
PKGS := libzmq libprotobuf-c libuv libfyaml jansson libpcre2-8 libutf8proc libxxhash libzstd libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
LIBS := $(PKG_LIBS) -lopenblas -lhttp_parser -lpthread -lm

CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -MMD -MP \
          -I. -Icommon -I$(BUILD)/gen -I/usr/include/x86_64-linux-gnu/openblas-pthread $(PKG_CFLAGS)
LDFLAGS += -fopenmp
ifeq ($(SANITIZE),1)
  CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif

# CUDA detection (docs/conventions.md rule 14): auto builds it when nvcc is found, CUDA=1 requires it, CUDA=0 skips.
NVCC := $(if $(filter 0,$(CUDA)),,$(or $(wildcard $(CUDA_HOME)/bin/nvcc),$(shell command -v nvcc 2>/dev/null)))
ifneq ($(NVCC),)
  CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
  CUDA_ROOT := $(patsubst %/bin/nvcc,%,$(NVCC))
  $(info ✓ nvcc found ($(NVCC)): building the CUDA backend (sm_90 + PTX); CUDA=0 to skip)
  CFLAGS  += -DUSE_CUDA -I$(CUDA_ROOT)/include
  NVFLAGS := -O2 -g -std=c++17 -I. -Icommon -I$(BUILD)/gen -Xcompiler -Wall,-fPIC \
             -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
  CUDA_LIBDIRS := $(wildcard $(CUDA_ROOT)/lib64 $(CUDA_ROOT)/lib)
  LIBS += $(addprefix -L,$(CUDA_LIBDIRS)) $(addprefix -Wl$(comma)-rpath$(comma),$(CUDA_LIBDIRS)) \
          -lcublasLt -lcublas -lnccl -lcudart -lstdc++
else ifeq ($(CUDA),1)
  $(error CUDA=1 but nvcc was not found (set CUDA_HOME or put nvcc on PATH))
else
  $(info ✗ nvcc not used: CPU (OpenBLAS) backend only)
endif

# ---------------------------------------------------------------------------------------------- sources
PROTOS   := $(wildcard proto/*.proto)
PROTO_C  := $(patsubst proto/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTOS))
PROTO_H  := $(PROTO_C:.c=.h)
PROTO_O  := $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(PROTO_C))
# SKIP="common/x common/y" leaves folders out of the library (for building one part while another is mid-edit).
COMMON_SRC := $(filter-out $(addsuffix /%,$(SKIP)),$(sort $(shell find common -name '*.c' 2>/dev/null)))
CUDA_SRC   := $(if $(NVCC),$(sort $(wildcard common/backend/cuda/*.cu)))
SERVICES   := $(notdir $(patsubst %/,%,$(sort $(dir $(wildcard services/*/main.c)))))
TOOLS_SRC  := $(sort $(wildcard tools/*.c))
TEST_SRC   := $(sort $(wildcard tests/unit/test_*.c tests/integration/test_*.c))
TESTSUP_SRC := $(sort $(wildcard tests/support/*.c))
LONGTEST_SRC := $(sort $(wildcard tests/integration/longtest_*.c))
FUZZ_SRC   := $(sort $(wildcard tests/fuzz/fuzz_*.c))
BENCH_SRC  := $(sort $(wildcard bench/*/bench_*.c))

# CPU kernel families (common/backend/cpu/cpu_family.h): these sources are compiled once per family, each object with
# the family's instruction set and its public kernels renamed (cpu_family_names.h); cpu_family.c dispatches.
FAMILY_SRC   := common/backend/cpu/cpu_ops.c common/backend/cpu/cpu_decode.c
CPU_FAMILIES := generic $(if $(filter x86_64,$(shell uname -m)),avx2 avx512)
FAM_LEVEL_generic := 0
FAM_LEVEL_avx2    := 1
FAM_LEVEL_avx512  := 2
FAM_FLAGS_avx2    := -mavx2 -mfma -mf16c
FAM_FLAGS_avx512  := -mavx2 -mfma -mf16c -mavx512f -mavx512vl -mavx512bw -mavx512dq
FAMILY_OBJ   := $(foreach f,$(CPU_FAMILIES),$(patsubst %.c,$(BUILD)/obj/%.$(f).o,$(FAMILY_SRC)))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
LIBDAPO      := $(BUILD)/lib/libdapo.a
LIBDAPO_CUDA := $(if $(CUDA_SRC),$(BUILD)/lib/libdapo_cuda.a)
SVC_LIBS     := $(foreach s,$(SERVICES),$(BUILD)/lib/libsvc_$(s).a)
ALL_LIBS     := $(SVC_LIBS) $(LIBDAPO) $(LIBDAPO_CUDA)
LINK_LIBS    := -Wl,--start-group $(ALL_LIBS) -Wl,--end-group $(LIBS)

SVC_BINS  := $(foreach s,$(SERVICES),$(BUILD)/bin/dapo-$(s))
TOOL_BINS := $(patsubst tools/%.c,$(BUILD)/bin/%,$(TOOLS_SRC))
TEST_BINS := $(addprefix $(BUILD)/tests/,$(notdir $(TEST_SRC:.c=)))
LONGTEST_BINS := $(addprefix $(BUILD)/tests/,$(notdir $(LONGTEST_SRC:.c=)))
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
BENCH_BINS := $(addprefix $(BUILD)/bench/,$(notdir $(BENCH_SRC:.c=)))

.PHONY: all deps test test-build run ablation bench fixtures check-long check-k8s check-tfevents clean fuzz gpu-bundle
.SECONDARY:            # keep intermediate objects (tools/*.o, tests/*.o): no rebuild on the next make
.DEFAULT_GOAL := all
all: $(SVC_BINS) $(TOOL_BINS)

# Rebuild everything when the flags change (docs/conventions.md rule 14).
FLAGS_STAMP := $(BUILD)/.flags
$(shell mkdir -p $(BUILD) && echo '$(CC) $(CFLAGS) $(LDFLAGS) $(LIBS) $(NVCC)' > $(FLAGS_STAMP).new && \
  (cmp -s $(FLAGS_STAMP).new $(FLAGS_STAMP) || mv $(FLAGS_STAMP).new $(FLAGS_STAMP)); rm -f $(FLAGS_STAMP).new)

# ---------------------------------------------------------------------------------------------- rules
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h &: proto/%.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --proto_path=proto --c_out=$(BUILD)/gen $<

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP) | $(PROTO_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/gen/%.pb-c.o: $(BUILD)/gen/%.pb-c.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -Werror,$(CFLAGS)) -Wno-unused-parameter -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu $(FLAGS_STAMP) | $(PROTO_H)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@

define family_rule
$(BUILD)/obj/%.$(1).o: %.c $(FLAGS_STAMP) | $(PROTO_H)
	@mkdir -p $$(dir $$@)
	$(CC) $(CFLAGS) $(FAM_FLAGS_$(1)) -DCPU_FAM=$(1) -DCPU_FAM_LEVEL=$(FAM_LEVEL_$(1)) -c $$< -o $$@
endef
$(foreach f,$(CPU_FAMILIES),$(eval $(call family_rule,$(f))))

$(LIBDAPO): $(call obj,$(filter-out $(FAMILY_SRC),$(COMMON_SRC))) $(FAMILY_OBJ) $(PROTO_O)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/lib/libdapo_cuda.a: $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CUDA_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# services/<svc>/static/* are embedded into libsvc_<svc>.a as `static_files_<svc>` (common/core/embed.h).
define service_rules
$(BUILD)/gen/static_$(1).c: $(sort $(wildcard services/$(1)/static/*)) tools/embed_static.sh
	@mkdir -p $$(dir $$@)
	tools/embed_static.sh static_files_$(1) $$(filter-out tools/%,$$^) > $$@
$(BUILD)/obj/gen/static_$(1).o: $(BUILD)/gen/static_$(1).c
	@mkdir -p $$(dir $$@)
	$(CC) $(CFLAGS) -c $$< -o $$@
$(BUILD)/lib/libsvc_$(1).a: $(call obj,$(filter-out services/$(1)/main.c,$(wildcard services/$(1)/*.c))) $(LIBDAPO) \
                            $(if $(wildcard services/$(1)/static/*),$(BUILD)/obj/gen/static_$(1).o)
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$(filter %.o,$$^)
$(BUILD)/bin/dapo-$(1): $(call obj,services/$(1)/main.c) $(ALL_LIBS)
	@mkdir -p $$(dir $$@)
	$(CC) $(LDFLAGS) $$< $(LINK_LIBS) -o $$@
endef
$(foreach s,$(SERVICES),$(eval $(call service_rules,$(s))))

$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $< $(LINK_LIBS) -o $@

# test support code (tests/support/: the fake coordinator), linked into the test programs only
TESTSUP_LIB := $(BUILD)/lib/libdapo_testsup.a
$(TESTSUP_LIB): $(call obj,$(TESTSUP_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
# test-only programs (tests/support/bin/*.c: the dashboard tests' demo coordinator)
TESTPROG_SRC := $(sort $(wildcard tests/support/bin/*.c))
TESTPROG_BINS := $(patsubst tests/support/bin/%.c,$(BUILD)/tests/%,$(TESTPROG_SRC))
$(BUILD)/tests/%: $(BUILD)/obj/tests/support/bin/%.o $(TESTSUP_LIB) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $< $(TESTSUP_LIB) $(LINK_LIBS) -o $@
$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(TESTSUP_LIB) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $< $(TESTSUP_LIB) $(LINK_LIBS) -lcmocka -o $@
$(BUILD)/tests/%: $(BUILD)/obj/tests/integration/%.o $(TESTSUP_LIB) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $< $(TESTSUP_LIB) $(LINK_LIBS) -lcmocka -o $@

$(BUILD)/bench/%: $(ALL_LIBS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(wildcard bench/*/$*.c) $(LDFLAGS) $(LINK_LIBS) -o $@
# each bench binary also depends on its own source (and, through the .d that -MMD writes beside it, its headers)
$(foreach b,$(BENCH_SRC),$(eval $(BUILD)/bench/$(notdir $(b:.c=)): $(b)))
$(addsuffix .d,$(BENCH_BINS)): ;     # included below; never made by the bench rule above

# Fuzz targets: clang + libFuzzer + ASan/UBSan, compiled against the sources each target lists in a
# "// fuzz-sources: a.c b.c" line (so a target does not drag the whole library through clang).
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -I. -Icommon -I$(BUILD)/gen $(PKG_CFLAGS)
$(BUILD)/fuzz/%: tests/fuzz/%.c $(FLAGS_STAMP) | $(PROTO_H)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $< $$(sed -n 's|^// fuzz-sources:||p' $<) $(PKG_LIBS) -lpthread -lm -o $@
# ... and each target is rebuilt when one of its listed sources changes
$(foreach f,$(FUZZ_SRC),$(eval $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(f)): $(shell sed -n 's|^// fuzz-sources:||p' $(f))))
fuzz: $(FUZZ_BINS)

# ---------------------------------------------------------------------------------------------- targets
deps:
	@deps/install.sh

# make test: deps (near-instant when present), build, run every test binary and script. FUZZ_SECONDS
# bounds each fuzz target (8 s here, 600 s in check-long).
FUZZ_SECONDS ?= 8
test: deps
	@$(MAKE) --no-print-directory test-build
	@BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run.sh

test-build: all $(TEST_BINS) $(TESTPROG_BINS) $(FUZZ_BINS)

# check-long: everything in make test with 10-minute fuzzing, plus tests/integration/longtest_* (headless
# Chromium: installed here only, it is too heavy for make test), then the container image and the no-cluster pod
# run of deploy/k8s (tests/k8s/pod_run.py: the image's daemons started from the manifests, without a kubelet), then
# the GPU bundle in a clean debootstrap root (tests/gpu/clean_root_test.sh).
check-long: deps
	@deps/install.sh --extra chromium
	@$(MAKE) --no-print-directory test-build $(LONGTEST_BINS)
	@BUILD=$(BUILD) FUZZ_SECONDS=600 LONG=1 tests/run.sh
	@$(MAKE) --no-print-directory image
	pip install -q -r tests/k8s/requirements.txt
	@DAPO_BUILD=$(abspath $(BUILD)) python3 tests/k8s/pod_run.py
	@$(MAKE) --no-print-directory gpu-bundle
	@tests/gpu/clean_root_test.sh

# gpu-bundle: the CUDA build (sm_90 + PTX) packed for a GPU host that has a driver and the CUDA runtime but none of the
# build's -dev packages (bench/gpu/make_bundle.sh: bundle/dapo-gpu.tar.xz <= 28 MiB, bundle/run.sh). Carry bundle/
# with the tree to such a host and run bundle/run.sh there (README "The GPU check").
gpu-bundle:
	@$(MAKE) --no-print-directory CUDA=1 all $(BUILD)/tests/test_backend_conformance
	@BUILD=$(BUILD) bench/gpu/make_bundle.sh

# check-k8s: deploy/k8s rendered with kubectl 1.20 (Debian's, from its .deb) and the one on PATH, yamllint,
# kubernetes-validate, and every container's command checked with --print-config (tests/k8s/check_manifests.py;
# pip packages: .ci/run calls it after make test).
check-k8s: all
	pip install -q -r tests/k8s/requirements.txt
	@DAPO_BUILD=$(abspath $(BUILD)) python3 tests/k8s/check_manifests.py

# check-tfevents: the TensorBoard event files of test_main_job's two-step run (trainer.logger=tensorboard) read back
# with the tensorboard package's reader and compared with its metrics.jsonl (tests/reference/check_tfevents.py; pip:
# .ci/run calls it after make test, which leaves the run in $(BUILD)/test-logs/python-reward).
TFE_RUN := $(BUILD)/test-logs/python-reward
check-tfevents: all
	pip install -q -r tests/reference/requirements-tfevents.txt
	@test -d $(TFE_RUN)/tb || { $(MAKE) --no-print-directory $(BUILD)/tests/test_main_job && \
	  DAPO_ROOT=$(CURDIR) DAPO_BUILD=$(abspath $(BUILD)) $(BUILD)/tests/test_main_job; }
	python3 tests/reference/check_tfevents.py $(TFE_RUN)/tb $(TFE_RUN)/ckpt/metrics.jsonl

run: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) deploy/local/run.sh $(RUN_ARGS)

# ablation: the DAPO paper's Table 1 at small scale (tools/ablation/run.sh: 7 rows x SEEDS seeds of STEPS steps and
# an SFT-only control, about 90 minutes on 2 cores once the base models exist; resumable), then docs/ablation.md
# and its plots (matplotlib, pip). Run it on a quiet machine: it measures wall-clock.
ablation: deps
	@$(MAKE) --no-print-directory all
	pip install -q -r tools/ablation/requirements.txt
	@BUILD=$(BUILD) tools/ablation/run.sh

fixtures:
	pip install -q -r tests/reference/requirements.txt
	@for s in tests/reference/make_*.py; do echo "== $$s"; python3 $$s || exit 1; done

BENCHES := $(notdir $(patsubst %/,%,$(sort $(dir $(wildcard bench/*/Makefile.inc bench/*/run.sh)))))
bench: $(addprefix bench-,$(BENCHES))
bench-%: all $(BENCH_BINS)
	@test -x bench/$*/run.sh || { echo "no benchmark named $* (have: $(BENCHES))"; exit 2; }
	pip install -q -r bench/requirements.txt
	@BUILD=$(BUILD) bench/$*/run.sh

# make image / make image-cuda: the container image (deploy/docker/: Dockerfile, Dockerfile.cuda), built with buildah
# from a debootstrapped Debian base; tags localhost/dapo:latest (+ :build) / localhost/dapo:cuda (+ :cuda-build).
.PHONY: image image-cuda
image:
	@deploy/docker/build-image.sh cpu
image-cuda:
	@deploy/docker/build-image.sh cuda

clean:
	rm -rf build build-san

-include $(shell find $(BUILD)/obj $(BUILD)/bench -name '*.d' 2>/dev/null)
