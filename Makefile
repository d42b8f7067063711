# The single entry point: `make test`, `make lint`, `make demo`, `make bench`.
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build test lint fmt demo

all: build

## Build ralph and the test fakes (debug).
build:
	$(CARGO) build --workspace --bins

## Every test: unit, snapshot, and end to end with the scripted fake agent.
test: build
	$(CARGO) test --workspace --no-fail-fast

## Formatting and clippy, warnings denied.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

## A whole loop with the built-in demo agent in a fresh temporary directory.
demo:
	@$(CARGO) build --quiet --bin ralph
	@./target/debug/ralph demo

.PHONY: e2e

## The real Claude Code CLI (pinned, installed from npm into target/real-agents) driven by
## `ralph run --agent claude` against the scripted mock API. Offline apart from the install.
e2e:
	tests/real-agents/install.sh
	$(CARGO) build --bin ralph
	$(CARGO) test -p ralph-mock-api --test real_agents -- --ignored --nocapture
