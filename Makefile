# notifyd — the two commands a newcomer needs are `make demo` and `make test`.
SHELL   := /bin/bash
GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/notifyd/notifyd/core/version.Version=$(VERSION)

# Every provider plugin is a main package under plugins/ (plus the example),
# built to bin/plugins/notifyd-plugin-<name>.
PLUGINS := $(patsubst plugins/%/,%,$(wildcard plugins/*/))

.PHONY: all build services test vet bench proto demo clean

all: build

build:
	@mkdir -p $(BIN)/plugins
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/notifyd ./cmd/notifyd
	@for p in $(PLUGINS); do \
	  echo "$(GO) build -o $(BIN)/plugins/notifyd-plugin-$$p ./plugins/$$p"; \
	  $(GO) build -o $(BIN)/plugins/notifyd-plugin-$$p ./plugins/$$p || exit 1; \
	done

services:
	@scripts/services

vet:
	$(GO) vet ./...

test: services vet build
	$(GO) test -race -timeout 30m ./...

bench: services
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

clean:
	rm -rf $(BIN)
