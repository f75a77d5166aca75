# Mantis — make help lists the targets.

GO        ?= go
BIN       := bin
STACK_DIR ?= .mantis
CMDS      := mandible thorax agent mantisctl
# -parallel 4: the suite waits on servers and processes more than it computes (about
# 0.9 of 2 cores busy over a run), so each package runs four parallel tests at a time
# rather than GOMAXPROCS (2): internal/testrig/e2e takes 240 s instead of 300 s.
GOTEST_FLAGS ?= -count=1 -timeout 30m -parallel 4

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# --version of every binary reports these (internal/version); a build outside a git
# checkout reports "dev".
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/mantis-deploy/mantis/internal/version.version=$(VERSION) \
	-X github.com/mantis-deploy/mantis/internal/version.commit=$(COMMIT)

# $(call testlist,ARGS) is what tools/testlist derives from the tree (the fuzz targets,
# the packages that need no server, the tests carrying a marker); make stops when it
# fails or lists nothing, rather than run an empty list or every test. Only the recipes
# that use a list run it.
testlist = $(or $(shell $(GO) run ./tools/testlist $(1)),$(error tools/testlist $(1) listed nothing))

.PHONY: build
build: ## Build the four binaries into bin/.
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))

.PHONY: tools
tools: build ## Install what the local stack needs and the machine lacks (temporal CLI, RabbitMQ).
	$(BIN)/mantisctl dev install

.PHONY: run
run: build ## Set up and run the whole local stack (Ctrl-C stops it).
	$(BIN)/mantisctl dev up --dir $(STACK_DIR)

# `--test-packages` installs what the suite runs besides the servers (PgBouncer, stunnel,
# Chromium) once, before go test starts, so that no test installs anything. The dev
# stack's own tests run again shuffled, twice, so that a test leaving a package global
# changed fails the tests after it.
.PHONY: test
test: build console-tools ## Start real PostgreSQL, RabbitMQ and Temporal, run every test, stop them.
	$(BIN)/mantisctl dev exec --test-packages --dir $(STACK_DIR)/test -- sh -c \
		'$(GO) test $(GOTEST_FLAGS) ./... && $(GO) test -shuffle=on -count=2 -timeout 10m ./internal/testrig/devstack/'

# The packages whose tests need no server: tools/testlist keeps those whose test binary
# links nothing under internal/testrig/ (the rigs that start or reach PostgreSQL,
# RabbitMQ and Temporal). No dev stack: a quick check before `make test`, about 20 s
# with a warm build cache on the 2-core machine.
TEST_FAST_FLAGS ?= -count=1 -timeout 5m
.PHONY: test-fast
test-fast: ## Run the tests that need no server (packages found by their imports), with none started.
	$(GO) test $(TEST_FAST_FLAGS) $(call testlist,-fast)

# The packages whose code shares state between goroutines (the result batcher in schema,
# the activities, the pgnotify hub, Thorax's book and consumers, the agent's runner and
# output hub and its run journal, the broker, the event streams, the webhook workers), under the race
# detector on the same real servers as `make test`. About a minute warm on the 2-core machine, servers
# included; the first run also builds every dependency with -race (about 4 minutes).
RACE_PACKAGES ?= ./schema/ ./activities/ ./internal/pgnotify/ ./internal/thorax/ ./internal/agent/... \
	./internal/broker/ ./internal/mandible/sse/ ./internal/mandible/webhook/
.PHONY: test-race
test-race: build ## Run the packages with shared state under -race on real servers (RACE_PACKAGES).
	$(BIN)/mantisctl dev exec --dir $(STACK_DIR)/test-race -- $(GO) test -race $(GOTEST_FLAGS) $(RACE_PACKAGES)

