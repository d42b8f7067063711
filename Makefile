# The single entry point: `make test`, `make lint`, `make demo`, `make bench`.
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build test lint fmt demo

all: build

## Build ralph and the test fakes (debug).
build:
	$(CARGO) build --workspace --bins

## Every test: unit, snapshot, and end to end with the scripted fake agent. Run with a HOME
## and XDG directories of their own, which must stay free of ralph's files: no test touches the
## developer's registry of loops or their config (tests/untouched-home.sh). The chromium tests
## run one at a time after the rest: a browser is heavy on a small machine, and several at once
## with the suite use many of the user's inotify instances (128 by default).
test: build
	tests/untouched-home.sh $(CARGO) test --workspace --no-fail-fast -- --skip e2e::browser
	tests/untouched-home.sh $(CARGO) test --test integration e2e::browser -- --test-threads=1

## Formatting, clippy and the API docs (ralph's crates only, no broken or private link), warnings
## denied.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

fmt:
	$(CARGO) fmt --all

## A whole loop with the built-in demo agent in a fresh temporary directory.
demo:
	@echo "make demo: building ralph first (cargo build; a few minutes the first time, seconds after)"
	@CARGO_TERM_PROGRESS_WHEN=never $(CARGO) build --bin ralph
	@./target/debug/ralph demo

.PHONY: test-portable portable-tree

## What macOS and the BSDs build (the portable process and watch backend: sysinfo, a walk of
## the process table, notify), tested here on Linux: the tree check below, ralph-process's own
## tests, then the end-to-end tests of the loop, questions, orphans and the guard against a
## `ralph` built with `--features portable`. The debug `ralph` is then the portable one until
## the next plain build. See docs/platforms.md.
PORTABLE_E2E := e2e::loop_basics:: e2e::questions:: e2e::processes:: e2e::crashes::
test-portable: portable-tree
	$(CARGO) clippy -p ralph-process --features portable --all-targets -- -D warnings
	$(CARGO) test -p ralph-process --features portable
	$(CARGO) test --features portable --test integration -- $(PORTABLE_E2E)

## No Linux-only crate (inotify, a /proc reader, prctl) in what ralph builds for macOS, or
## in ralph's own tree with `portable`; cargo tree needs no installed target.
LINUX_ONLY := inotify|inotify-sys|procfs|procfs-core|prctl|caps|landlock
portable-tree:
	@for target in x86_64-apple-darwin aarch64-apple-darwin; do \
	  found=$$($(CARGO) tree --target $$target -p ralph -e normal --prefix none | grep -Ew '^($(LINUX_ONLY))' | sort -u); \
	  if [ -n "$$found" ]; then echo "portable-tree: $$target pulls in Linux-only crates: $$found"; exit 1; fi; \
	  echo "portable-tree: $$target: no Linux-only crate"; \
	done

.PHONY: e2e e2e-latest man

## The real agent CLIs (Claude Code, opencode, Codex, Gemini; pinned, installed from npm into
## target/real-agents) driven by `ralph run` against local mocks of their APIs. Offline apart
## from the install.
e2e:
	tests/real-agents/install.sh
	$(CARGO) build --bin ralph
	$(CARGO) test -p ralph-mock-api --test real_agents -- --ignored --nocapture

## The same suite on the newest release of each CLI (npm's `latest`), installed apart in
## target/real-agents-latest: a format change shows up the week it ships. Run it before a
## release; a failure here and not in `make e2e` means a pin to move and a change to absorb.
e2e-latest:
	REAL_AGENTS_DIR=$(CURDIR)/target/real-agents-latest tests/real-agents/install.sh --latest
	$(CARGO) build --bin ralph
	REAL_AGENTS_DIR=$(CURDIR)/target/real-agents-latest \
	  $(CARGO) test -p ralph-mock-api --test real_agents -- --ignored --nocapture

## Man pages: ralph.1 and one per subcommand, in target/man (`man -l target/man/ralph-run.1`).
man:
	$(CARGO) build --bin ralph
	./target/debug/ralph man --out-dir target/man

