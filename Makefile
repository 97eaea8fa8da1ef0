# execute-code — see README.md.
GO      ?= go
BIN     := bin/execute-code
SHARED  ?= ../shared
PYTHON  ?= python3

.PHONY: build run test unit acceptance bench bench-summary fuzz lint clean peers proto etcd

# Static (no cgo): nothing in the project needs cgo, and a static binary
# skips the dynamic loader at every start.
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/execute-code

# The main job on built-in defaults: a sample script calling tools.
INSPECTOR := integration/testdata/npm/node_modules/@modelcontextprotocol/inspector-cli/build
run: build peers
	@echo "== per_call: one fresh interpreter per call"
	$(BIN) run --root . --sample-host-tool cmd/execute-code/testdata/sample.py
	@echo
	@echo "== per_call, sandboxed: confined to its workspace, the tool root and python's own files"
	$(BIN) run --root . --sandbox landlock --sample-host-tool cmd/execute-code/testdata/sample.py
	@echo
	@echo "== session: three cells on one persistent kernel, driven through serve (the third calls the sample host tool)"
	$(BIN) serve --root . --sample-host-tool < cmd/execute-code/testdata/session.jsonl
	@echo
	@echo "== per_call, with an MCP tool source: the filesystem server's tools as helpers, three reads in one batch()"
	$(BIN) run --root . --mcp "fs=$(CURDIR)/$(PEERS)/node_modules/.bin/mcp-server-filesystem $(CURDIR)" cmd/execute-code/testdata/mcp_sample.py
	@echo
	@echo "== mcp: the MCP inspector's CLI (a client nobody here wrote) calls execute_code over MCP"
	@# The inspector finds its own package.json from its working directory.
	cd $(INSPECTOR) && node cli.js --cli $(CURDIR)/$(BIN) mcp --root $(CURDIR) --method tools/call \
	  --tool-name execute_code --tool-arg "script=text(read('go.mod', limit=1))"

test: peers unit acceptance

# The real MCP clients and servers the tests drive, from the npm registry
# at the versions the lockfile pins; installed again only when it changes.
PEERS := integration/testdata/npm
peers: $(PEERS)/node_modules/.installed
$(PEERS)/node_modules/.installed: $(PEERS)/package-lock.json
	cd $(PEERS) && npm ci --no-audit --no-fund
	touch $@

# The tests run with a TMPDIR of their own that must be empty afterwards,
# and no process that inherited it may still run: nothing a test starts,
# files included, may outlive it. Survivors are listed, then killed.
unit: peers etcd
	$(GO) mod download
	$(GO) vet ./...
	@tmp=$$(mktemp -d) && rc=0; \
	TMPDIR=$$tmp $(GO) test -race -count=1 -timeout 12m ./... || rc=1; \
	procs=$$(grep -lsa "TMPDIR=$$tmp" /proc/[0-9]*/environ | cut -d/ -f3); \
	if [ -n "$$procs" ]; then echo "tests left processes running:"; \
	  for p in $$procs; do echo "$$p $$(tr '\0' ' ' < /proc/$$p/cmdline 2>/dev/null | cut -c1-200)"; done; \
	  kill -9 $$procs 2>/dev/null; rc=1; fi; \
	left=$$(find $$tmp -mindepth 1 -maxdepth 1 | head -20); \
	if [ -n "$$left" ]; then echo "tests left files in their TMPDIR:"; echo "$$left"; rc=1; fi; \
	rm -rf $$tmp; exit $$rc

# The etcd the membership tests start and stop themselves
# (internal/cluster/membership): Debian's etcd-server, unpacked into bin/
# rather than installed, so a developer needs no root; apt-get download
# needs only the package lists (apt-get update).
ETCD_DIR := bin/.etcd
ETCD_BIN := $(ETCD_DIR)/root/usr/bin/etcd
etcd: $(ETCD_BIN)
$(ETCD_BIN):
	@rm -rf $(ETCD_DIR) && mkdir -p $(ETCD_DIR)
	cd $(ETCD_DIR) && { apt-get download etcd-server || \
	  { echo "apt-get download etcd-server failed: are the package lists there (apt-get update)?"; exit 1; }; } && \
	  dpkg -x etcd-server_*.deb root && rm -f etcd-server_*.deb
	$(ETCD_BIN) --version

# The scenarios run with a TMPDIR of their own, removed afterwards: spill
# files are kept for a day by design, but a test run must leave nothing.
acceptance: build
	@tmp=$$(mktemp -d) && rc=0; \
	TMPDIR=$$tmp $(PYTHON) $(SHARED)/acceptance/run.py $(BIN) $(SHARED)/acceptance -m per_call -v || rc=1; \
	TMPDIR=$$tmp $(PYTHON) $(SHARED)/acceptance/run.py $(BIN) $(SHARED)/acceptance -m session -v || rc=1; \
	rm -rf $$tmp; exit $$rc

# The benchmarks every performance goal is judged by: each integration
# benchmark runs five times (-count 5) and reports its figures as ratios
# to a floor measured in the same run (integration/perf_floor_test.go).
# Everything printed is kept in BENCH_OUT, and the last step prints each
# metric's median over the runs with its range. About 5 minutes on 2 cores.
BENCH_OUT ?= bin/bench.txt
# bench_step runs one `go test` of the suite, printing and keeping its
# output; the step fails as the test does.
bench_step = { $(GO) test -run '^$$' $(1); echo $$? > $(BENCH_OUT).rc; } 2>&1 | tee -a $(BENCH_OUT); \
	rc=$$(cat $(BENCH_OUT).rc); rm -f $(BENCH_OUT).rc; exit $$rc