# The console's browser test (internal/testrig/e2e/console_browser_test.go) drives headless
# Chromium (the Debian package) and runs axe-core in its pages; axe-core is fetched with
# npm pack into the cache, never committed.
AXE_VERSION := 4.14.1
AXE_DIR     := $(STACK_DIR)/cache/axe-core-$(AXE_VERSION)
.PHONY: console-tools
console-tools: ## Fetch axe-core into .mantis/cache (the console's browser test; make test installs Chromium).
	@test -f $(AXE_DIR)/axe.min.js || { \
		command -v npm >/dev/null || { echo "npm missing: apt-get install -y npm"; exit 1; }; \
		mkdir -p $(AXE_DIR) && cd $(AXE_DIR) && npm pack --silent axe-core@$(AXE_VERSION) >/dev/null && \
		tar -xzf axe-core-$(AXE_VERSION).tgz --strip-components=1 package/axe.min.js && rm -f axe-core-$(AXE_VERSION).tgz; }

.PHONY: test-temporal-server
# The end-to-end job on the production temporal-server v1.29.1 (PostgreSQL persistence,
# SQL visibility) instead of the dev server: first starts on fresh namespaces, the
# namespace and search-attribute checks, both agent modes, a CLI-started deployment,
# a search-attribute query, Temporal's authorizer refusing wrong tokens (on a temporal-server
# of its own with JWT authorization); then the fault suite's Temporal kill -9 scenario on a
# temporal-server of its own. The first run installs the server (about 10 minutes).
# MANTIS_REQUIRE_TEMPORAL_SERVER=1 fails the tests if the stack's Temporal is not a
# temporal-server, and TestTemporalServerKindAndPersistence checks its store is postgres12.
# The tests it runs carry the directive //mantis:temporal-server in their doc comment;
# tools/testlist reads the markers and gives the -run pattern and the packages.
TEMPORAL_SERVER_TESTS ?= $(call testlist,-marked temporal-server)
TEMPORAL_SERVER_PKGS  ?= $(call testlist,-marked temporal-server -packages)
test-temporal-server: build ## Run the end-to-end job and the Temporal kill -9 scenario against temporal-server.
	MANTIS_REQUIRE_TEMPORAL_SERVER=1 $(BIN)/mantisctl dev exec --temporal-server --test-packages --dir $(STACK_DIR)/test-server -- \
		$(GO) test $(GOTEST_FLAGS) -p 1 -run '$(TEMPORAL_SERVER_TESTS)' $(TEMPORAL_SERVER_PKGS)
	@mkdir -p $(STACK_DIR); rm -f $(STACK_DIR)/chaos-temporal-server.md
	MANTIS_FAULT_TEMPORAL=server MANTIS_CHAOS_TABLE=$(abspath $(STACK_DIR))/chaos-temporal-server.md \
		$(GO) test $(GOTEST_FLAGS) -run 'TestFastSubset/TemporalKilled$$' ./internal/testrig/chaos/; \
		status=$$?; cat $(STACK_DIR)/chaos-temporal-server.md 2>/dev/null; exit $$status

# docs/getting-started/first-fleet.md run as written on four hosts made of network
# namespaces (internal/testrig/fleet): a control host with PostgreSQL, RabbitMQ (TLS)
# and Temporal of the dev stack, Mandible and Thorax, and three targets with agents;
# it ends with the page's deployment succeeding on the three. As root (namespaces,
# bind mounts); it installs what it needs before go test starts, and the machine is
# left as it was. About 40 s on the 2-core machine, the build aside.
FLEET_TEST_FLAGS ?= -count=1 -timeout 10m
.PHONY: test-fleet
test-fleet: build ## Run the first-fleet page on a control host and three targets in network namespaces (root).
	@[ "$$(id -u)" = 0 ] || { echo "make test-fleet needs root (network namespaces, bind mounts)"; exit 1; }
	@missing=""; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	command -v setpriv >/dev/null || missing="$$missing util-linux"; \
	command -v systemd-analyze >/dev/null || missing="$$missing systemd"; \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	$(BIN)/mantisctl dev install
	MANTIS_TEST_FLEET=1 $(GO) test $(FLEET_TEST_FLAGS) ./internal/testrig/fleet/

