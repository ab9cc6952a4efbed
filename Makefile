# Baton's everyday commands. `make test` is the README's test command;
# .ci/run is what CI runs (the same tests, uncached, with Redis required).

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GO      ?= go

.PHONY: all build test race vet fmt bench clean

all: vet test

build: ## the baton binary, static, with its version
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o baton ./bot

test: ## the README's test command
	$(GO) test -race ./...

race: ## as CI runs it: uncached
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

fmt: ## rewrite files with gofmt; fails if gofmt reports anything it cannot fix
	gofmt -s -w .
	@test -z "$$(gofmt -l .)"

bench: ## benchmarks only (SPEC §15); results are machine-dependent
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -f baton