.PHONY: bench

## Benchmarks: the stream decoders in process (criterion, next to a memmem scan and a naive
## serde_json reader; every decoder >= 1 GB/s), then the release binary with the fake agent (huge outputs next to a
## pipe through cat, overhead per iteration, question round trips, idle cost, start-up), the
## question round trips also with the portable backend (`ralph-portable`, docs/platforms.md).
## Only some rows: `cargo run --release -p ralph-bench --bin ralph-bench -- reaction`.
## Prints one table and writes target/bench/results.json; see docs/benchmarks.md. About 10
## minutes; BENCH_QUICK=1 for a short run. Nothing here asserts on time.
bench:
	$(CARGO) build --release --bin ralph --features portable
	cp target/release/ralph target/release/ralph-portable
	$(CARGO) build --release --bins -p ralph -p ralph-fake-agent -p ralph-bench
	$(CARGO) bench -p ralph-bench --bench decode
	$(CARGO) run --release --quiet -p ralph-bench --bin ralph-bench

.PHONY: bench-peers peers

PEERS := $(CURDIR)/target/peers

## ralph beside its peers on the same fake agents, alternating runs: ralph-orchestrator 2.10.1
## (crates.io `ralph-cli`, built into target/peers/ralph-orchestrator; its build alone takes
## many minutes, in target/peers/build rather than a temporary directory that may be too small
## for its few GiB, removed once installed) and pyralph 0.1.0 (PyPI, in the venv
## target/peers/pyralph-venv), each installed once. Prints one table with ralph/peer ratios
## and writes target/bench/peers.json; see docs/benchmarks.md. About 15 minutes after the
## build; not part of .ci/run. PEERS_ARGS passes options to `ralph-bench peers` (e.g.
## PEERS_ARGS="--mib 50 --rounds 1").
bench-peers: peers
	$(CARGO) build --release --bins -p ralph -p ralph-fake-agent -p ralph-bench
	$(CARGO) run --release --quiet -p ralph-bench --bin ralph-bench -- peers $(PEERS_ARGS)

## Only install the peers bench-peers runs (what is installed already is kept).
peers:
	test -x $(PEERS)/ralph-orchestrator/bin/ralph || \
	  { CARGO_TARGET_DIR=$(PEERS)/build $(CARGO) install ralph-cli --version 2.10.1 --locked \
	      --root $(PEERS)/ralph-orchestrator && rm -rf $(PEERS)/build; }
	test -x $(PEERS)/pyralph-venv/bin/ralph || \
	  { python3 -m venv $(PEERS)/pyralph-venv && \
	    $(PEERS)/pyralph-venv/bin/pip install --quiet pyralph==0.1.0; }

.PHONY: soak fuzz

## Long runs on the release build: 1000 short iterations with random kills of the agent and of
## ralph (no process or file descriptor may leak), 1 GB of agent output (bounded memory, no
## control sequence shown), and 300 answers fired at a question's deadline (each delivered
## exactly once). SOAK_ITERATIONS, SOAK_SEED and RALPH_RACE_TRIALS tune them. A few minutes.
soak:
	$(CARGO) build --release --workspace --bins
	$(CARGO) test --release --test soak -- --ignored --nocapture soak_
	RALPH_RACE_TRIALS=$${RALPH_RACE_TRIALS:-300} $(CARGO) test --release --test integration e2e::races -- --nocapture

## Property-based fuzzing (proptest; cargo-fuzz would need nightly and libFuzzer) of the task,
## question and answer file parsers and every stream decoder, seeded with the fixtures.
## PROPTEST_CASES cases per target (default 20000); `make test` runs a small number.
fuzz:
	PROPTEST_CASES=$${PROPTEST_CASES:-20000} $(CARGO) test --release -p ralph-signal --test fuzz -- --nocapture
	PROPTEST_CASES=$${PROPTEST_CASES:-20000} $(CARGO) test --release -p ralph-loop --test fuzz -- --nocapture