.PHONY: bench
# Each benchmark runs its whole scenario (servers, processes, load) once and reports its
# own figures and ratios, hence -benchtime 1x. BENCH selects benchmarks by name.
# bench, chaos, soak and scale each end by writing their report, with the machine, the
# load and the commit, to a dated results file of bench/results/ (tools/results.sh).
BENCH ?= .
BENCH_OUTPUT ?= $(STACK_DIR)/bench-output.md
bench: build ## Run the benchmarks against real servers (BENCH=regexp selects); writes bench/results/.
	@mkdir -p $(STACK_DIR); printf '```\n' > $(BENCH_OUTPUT)
	{ $(BIN)/mantisctl dev exec --dir $(STACK_DIR)/bench -- $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime 1x -benchmem -timeout 60m ./...; \
		echo $$? > $(BENCH_OUTPUT).status; } | tee -a $(BENCH_OUTPUT); status=$$(cat $(BENCH_OUTPUT).status); printf '```\n' >> $(BENCH_OUTPUT); \
		tools/results.sh bench "make bench BENCH='$(BENCH)'" $(BENCH_OUTPUT); exit $$status

.PHONY: bench-check
# A short run of the benchmarks bench/floors.toml names (MANTIS_BENCH_SHORT=1: fewer
# calls, the same comparisons), then tools/benchcheck fails when a ratio to its
# same-run baseline is below its committed floor. Ratios only, never absolute times.
BENCH_CHECK        ?= ^(BenchmarkExecStoreCommandResult|BenchmarkDispatchClaim|BenchmarkDispatchEndToEndNudges)$$
BENCH_CHECK_OUTPUT ?= $(STACK_DIR)/bench-check.txt
bench-check: build ## Run the short benchmarks and fail when a ratio falls below bench/floors.toml.
	@mkdir -p $(STACK_DIR)
	$(BIN)/mantisctl dev exec --dir $(STACK_DIR)/bench-check -- env MANTIS_BENCH_SHORT=1 \
		$(GO) test -run '^$$' -bench '$(BENCH_CHECK)' -benchtime 1x -timeout 20m ./internal/testrig/e2e/ > $(BENCH_CHECK_OUTPUT); \
		status=$$?; cat $(BENCH_CHECK_OUTPUT); test $$status -eq 0
	$(GO) run ./tools/benchcheck -floors bench/floors.toml $(BENCH_CHECK_OUTPUT)

.PHONY: chaos
# Every fault scenario against servers of its own (about 40 minutes on 2 cores); the
# table of results is printed at the end. `make test` runs the fast subset.
CHAOS_TABLE ?= $(STACK_DIR)/chaos-table.md
chaos: build ## Run every fault scenario (real server, process and link faults) and print the table.
	@mkdir -p $(STACK_DIR); rm -f $(CHAOS_TABLE)
	MANTIS_CHAOS=all MANTIS_CHAOS_TABLE=$(abspath $(CHAOS_TABLE)) $(GO) test -count=1 -timeout 60m ./internal/testrig/chaos/; \
		status=$$?; cat $(CHAOS_TABLE) 2>/dev/null; \
		test ! -f $(CHAOS_TABLE) || tools/results.sh chaos "make chaos" $(CHAOS_TABLE); exit $$status

.PHONY: fuzz
# Each native fuzz target, one after another, against servers of its own run (the
# HTTP and gRPC targets go through real handlers and servers). `go test`, and so
# `make test`, runs their committed corpora (testdata/fuzz/) without fuzzing.
FUZZTIME ?= 30s
# FUZZ_TARGETS is every func Fuzz... of the tree's test files (tools/testlist).
FUZZ_TARGETS ?= $(call testlist,-fuzz)
# With MANTIS_TEST_STACK_ENV set, the servers of that stack.env are used instead.
fuzz: build ## Run every fuzz target of the tree for FUZZTIME (default 30s); FUZZ_TARGETS=pkg:Target... selects.
ifdef MANTIS_TEST_STACK_ENV
	env GO=$(GO) FUZZTIME=$(FUZZTIME) .ci/fuzz.sh $(FUZZ_TARGETS)
else
	$(BIN)/mantisctl dev exec --dir $(STACK_DIR)/fuzz -- env GO=$(GO) FUZZTIME=$(FUZZTIME) .ci/fuzz.sh $(FUZZ_TARGETS)
