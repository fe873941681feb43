# Levee — the two commands a fresh machine needs:
#   make run    a local cluster in front of the bundled demo upstream
#   make test   vet + every test with the race detector
SHELL := /bin/bash
GO ?= go
NODES ?= 3
BIN := bin
# The version `levee version` prints (main.version; "dev" in a plain go build).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: build run test vet unit fuzz bench clean chaos soak dotenv

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION) -X github.com/levee/levee/metrics.stamp=$(VERSION)" -o $(BIN)/levee ./cmd/node
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/demo-upstream ./cmd/demo-upstream

# This checkout's cluster secret and admin token: generated once with
# `bin/levee secret -env` into the untracked .env, which make run and docker
# compose read. Nothing fixed is shipped; delete .env to rotate both.
dotenv: build
	./scripts/dotenv.sh

run: dotenv
	NODES=$(NODES) ./scripts/run-local.sh

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 15m ./...

test: vet rules unit helm

# The Helm chart (deploy/helm/levee) rendered and checked offline with
# Helm's Go library. deploy/helm is a module of its own, so Helm and
# client-go stay out of Levee's build list (and out of ./... above). No
# -race: the test starts no goroutine of Levee's, and building Helm and
# client-go for the race detector costs minutes of CPU for nothing.
.PHONY: helm
helm:
	cd deploy/helm && $(GO) vet ./... && $(GO) test -count=1 -timeout 5m ./...

# The shipped alerts (deploy/prometheus) are checked and unit-tested with
# promtool (Debian's prometheus package) when it is installed; with
# LEVEE_REQUIRE_TOOLS=1 (CI) a missing promtool fails the build.
PROMTOOL ?= promtool
.PHONY: rules
rules:
	@if command -v $(PROMTOOL) >/dev/null; then \
		$(PROMTOOL) check rules deploy/prometheus/alerts.yml && \
		cd deploy/prometheus && $(PROMTOOL) test rules alerts_test.yml; \
	elif [ "$$LEVEE_REQUIRE_TOOLS" = 1 ]; then \
		echo "rules: promtool not found and LEVEE_REQUIRE_TOOLS=1 (apt-get install prometheus)" >&2; exit 1; \
	else \
		echo "rules: promtool not found: alert rules not checked (apt-get install prometheus)"; \
	fi

# Short coverage-guided runs of every fuzz target (seed corpora already run in `make test`).
FUZZTIME ?= 20s
fuzz:
	@for spec in $$($(GO) test -list 'Fuzz.*' ./... 2>/dev/null | awk '/^ok/{pkg=$$2} /^Fuzz/{print pkg":"$$1}'); do \
		pkg=$${spec%%:*}; fn=$${spec##*:}; echo "== $$pkg $$fn"; \
		$(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	done

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# Hits against nginx and Varnish, pinned, on this machine (docs/benchmarks.md):
# the benchmark, not a test; nothing gates on it. About 6 min; shorter with
# e.g. `make bench-compare DURATION=2s ROUNDS=1` (see scripts/bench-compare.sh).
.PHONY: bench-compare
bench-compare:
	./scripts/bench-compare.sh

# Issue 27's provider budget (bench/budget): a demo upstream with a hidden
# quota of 20 req/s on the key (halved at 60 s, doubled back at 90 s),
# three nodes, clients at 3x the quota; static caps 2x too high, the
# adaptive limit per node, the cluster budget; then a healthy upstream,
# adaptive off and on, alternated twice. Prints a table, writes
# BENCH_BUDGET_OUT/bench-budget.svg, ends with PASS or FAIL against the
# issue's targets. About 9 min; the
# benchmark, not a test: nothing gates on it.
BENCH_BUDGET_OUT ?= $(CURDIR)/data/bench-budget
.PHONY: bench-budget
bench-budget: build
	$(GO) run ./bench/budget -levee $(CURDIR)/$(BIN)/levee -out $(BENCH_BUDGET_OUT)

# Issue 24's slow-client scenario (1,800 then 10,000 slowloris connections
# from 127.0.0.1 for 20 s each, ordinary GETs from 127.0.0.2 within 2 s,
# RSS under 200 MB) against the built binary; `make test` runs the 1,800
# case against a race-instrumented node. About 45 s.
.PHONY: abuse
abuse: build
	LEVEE_BIN=$(CURDIR)/$(BIN)/levee $(GO) test -count=1 -run TestSlowClientsLeaveTheNodeServing -v ./cmd/node/

clean:
	rm -rf $(BIN) data

# Docker: images are FROM scratch around the static binaries built above
# (nothing can be pulled), so build first. See docs/docker.md.
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
.PHONY: docker-up docker-up-5 docker-down
docker-up: dotenv
	$(COMPOSE) up --build -d
docker-up-5: dotenv
	$(COMPOSE) --profile five up --build -d
docker-down:
	$(COMPOSE) --profile five down -v

# Chaos: jepsen-lite against a real cluster (local backend: network
# namespaces, needs root). See jepsen-lite/README.md.
DURATION ?= 5m
SEED ?= 0
BACKEND ?= local
# ENSURE: kinds placed at least once (jepsen-lite -ensure); empty = its default.
ENSURE ?=
chaos: build
	$(GO) run ./jepsen-lite -backend $(BACKEND) -nodes $(NODES) -duration $(DURATION) $(if $(filter-out 0,$(SEED)),-seed $(SEED)) $(if $(ENSURE),-ensure $(ENSURE))

# Soak (not in CI): 5 nodes, an hour of the mixed nemesis, every node's
# RSS, goroutines and open fds sampled every 10 s and judged (checker
# resources); plot in the run's resources.svg. The nodes keep done jobs
# for SOAK_QUEUE_RETENTION (queue.retention; the product's 24 h would
# grow their memory all hour), so the queue's state is at its bound
# within the 10-minute warmup; CI's chaos run keeps the default.
# SOAK_ARGS: more jepsen-lite flags (-out, -soak-warmup, -soak-window).
# See docs/chaos.md.
SOAK_DURATION ?= 1h
SOAK_QUEUE_RETENTION ?= 5m
SOAK_ARGS ?=
soak: build
	$(GO) run ./jepsen-lite -backend local -nodes 5 -duration $(SOAK_DURATION) -sample-resources 10s -queue-retention $(SOAK_QUEUE_RETENTION) $(if $(filter-out 0,$(SEED)),-seed $(SEED)) $(SOAK_ARGS)
