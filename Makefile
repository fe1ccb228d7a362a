# corgipile: PGXS build of the PostgreSQL extension, plus the project's
# test and demo entry points.  PG_CONFIG selects the server to build for.

# The engine's library.  PGXS's MODULE_big would link it as corgipile.so
# in the checkout root, where it shadows the Python package for anything
# run from there (python -c "import corgipile" loads the .so): so it is
# linked into build/ by the rules after the PGXS include, and installed
# as $(pkglibdir)/corgipile.so, which module_pathname ('$libdir/corgipile')
# names.
MODULE_name = corgipile
SHLIB = build/$(MODULE_name)$(DLSUFFIX)
OBJS = \
	extension/corgipile.o \
	extension/util/datum_convert.o \
	extension/util/relation.o \
	extension/util/prefetch.o \
	extension/util/spi.o \
	extension/util/json.o \
	extension/cluster/citus_meta.o \
	extension/cluster/node_conn.o \
	extension/params/params.o \
	extension/params/shuffles.o \
	extension/io/block_cache.o \
	extension/io/buffer.o \
	extension/io/heap_page.o \
	extension/io/layout.o \
	extension/io/prep.o \
	extension/model/metrics.o \
	extension/model/model_copy.o \
	extension/model/model_sync.o \
	extension/model/model_insert.o \
	extension/model/model_layout.o \
	extension/model/model_load.o \
	extension/model/model_store.o \
	extension/shuffle/strategy.o \
	extension/shuffle/corgipile.o \
	extension/shuffle/block_only.o \
	extension/shuffle/no_shuffle.o \
	extension/shuffle/window.o \
	extension/shuffle/sliding_window.o \
	extension/shuffle/mrs.o \
	extension/shuffle/piles.o \
	extension/shuffle/two_pass.o \
	extension/shuffle/shuffle_once.o \
	extension/shuffle/epoch_shuffle.o \
	extension/shuffle/grab.o \
	extension/nodes/block_shuffle.o \
	extension/nodes/call_scan.o \
	extension/nodes/first_pass.o \
	extension/nodes/shard_round.o \
	extension/nodes/dist_train.o \
	extension/nodes/holdout.o \
	extension/nodes/parallel.o \
	extension/nodes/planner.o \
	extension/nodes/sgd.o \
	extension/nodes/sgd_checks.o \
	extension/nodes/sgd_epoch.o \
	extension/nodes/sgd_grab.o \
	extension/nodes/sgd_polish.o \
	extension/nodes/sgd_save.o \
	extension/nodes/sgd_train.o \
	extension/nodes/sgd_validate.o \
	extension/nodes/sgd_warm.o \
	extension/nodes/tuple_shuffle.o \
	extension/functions/evaluate.o \
	extension/functions/evaluate_dist.o \
	extension/functions/model_admin.o \
	extension/functions/model_coefficients.o \
	extension/functions/predict.o \
	extension/functions/shuffle_table.o \
	extension/functions/sizing.o \
	extension/functions/block_rows.o \
	extension/functions/cluster_nodes.o \
	extension/functions/model_view.o \
	extension/core/linear_model.o \
	extension/core/shuffle.o \
	extension/core/worker.o \
	extension/core/grab.o \
	extension/core/merge.o \
	extension/core/polish.o \
	extension/core/converge.o \
	extension/core/preprocess.o

MODULEDIR = extension
# The install script of the current version is built from one source,
# sql/corgipile.sql (as pgvector does); the released install script
# (0.1.0) and the upgrade scripts are installed as they are.
EXTVERSION := $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" extension/corgipile.control)
DATA_built = sql/corgipile--$(EXTVERSION).sql
DATA = extension/corgipile.control \
	$(filter-out $(DATA_built),$(wildcard sql/corgipile--*.sql))

REGRESS = setup train explain errors predict models strategies multiclass shuffle_table model_privileges upgrade grab preprocess parallel validation divergence stopping torch_io missing model_copy
REGRESS_OPTS = --inputdir=tests/regress --outputdir=tests/regress

PG_CPPFLAGS = -I$(srcdir)/extension -I$(shell $(PG_CONFIG) --includedir)
# libpq, for the sessions a distributed training holds on the nodes
# (cluster/node_conn.c), as postgres_fdw links it
SHLIB_LINK_INTERNAL = -L$(shell $(PG_CONFIG) --libdir) -lpq
# -fno-semantic-interposition: in position-independent code GCC will not
# inline a function other files can see (cp_margin_dense, cp_dloss,
# cp_stats_add into the SGD step), in case another library interposes it;
# nothing does, and inlining them takes 2-5% of an epoch's instructions
# (callgrind_epoch.sh: a later corgipile epoch 708 -> 678 a row) with the
# same arithmetic, so the same weights
# -ffp-contract=off: a multiplication and an addition are never fused into
# one rounding (FMA). GCC's default fuses them wherever the instruction set
# has FMA (aarch64; x86-64 built for a CPU that has it), clang's within an
# expression, and the bitcode the JIT inlines is compiled for the host
# CPU: without it a seed's weights would change with the machine.
# tests/python/test_engine_pinned.py pins x86-64's SSE2 results.
PG_CFLAGS = -pthread -fno-semantic-interposition -ffp-contract=off
# GraB's per-element adds (core/grab.c) vectorized: no sum is reordered
# (GCC keeps floating-point reductions in order), so the weights stay
# bit-identical; docs/grab.md
extension/core/grab.o: CFLAGS += -ftree-vectorize
SHLIB_LINK = -pthread -lm