endif

.PHONY: soak
# Holds SOAK_RATE dispatch requests/s (`true` on real agents) and a deployment every 2 s
# through 2 replicas, 2 Thorax instances and 10 agents on servers of its own for
# SOAK_DURATION, then prints per process and per minute RSS, goroutines, open fds and
# database connections, the latency per minute, and a verdict per figure; it fails
# when a figure is not flat. The report is also kept in SOAK_REPORT.
SOAK_DURATION ?= 10m
SOAK_RATE     ?= 100
SOAK_TIMEOUT  ?= 3h
SOAK_REPORT   ?= $(STACK_DIR)/soak-report.md
soak: build ## Hold 100 dispatch requests/s for SOAK_DURATION (10m) and check each process stays flat.
	@mkdir -p $(STACK_DIR); rm -f $(SOAK_REPORT)
	MANTIS_SOAK_DURATION=$(SOAK_DURATION) MANTIS_SOAK_RATE=$(SOAK_RATE) MANTIS_SOAK_REPORT=$(abspath $(SOAK_REPORT)) \
		$(GO) test -count=1 -run '^TestSoak$$' -timeout $(SOAK_TIMEOUT) ./internal/testrig/soak/; \
		status=$$?; cat $(SOAK_REPORT) 2>/dev/null; \
		test ! -f $(SOAK_REPORT) || tools/results.sh soak "make soak SOAK_DURATION=$(SOAK_DURATION) SOAK_RATE=$(SOAK_RATE)" $(SOAK_REPORT); exit $$status

.PHONY: scale
# Measures the scale-out on servers of its own (PostgreSQL, RabbitMQ and the production
# temporal-server): 1, 2 and 4 Mandible replicas in turn, each with 2 Thorax instances and
# SCALE_AGENTS poll agents, drain SCALE_REQUESTS dispatch requests of `true` (bounded by
# SCALE_WINDOW each). It prints throughput, wasted claims, p99, peak PostgreSQL sessions
# and each tier's CPU per request side by side, and a fitted cost model; the report is
# also kept in SCALE_REPORT.
SCALE_AGENTS   ?= 200
SCALE_REQUESTS ?= 2000
SCALE_REPLICAS ?= 1 2 4
SCALE_WINDOW   ?= 3m
SCALE_TIMEOUT  ?= 40m
SCALE_REPORT   ?= $(STACK_DIR)/scale-report.md
scale: build ## Measure 1, 2 and 4 replicas with SCALE_AGENTS (200) agents and fit a CPU cost model.
	@mkdir -p $(STACK_DIR); rm -f $(SCALE_REPORT)
	MANTIS_FAULT_TEMPORAL=server MANTIS_SCALE_AGENTS=$(SCALE_AGENTS) MANTIS_SCALE_REQUESTS=$(SCALE_REQUESTS) \
		MANTIS_SCALE_REPLICAS='$(SCALE_REPLICAS)' MANTIS_SCALE_WINDOW=$(SCALE_WINDOW) MANTIS_SCALE_REPORT=$(abspath $(SCALE_REPORT)) \
		$(GO) test -count=1 -run '^TestScale$$' -timeout $(SCALE_TIMEOUT) ./internal/testrig/scale/; \
		status=$$?; cat $(SCALE_REPORT) 2>/dev/null; \
		test ! -f $(SCALE_REPORT) || tools/results.sh scale "make scale SCALE_AGENTS=$(SCALE_AGENTS) SCALE_REQUESTS=$(SCALE_REQUESTS) SCALE_REPLICAS='$(SCALE_REPLICAS)'" $(SCALE_REPORT); exit $$status

.PHONY: proto
proto: ## Regenerate the gRPC code from proto/ (needs protoc).
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler"; exit 1; }
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc --proto_path=proto \
		--go_out=proto --go_opt=paths=source_relative \
		--go-grpc_out=proto --go-grpc_opt=paths=source_relative \
		$$(find proto -name '*.proto')