bench: peers
	@mkdir -p $(dir $(BENCH_OUT)) && : > $(BENCH_OUT)
	$(call bench_step,-bench . -benchtime 1x -count 5 -timeout 30m ./integration/)
	$(call bench_step,-bench . -benchmem ./pump/ ./tools/ ./kernelworker/ ./registry/)
	$(call bench_step,-bench 'MCP|ServeLine' -benchmem -benchtime 300x -count 5 ./cmd/execute-code/)
	@$(MAKE) --no-print-directory bench-summary

# bench-summary prints each metric of BENCH_OUT: its median over the runs,
# its range and the number of runs.
bench-summary:
	@echo "== median of the runs [min .. max] (n runs), from $(BENCH_OUT)"
	@awk '/^pkg: / { n = split($$2, p, "/"); pkg = p[n] } \
	  /^Benchmark/ { for (i = 3; i < NF; i += 2) print pkg "." $$1, $$(i+1), $$i }' $(BENCH_OUT) | sort -k1,1 -k2,2 -k3,3g | \
	  awk 'function flush() { if (n == 0) return; m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2; \
	      printf "%-46s %-36s %12.4g  [%.4g .. %.4g] (%d)\n", name, unit, m, v[1], v[n], n; n = 0 } \
	    { if ($$1 " " $$2 != key) { flush(); key = $$1 " " $$2; name = $$1; unit = $$2 } v[++n] = $$3 } \
	    END { flush() }'

# Every fuzz target for FUZZTIME each; crashers land in testdata as seeds.
FUZZTIME ?= 60s
FUZZ_TARGETS := config:FuzzLoad pump:FuzzParseRequest internal/proc:FuzzSanitize \
	internal/proc:FuzzCapture internal/proc:FuzzScrubStream tools:FuzzReadLines tools:FuzzExtractHTML \
	shimpy:FuzzRunConfig privatetmp:FuzzParseMarker \
	kernelworker/internal/frame:FuzzParser kernelworker/internal/frame:FuzzStreamFastPath \
	kernelworker/internal/frame:FuzzCellFastPath \
	approval:FuzzParseDecision cmd/execute-code:FuzzServeLine \
	tools:FuzzIgnoreFile pump:FuzzParseFrameName internal/bell:FuzzDecoder \
	mcpsource:FuzzSignatureOf cmd/execute-code:FuzzParseMCP internal/proc:FuzzLaunchStatus \
	internal/cluster/membership:FuzzDecodeMember

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; fn=$${t#*:}; echo "== $$fn ($$pkg, $(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./$$pkg/; \
	done

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

clean:
	rm -rf bin

# Hardening: SOAK_CYCLES kernel lifecycles with injected faults, then the
# leak checks (processes, staging files, goroutines, RSS growth); then
# MEMORY_CYCLES attach/execute/detach cycles and, apart, MEMORY_CELLS cells
# on one kernel, each of which may grow the heap by under 1 MiB; then the
# benchmarks print heap bytes and objects per cycle and per cell (1,000
# each). `make test` runs the same tests scaled down (100 fault cycles,
# 200 memory cycles, 2,000 cells, bounds scaled alike).
.PHONY: soak load
SOAK_CYCLES ?= 1000
MEMORY_CYCLES ?= 10000
MEMORY_CELLS ?= 10000
soak:
	SOAK_CYCLES=$(SOAK_CYCLES) $(GO) test -run '^TestSoakKernelLifecyclesWithInjectedFaults$$' -count=1 -v -timeout 60m ./integration/
	MEMORY_CYCLES=$(MEMORY_CYCLES) MEMORY_CELLS=$(MEMORY_CELLS) $(GO) test -run '^Test(SessionCycles|CellsOnOneKernel)KeepTheHeapFlat$$' -count=1 -v -timeout 60m ./integration/
	$(GO) test -run '^$$' -bench 'Heap$$' -benchtime 10x -count=1 -timeout 30m ./integration/

# Load: 8 concurrent sessions x 200 cells x 5 helper calls; prints cells/s,
# helper calls/s and cell latency percentiles (LOAD_SESSIONS, LOAD_CELLS,
# LOAD_CALLS override).
load:
	LOAD=1 $(GO) test -run '^TestLoadConcurrentSessions$$' -count=1 -v -timeout 30m ./integration/

# The cluster's wire envelope (internal/cluster/wire) is generated code,
# committed so that neither CI nor a build needs protoc. This regenerates
# it with Debian's protoc (unpacked into bin/, not installed) and the
# protoc-gen-go matching the module's protobuf runtime.
# A dot directory: the go command skips it, and the package unpacks
# example .go files.
PROTOC_DIR := bin/.protoc
proto:
	@mkdir -p $(PROTOC_DIR) && cd $(PROTOC_DIR) && \
	  [ -x root/usr/bin/protoc ] || { apt-get download protobuf-compiler libprotoc32 libprotobuf32 && \
	  for f in *.deb; do dpkg -x $$f root; done; }
	GOBIN=$(CURDIR)/$(PROTOC_DIR) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$$($(GO) list -m -f '{{.Version}}' google.golang.org/protobuf)
	cd internal/cluster/wire && LD_LIBRARY_PATH=$(CURDIR)/$(PROTOC_DIR)/root/usr/lib/x86_64-linux-gnu \
	  PATH=$(CURDIR)/$(PROTOC_DIR):$$PATH $(CURDIR)/$(PROTOC_DIR)/root/usr/bin/protoc -I. \
	  --go_out=. --go_opt=paths=source_relative envelope.proto
