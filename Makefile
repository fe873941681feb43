# Levee — the two commands a fresh machine needs:
#   make run    a local cluster in front of the bundled demo upstream
#   make test   vet + every test with the race detector
SHELL := /bin/bash
GO ?= go
NODES ?= 3
BIN := bin

.PHONY: build run test vet unit fuzz bench clean chaos dotenv

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/levee ./cmd/node
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

test: vet unit

# Short coverage-guided runs of every fuzz target (seed corpora already run in `make test`).
FUZZTIME ?= 20s
fuzz:
	@for spec in $$($(GO) test -list 'Fuzz.*' ./... 2>/dev/null | awk '/^ok/{pkg=$$2} /^Fuzz/{print pkg":"$$1}'); do \
		pkg=$${spec%%:*}; fn=$${spec##*:}; echo "== $$pkg $$fn"; \
		$(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	done

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

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
chaos: build
	$(GO) run ./jepsen-lite -backend $(BACKEND) -nodes $(NODES) -duration $(DURATION) $(if $(filter-out 0,$(SEED)),-seed $(SEED))