COMMITLINT_BASE ?= cf4e44d74cf74cec6da0d3f00ad82a85f2a5e707
.PHONY: lint
lint: sqlc-check docs-check ## go vet, staticcheck, workflowcheck, the layout rules (codelint), the docs' rules (doclint), generated queries and references up to date.
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	$(GO) run go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0 ./workflows/...
	$(GO) run ./tools/codelint .
	$(GO) run ./tools/doclint .
	$(GO) run ./tools/commitlint -base $(COMMITLINT_BASE)

SQLC_VERSION := v1.31.1
SQLC         := $(shell $(GO) env GOPATH)/bin/sqlc

$(SQLC):
	$(GO) install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)

.PHONY: sqlc
sqlc: $(SQLC) ## Regenerate schema/internal/dbsqlc from schema/queries/*.sql (sqlc $(SQLC_VERSION)).
	cd schema && $(SQLC) generate

.PHONY: sqlc-check
sqlc-check: $(SQLC) ## Fail when the generated query code is out of date with schema/queries.
	cd schema && $(SQLC) diff

# The references generated from the code (tools/docgen): docs/reference/*.md (the
# configuration of each daemon, mantisctl, the metrics, the HTTP API) and the sample
# configurations deploy/*.toml. docs-check writes them into a temporary directory and
# fails with the diff when the committed ones differ.
DOCS_SAMPLES := mandible.toml thorax.toml agent-poll.toml agent-listen.toml
.PHONY: docs
docs: ## Regenerate docs/reference/ and the sample configurations of deploy/ from the code.
	$(GO) run ./tools/docgen

.PHONY: docs-check
docs-check: ## Fail with a diff when docs/reference/ or deploy/*.toml differ from what the code generates.
	@tmp=$$(mktemp -d) && $(GO) run ./tools/docgen -out $$tmp/reference -samples $$tmp/deploy && \
		diff -ru docs/reference $$tmp/reference && \
		for f in $(DOCS_SAMPLES); do diff -u deploy/$$f $$tmp/deploy/$$f || exit 1; done; \
		status=$$?; rm -rf $$tmp; \
		if [ $$status -ne 0 ]; then echo "docs-check: the generated references are out of date: run make docs"; fi; \
		exit $$status

.PHONY: codelint
codelint: ## Layout rules: functions <= 80 lines, files <= 400 (or say why), no SQL in Go strings.
	$(GO) run ./tools/codelint .

.PHONY: api-schema
api-schema: ## Regenerate api/deployment-spec.schema.json from internal/contract/spec's Go types.
	$(GO) run ./tools/specschema -o api/deployment-spec.schema.json

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: clean
clean: ## Remove binaries (keeps the stack's data in .mantis/).
	rm -rf $(BIN)

.PHONY: deploy-check deploy-tools
# The installation artefacts of deploy/ (see deploy/README.md): Dockerfile, Compose,
# systemd and broker-definition rules (go test ./deploy/...), the agent image's root
# file system rebuilt with debootstrap and a command run through the agent in it
# under chroot (MANTIS_ROOTFS=1; cached in .mantis/cache/rootfs), `docker-compose config`
# on a prepared copy of deploy/compose, the Helm chart rendered and decoded strictly
# (its own module, when present), systemd-analyze verify of the units, the broker role
# applied twice (the second run changes nothing) to a throw-away stack's broker, on
# which a smoke deployment then runs as the role's users, and the Mandible, Thorax and
# agent roles applied twice to Debian 12 roots through Ansible's chroot connection
# (the root's debootstrap tarball cached under $(STACK_DIR)/cache).
DEPLOY_CHECK_DIR ?= $(STACK_DIR)/deploy-check
deploy-tools: ## Install what deploy-check needs and the machine lacks (ansible, docker-compose, debootstrap).
	@missing=""; \
	command -v ansible-playbook >/dev/null || missing="$$missing ansible"; \
	command -v docker-compose >/dev/null || missing="$$missing docker-compose"; \
	command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

