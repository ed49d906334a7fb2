# mokc build, test and tool targets. Every recipe that needs the external tools sources
# scripts/env.sh (CGO_CFLAGS/CGO_LDFLAGS for gorgonia.org/cu, MOKC_PTXAS, MOKC_PTXAS_SM100,
# MOKC_LLC); those targets depend on `toolchain`, which takes well under a second once
# the tools are installed.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

ENV := . scripts/env.sh &&
GO ?= go
# Packages whose -tags cuda test binaries are carried to a GPU machine.
DEVICE_PKGS := ./driver/... ./runtime/... ./codegen/...
CARRY := .carry
# The mokc CLI carried to a GPU machine: go build's arguments before -o.
CLI_BUILD := build -tags cuda -trimpath -ldflags='-s -w'

.PHONY: toolchain test test-cuda vet build golden device-bins device-old-cli device-slim device-unslim clean distclean

## toolchain: install cuda.h, the libcuda stub, ptxas 12.5, ptxas 12.9 (sm_100a), llc-19
toolchain:
	bash scripts/toolchain.sh

## vet: go vet, with and without the cuda build tag
vet: toolchain
	$(ENV) $(GO) vet ./...
	$(ENV) $(GO) vet -tags cuda ./...

## test: vet (with and without -tags cuda) and every package's tests; the tests run even when
## vet fails, and either failing fails the target; a missing tool fails a test, never skips it.
## -timeout 30m: codegen's tests take up to 17 minutes on 2 cores, past go test's default of 10
test: toolchain
	$(ENV) rc=0; \
	$(GO) vet ./... || rc=1; \
	$(GO) vet -tags cuda ./... || rc=1; \
	MOKC_REQUIRE_TOOLS=1 $(GO) test -timeout 30m ./... || rc=1; \
	exit $$rc

## test-cuda: the -tags cuda tests of $(DEVICE_PKGS); without a GPU their device tests skip
test-cuda: toolchain
	$(ENV) MOKC_REQUIRE_TOOLS=1 $(GO) test -tags cuda $(DEVICE_PKGS)

## build: build everything, with and without the cuda build tag
build: toolchain
	$(ENV) $(GO) build ./...
	$(ENV) $(GO) build -tags cuda ./...

## golden: rewrite golden files and testdata (golden PTX, llc-19 references) from the current
## compiler: runs `go test -update` in every package whose tests define the -update flag
## (./golden/..., ./ptx/..., ./codegen/..., ...); review the diff before committing
golden: toolchain
	$(ENV) pkgs=$$(for d in $$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./...); do \
		if grep -l 'flag.Bool("update"' "$$d"/*_test.go >/dev/null 2>&1; then echo "$$d"; fi; done); \
	if [[ -z $$pkgs ]]; then echo "no package defines -update"; exit 0; fi; \
	MOKC_REQUIRE_TOOLS=1 $(GO) test $$pkgs -update

## device-bins: -tags cuda test binaries of $(DEVICE_PKGS) and the mokc CLI, stripped and packed
## into .carry/bins.tgz (at most 64 MiB travel with the tree to the GPU machine; scripts/device-env.sh
## unpacks it on the GPU machine); packages without tests are skipped
device-bins: toolchain
	rm -rf $(CARRY) && mkdir -p $(CARRY)
	$(ENV) for p in $$($(GO) list -tags cuda -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' $(DEVICE_PKGS)); do \
		name=$$(echo "$${p#github.com/mokc/mokc/}" | tr / _); \
		echo "$(CARRY)/$$name.test  <- $$p"; \
		$(GO) test -c -tags cuda -trimpath -ldflags='-s -w' -o "$(CARRY)/$$name.test" "$$p"; \
	done
	$(ENV) $(GO) $(CLI_BUILD) -o $(CARRY)/mokc ./cmd/mokc
	cd $(CARRY) && tar -czf bins.tgz *.test mokc && rm -f *.test mokc
	@du -sh $(CARRY)

## device-old-cli: the mokc CLI of commit REV (e.g. `make device-old-cli REV=29f85a4`), built in a
## temporary git worktree and packed as .carry/mokc-old.gz, the old binary of an old-against-new
## device run (scripts/device-compare.sh, docs/runs/*/call*.sh unpack it with gunzip); run it after
## device-bins, which empties .carry
device-old-cli: toolchain
	@if [[ -z "$(REV)" ]]; then echo "device-old-cli: give REV=<commit>"; exit 2; fi
	wt=$$(mktemp -d) && git worktree add -q --detach "$$wt" "$(REV)" && \
		trap 'git worktree remove --force "$$wt"' EXIT && \
		$(ENV) (cd "$$wt" && $(GO) $(CLI_BUILD) -o "$$wt/mokc-old" ./cmd/mokc) && \
		mkdir -p $(CARRY) && gzip -c "$$wt/mokc-old" > $(CARRY)/mokc-old.gz
	@du -sh $(CARRY)/mokc-old.gz

## device-slim: move golden/testdata (golden PTX, about 35 MB, which no GPU test reads) to the
## ignored .slim/ so that the tree and .carry/ stay within the 64 MiB that travel to the GPU
## machine; device-unslim puts it back (run it before any git command that touches golden/)
device-slim:
	@if [[ -d golden/testdata && -d .slim/golden-testdata ]]; then \
		echo "device-slim: golden/testdata and .slim/golden-testdata both exist (a git command brought golden/ back): remove one (they hold the same files when the checkout is main's), then run it again" >&2; exit 1; fi
	@if [[ -d golden/testdata ]]; then mkdir -p .slim && mv golden/testdata .slim/golden-testdata; fi
	@du -sh --exclude=.git --exclude=.toolchain --exclude=.slim . | sed 's/\t.*/ travel (tree and .carry)/'

device-unslim:
	@if [[ -d .slim/golden-testdata ]]; then mv .slim/golden-testdata golden/testdata && rmdir .slim; fi

## clean: remove build outputs (keeps .toolchain; `make distclean` removes that too)
clean:
	rm -rf $(CARRY) bin
	$(GO) clean -testcache

distclean: clean
	rm -rf .toolchain
