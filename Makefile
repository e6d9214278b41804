# notifyd — the two commands a newcomer needs are `make demo` and `make test`.
SHELL   := /bin/bash
GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/notifyd/notifyd/internal/version.Version=$(VERSION)

# Every provider plugin is a main package under plugins/ (plus the example),
# built to bin/plugins/notifyd-plugin-<name>.
PLUGINS := $(patsubst plugins/%/,%,$(wildcard plugins/*/))

.PHONY: all build services test vet bench bench-peers proto demo clean chaos fuzz

all: build

build:
	@mkdir -p $(BIN)/plugins
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/notifyd ./cmd/notifyd
	$(GO) build -o $(BIN)/notifyd-bench ./cmd/notifyd-bench
	@for p in $(PLUGINS); do \
	  echo "$(GO) build -o $(BIN)/plugins/notifyd-plugin-$$p ./plugins/$$p"; \
	  $(GO) build -o $(BIN)/plugins/notifyd-plugin-$$p ./plugins/$$p || exit 1; \
	done
	$(GO) build -o $(BIN)/plugins/notifyd-plugin-hello ./examples/hello-provider
	$(GO) build -o $(BIN)/plugins/notifyd-plugin-hello-batch ./examples/hello-batch

services:
	@scripts/services

# The repository holds two modules: the daemon (.) and the SDK (sdk/, its own
# go.mod, which plugins and applications depend on alone). The daemon's
# go.mod replaces the SDK with ./sdk, so one checkout builds both; vet and
# test cover both.
vet:
	$(GO) vet ./...
	cd sdk && $(GO) vet ./...

demo: build
	@scripts/demo

# -count=1: never a cached result. Several tests build notifyd and its
# plugins with `go build` in a subprocess (the fault suite, the plugin host's
# tests), whose sources Go's test cache does not track: a cached pass could
# hide a change that breaks them.
#
# scripts/test runs both modules' tests and a short run of every fuzz target,
# side by side, and fails if any part failed (its header says how the parts
# are ordered to keep the 2 cores busy; docs/reliability.md, "make test").
test: services vet build
	@GO=$(GO) FUZZTIME=$(FUZZTIME_SHORT) scripts/test

# fuzz runs each coverage-guided fuzz target for FUZZTIME (one target at a
# time, as go test -fuzz requires). A longer campaign: make fuzz FUZZTIME=10m.
# What a run finds is written under the package's testdata/fuzz/ and must be
# committed with its fix.
FUZZTIME       ?= 1m
# The short run counts executions, not seconds: a time-bounded run of 2 s
# once ended "context deadline exceeded" as the deadline met a worker.
FUZZTIME_SHORT := 20000x
FUZZ_TARGETS   := ./internal/api:FuzzDecodeEnqueue ./internal/api:FuzzDecodeSelector ./internal/api:FuzzDecodeSubscriber \
                  ./internal/api:FuzzDecodeCampaign ./internal/schedule:FuzzRender
SDK_FUZZ_TARGETS := ./wire:FuzzAppendJSONString ./wire:FuzzJSONReadBack
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $$t for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done; \
	cd sdk && for t in $(SDK_FUZZ_TARGETS); do \
	  echo "fuzz sdk/$$t for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

# chaos runs the fault-tolerance suite in full (≥ 100,000 notifications under
# kill -9, Redis wipes, Postgres restarts and network faults; ~10 minutes).
# It needs no services: it starts its own Postgres and Redis. The short mode
# runs inside `make test`. See docs/reliability.md.
# CHAOSTEST picks the test: TestChaos (one Redis server, the default),
# TestChaosRedisCluster (a 3-master Redis Cluster of its own), or both:
#   make chaos CHAOSTEST=TestChaosRedisCluster
#   make chaos CHAOSTEST='TestChaos|TestChaosRedisCluster'
CHAOSTEST ?= TestChaos
chaos:
	$(GO) test ./internal/chaos -run '^($(CHAOSTEST))$$' -count=1 -chaos.full -timeout 90m -v $(CHAOSFLAGS)

bench: services
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...
	cd sdk && $(GO) test -run '^$$' -bench . -benchtime 2s ./...

# bench-peers runs notifyd's 08:00 burst (50,000 notifications due at one
# instant, concurrency 64, batch_size 256) side by side with River, asynq and
# raw HTTP POSTs to one sink, and prints throughput and CPU per notification
# (docs/performance.md, "Peers side by side"). The harness is bench/peers, a
# Go module of its own so the peers never enter the daemon's go.mod (and
# `./...` here leaves it out). More: make bench-peers PEERSFLAGS='-rounds 3'.
PEERSFLAGS ?=
bench-peers: services build
	cd bench/peers && $(GO) build -o ../../$(BIN)/notifyd-peers ./cmd/peers
	$(BIN)/notifyd-peers -notifyd $(BIN)/notifyd -plugins-dir $(BIN)/plugins -json $(BIN)/peers.json $(PEERSFLAGS)

# proto regenerates the plugin protocol's Go code (committed). protoc is
# Debian's (apt-get install protobuf-compiler, 3.21.12); the Go generators are
# pinned here and installed by `go install` from the Go module proxy into
# bin/tools, so nothing else is needed.
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PROTO_TOOLS        := $(abspath $(BIN)/tools)

proto:
	@command -v protoc >/dev/null || { echo "make proto: protoc not found; apt-get install protobuf-compiler" >&2; exit 1; }
	GOBIN=$(PROTO_TOOLS) $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(PROTO_TOOLS) $(GO) install $(PROTOC_GEN_GO_GRPC)
	protoc --plugin=protoc-gen-go=$(PROTO_TOOLS)/protoc-gen-go \
	  --plugin=protoc-gen-go-grpc=$(PROTO_TOOLS)/protoc-gen-go-grpc \
	  --go_out=. --go_opt=paths=source_relative \
	  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
	  sdk/proto/providerv1/provider.proto

clean:
	rm -rf $(BIN)