deploy-check: build deploy-tools ## Check every installation artefact of deploy/ (one throw-away stack).
	MANTIS_ROOTFS=1 $(GO) test -count=1 ./deploy/... ./internal/sdnotify/ ./internal/testrig/rootfs/
	@tmp=$$(mktemp -d) && mkdir -p $$tmp/deploy && cp -r deploy/compose deploy/rabbitmq $$tmp/deploy/ && \
		MANTISCTL=$(abspath $(BIN))/mantisctl $$tmp/deploy/compose/setup.sh >/dev/null && \
		(cd $$tmp/deploy/compose && docker-compose -f compose.yaml config -q) && echo "compose config: ok"; \
		status=$$?; rm -rf $$tmp; exit $$status
	@if [ -f deploy/helm/test/go.mod ]; then cd deploy/helm/test && $(GO) test -count=1 ./...; fi
	deploy/check/systemd-verify.sh
	$(BIN)/mantisctl dev exec --dir $(DEPLOY_CHECK_DIR) -- deploy/check/ansible-broker.sh
	MANTIS_BIN=$(BIN) MANTIS_CACHE_DIR=$(STACK_DIR)/cache deploy/check/ansible-roles.sh

.PHONY: release release-check
# A release into DIST: static binaries for linux/amd64 and linux/arm64 (CGO_ENABLED=0,
# -trimpath, LDFLAGS's version and commit), a tarball of them per architecture, .deb
# and .rpm packages of mantis-agent, mantis-mandible, mantis-thorax and mantis-cli
# (binaries in /usr/bin, the units of deploy/systemd, the samples of deploy/*.toml as
# /etc/mantis/<name>.toml config files, the mantis user and group), a CycloneDX SBOM
# of the linked modules and SHA256SUMS. tools/release (a module of its own: nfpm makes
# the packages) refuses a VERSION that CHANGELOG.md has no "## [x.y.z]" section for.
# Files carry the commit's time (SOURCE_DATE_EPOCH). About 5 minutes cold on 2 cores.
DIST ?= dist
release: ## Build release VERSION=x.y.z into dist/: binaries, .deb and .rpm packages, SBOM, SHA256SUMS.
	cd tools/release && SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s) \
		$(GO) run . -repo $(CURDIR) -version '$(VERSION)' -commit '$(COMMIT)' -ldflags '$(LDFLAGS)' -dist $(abspath $(DIST))

# Builds the release of the newest version CHANGELOG.md has a section for into
# .mantis/release-check/dist, then: tools/release's own tests, vet and layout rules;
# the .deb of this machine's architecture installed with dpkg -i into a Debian 12
# root (debootstrap, cached in .mantis/cache/rootfs) under chroot, where no systemd
# runs; the installed mantis-agent --version; the installed agent, with the installed
# /etc/mantis/agent.toml and MANTIS_* overrides, polling a Thorax of a throw-away
# stack and running a dispatched command whose result Mandible stores; the .rpm
# files read with rpm -qip, -qlp and -qcp; SHA256SUMS and the SBOM.
RELEASE_CHECK_VERSION ?= $(shell sed -n 's/^## \[\([0-9][0-9.]*\)\].*/\1/p' CHANGELOG.md | head -n 1)
RELEASE_CHECK_DIR     ?= $(STACK_DIR)/release-check
release-check: build ## Build a release and install its .deb under chroot against a throw-away stack; read its .rpm.
	@missing=""; \
	command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
	command -v rpm >/dev/null || missing="$$missing rpm"; \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	$(MAKE) --no-print-directory release VERSION=$(RELEASE_CHECK_VERSION) DIST=$(RELEASE_CHECK_DIR)/dist
	cd tools/release && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(GO) run ./tools/codelint tools/release
	$(BIN)/mantisctl dev exec --dir $(RELEASE_CHECK_DIR)/stack -- env MANTIS_ROOTFS=1 \
		MANTIS_RELEASE_DIST=$(abspath $(RELEASE_CHECK_DIR))/dist MANTIS_RELEASE_VERSION=$(RELEASE_CHECK_VERSION) \
		$(GO) test -count=1 -timeout 20m -run '^TestRelease' ./internal/testrig/e2e/