EXTRA_CLEAN = tests/regress/results tests/regress/regression.diffs \
	tests/regress/regression.out $(UNIT_TESTS) build $(OBJS) $(OBJS:.o=.bc) \
	$(MODULE_name)$(DLSUFFIX)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS gives PG_CFLAGS to the compiler, not to the bitcode's clang
override BITCODE_CFLAGS += -ffp-contract=off

# What PGXS does for MODULE_big (Makefile.shlib's position-independent
# code and link line, install-lib, the LLVM bitcode for JIT inlining), with
# the library in build/.
override CFLAGS += $(CFLAGS_SL)
all: $(SHLIB)
$(SHLIB): $(OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -o $@ $(OBJS) $(LDFLAGS) $(LDFLAGS_SL) $(SHLIB_LINK_INTERNAL) $(SHLIB_LINK) $(BE_DLLLIBS)

$(DATA_built): sql/corgipile.sql extension/corgipile.control
	cp $< $@

install: install-module
installdirs: installdirs-module
.PHONY: install-module installdirs-module uninstall-module
installdirs-module:
	$(MKDIR_P) '$(DESTDIR)$(pkglibdir)'
install-module: $(SHLIB) installdirs-module
	$(INSTALL_SHLIB) $(SHLIB) '$(DESTDIR)$(pkglibdir)/$(MODULE_name)$(DLSUFFIX)'
ifeq ($(with_llvm), yes)
	$(call install_llvm_module,$(MODULE_name),$(OBJS))
endif
uninstall: uninstall-module
uninstall-module:
	rm -f '$(DESTDIR)$(pkglibdir)/$(MODULE_name)$(DLSUFFIX)'
ifeq ($(with_llvm), yes)
	$(call uninstall_llvm_module,$(MODULE_name))
endif

# PGXS tracks no header dependencies; the headers are few and shared, so
# any change to one rebuilds every object (stale struct layouts crash).
HEADERS = $(wildcard extension/*.h extension/*/*.h)
$(OBJS) $(OBJS:.o=.bc): $(HEADERS)

# The pure C core, tested without a server: one test binary per core
# module, each linked with the whole core.
CORE_SRCS = extension/core/linear_model.c extension/core/polish.c extension/core/converge.c extension/core/shuffle.c extension/core/worker.c \
	extension/core/grab.c extension/core/preprocess.c extension/core/merge.c
UNIT_TESTS = tests/unit/test_core tests/unit/test_grab tests/unit/test_preprocess tests/unit/test_merge
tests/unit/test_%: tests/unit/test_%.c $(CORE_SRCS) $(wildcard extension/core/*.h) tests/unit/unit_check.h
	$(CC) $(CFLAGS) -I$(srcdir)/extension -I$(shell $(PG_CONFIG) --includedir-server) \
		-o $@ $< $(CORE_SRCS) \
		-L$(shell $(PG_CONFIG) --pkglibdir) -lpgcommon -lpgport -pthread -lm

.PHONY: unittest memcheck test demo bench docker-smoke test-madlib
unittest: $(UNIT_TESTS)
	for t in $^; do $$t || exit 1; done

# The C core under valgrind: any invalid read or write, use of an
# uninitialised value or leaked block fails the target.
memcheck: $(UNIT_TESTS)
	for t in $^; do \
		valgrind --quiet --error-exitcode=1 --leak-check=full --show-leak-kinds=all \
			--errors-for-leak-kinds=all $$t || exit 1; \
	done

test:
	tests/run_tests.sh

demo:
	scripts/with_demo_cluster.sh .venv/bin/python scripts/demo.py $(ARGS)

bench:
	CORGIPILE_DEPS=test scripts/with_demo_cluster.sh .venv/bin/python scripts/bench_epochs.py $(ARGS)

# Opt-in, not part of `make test`: build both Docker images and run them for
# real (first start, a training, the client CLI, a restart, the preload
# switch) with Docker, or podman where Docker is absent; without a registry,
# on local stand-ins for the base images.  docker/README.md.
docker-smoke:
	scripts/docker_smoke.sh $(ARGS)

# Opt-in, not part of `make test` (building MADlib takes 6-8 minutes on 2
# idle cores, 13-35 under load): the MADlib runner of `corgipile bench`
# against a real Apache MADlib 2.1.0, built from vendored sources
# (CORGIPILE_MADLIB_VENDOR) into a relocated copy of PostgreSQL under
# build/madlib (reused by later runs), on a throwaway cluster.
# docs/benchmarks.md, "Testing against a real MADlib".
test-madlib:
	scripts/test_madlib.sh $(ARGS)
