# blockfs: two commands do everything on a fresh machine (as root, or with fuse3 installed):
#   make demo   build, make a small dataset, pack, mount, read an epoch with dd, unmount
#   make test   vet and run every test, including real FUSE mounts
GO        ?= go
BIN       := bin/blockfs
DEMO      := build/demo
DEMO_MB   ?= 256
# A guard against a hung test, not the suite's budget: ./test takes about 17 minutes on the
# 2-core machines, and a slower or busier one must not fail for it.
TEST_TIMEOUT ?= 30m

.PHONY: all build wheel deps test unit fuzz demo bench clean fmt vet

all: build

# bin/blockfs-tables is the same command with apache/arrow-go linked in (-tags tables): pack runs
# it to read Parquet and Arrow, so the mount's daemon does not carry arrow-go's resident memory.
build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/blockfs
	$(GO) build -buildvcs=auto -tags tables -o $(BIN)-tables ./cmd/blockfs

# A platform wheel of python/ that carries a static blockfs binary (for go env's GOOS/GOARCH):
# pip install dist/blockfs-*.whl then gives the blockfs command and blockfs.Mount with no Go
# toolchain (scripts/wheel.sh; offline, with Debian's python3-setuptools, -wheel and -pip).
DIST ?= dist
wheel:
	@GO="$(GO)" PYTHON="$(PYTHON)" scripts/wheel.sh $(DIST)

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

# The Debian packages the tests use, one list: scripts/deps.txt (installed when run as root by
# scripts/deps.sh; .ci/run installs the same list and nothing else).
deps:
	@scripts/deps.sh

# No function that no build of blockfs reaches (scripts/deadcode.sh).
.PHONY: deadcode
deadcode:
	@GO=$(GO) scripts/deadcode.sh

# Every Python module the tests, examples, benchmarks and package import is the standard
# library's, the project's, in scripts/deps.txt, or imported under a guard.
.PHONY: pyimports
pyimports:
	@$(PYTHON) scripts/pyimports.py

# Every package but test/: kernel-free, run with the race detector.
UNIT := ./source/... ./layout/... ./shuffle/... ./cache/... ./view/... ./pack/... ./fs/... ./mount/... ./cmd/... ./internal/...

# Unit tests run with the race detector; test/ mounts the built binary. The object store tests
# run against a MinIO server that scripts/minio.sh builds once per machine (about 5 minutes), and
# the gs:// tests against fake-gcs-server (scripts/fakegcs.sh, about 3 minutes, once), the az://
# tests against Azurite (scripts/azurite.sh, from npm, once). The mounted tests that mostly wait
# (for a store's answers and timeouts, the kernel's attribute timeout) or do one core's work (a
# Python reader and the daemon taking turns) call t.Parallel and run 6 at a time once the others
# are done; the rest run one after another (their timing, memory and page cache bounds assume
# the machine is theirs).
test: deps vet deadcode pyimports typecheck
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(UNIT)
	$(GO) test -race -count=1 -tags tables -run 'Parquet|Arrow|Table' ./pack/
	$(GO) test -count=1 -tags tables -run 'Plot' ./cmd/blockfs/
	BLOCKFS_MINIO="$$(scripts/minio.sh)" BLOCKFS_FAKE_GCS="$$(scripts/fakegcs.sh)" BLOCKFS_AZURITE="$$(scripts/azurite.sh)" $(GO) test -count=1 -parallel 6 -timeout $(TEST_TIMEOUT) ./test/...
	$(MAKE) --no-print-directory fuzz

# Type checks python/ with Debian's mypy (apt-get install python3-mypy): the package strictly
# (python/pyproject.toml's [tool.mypy]), the tests' annotated functions (python/tests/mypy.ini).
.PHONY: typecheck
typecheck:
	cd python && $(PYTHON) -m mypy --cache-dir ../build/mypy blockfs
	cd python/tests && $(PYTHON) -m mypy --config-file mypy.ini --cache-dir ../../build/mypy-tests .

# Bounded runs of every fuzz target (the seed corpora also run in plain go test). Budgets are
# execution counts, about 10 s each on a 2-vCPU VM: a duration (-fuzztime 10s) races the fuzz
# coordinator's deadline in Go before 1.27 (go.dev/issue/75804) and fails with "context deadline
# exceeded" on a loaded machine, with no failing input.
# Each entry is TARGET:PACKAGE:EXECUTIONS. A target that is not in its package fails the run
# (go test -fuzz with no matching target would pass without fuzzing anything). The inputs'
# datasets go to a folder in memory (/dev/shm) where there is one: a pack's syncfs(2) on the
# disk costs FuzzOffsetMapping 90 s of its 2,500 executions on a busy disk, 13 s in memory. The
# test binaries are still built where they were (GOTMPDIR): /dev/shm may be small or noexec.
FUZZ_SCALE ?= 1
FUZZ := FuzzParseManifest:./layout/:150000 FuzzParseNpy:./layout/:300000 FuzzOrder:./shuffle/:150000 \
	FuzzOffsetMapping:./view/:2500 FuzzNames:./view/:250000
fuzz:
	@set -e; if [ -d /dev/shm ] && tmp=$$(mktemp -d /dev/shm/blockfs-fuzz.XXXXXX); then \
		trap 'rm -rf "$$tmp"' EXIT; export GOTMPDIR="$${GOTMPDIR:-$${TMPDIR:-/tmp}}" TMPDIR="$$tmp"; fi; \
	for e in $(FUZZ); do \
		t=$${e%%:*}; rest=$${e#*:}; pkg=$${rest%%:*}; n=$${rest#*:}; \
		$(GO) test -list "^$$t$$" $$pkg | grep -qx "$$t" || { echo "fuzz target $$t is not in $$pkg"; exit 1; }; \
		echo "$(GO) test -run '^$$' -fuzz '^$$t$$' -fuzztime $$((n * $(FUZZ_SCALE)))x $$pkg"; \
		$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $$((n * $(FUZZ_SCALE)))x $$pkg; \
	done

unit:
	$(GO) test -race -count=1 $(UNIT)

demo: build
	@scripts/demo.sh $(BIN) $(DEMO) $(DEMO_MB)

# The side-by-side benchmark of docs/PERFORMANCE.md (root; about 10 minutes, and 10 more for the
# larger-than-memory rows of bench/larger.py, which make a file of 0.6 x the memory once; not
# in make test).
BENCH_GIB ?= 2
# Debian's python3, which has numpy (python3 on PATH may be a bare interpreter or a venv).
PYTHON ?= /usr/bin/python3
bench: build
	$(GO) build -o bin/loopback ./bench/loopback
	$(GO) build -o bin/s3get ./bench/s3get
	$(PYTHON) bench/bench.py --gib $(BENCH_GIB) --markdown build/bench/results.md
	$(PYTHON) bench/larger.py --markdown build/bench/larger.md
	$(PYTHON) bench/mixture_bench.py --markdown build/bench/mixture.md
	$(PYTHON) bench/fields_bench.py --markdown build/bench/fields.md

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin build dist
