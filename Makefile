# The commands the README names. Everything here works on a fresh clone with only the Rust
# toolchain installed (CI runs .ci/run, which installs the few other tools the tests call).

CARGO ?= cargo

.PHONY: test lint fmt run build bench-cache

## make test: formatting, lints and every test, as CI runs them.
test: lint
	$(CARGO) test --workspace --locked

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	@# One crypto backend (aws-lc-rs): nothing may pull in ring, the rsa crate or OpenSSL.
	@if $(CARGO) tree --workspace --locked -e all --prefix none | grep -E '^(ring|rsa|openssl|openssl-sys) v'; then \
		echo "error: a second crypto backend is in the dependency tree (see cargo tree -i <crate>)"; exit 1; fi

fmt:
	$(CARGO) fmt --all

build:
	$(CARGO) build --workspace --locked

## make run: the standalone issuer with a local example.
run:
	@echo "make run: the standalone server (warrant serve) is coming in the next step."
	@echo "Today the token library is complete: see docs/tokens.md, and run 'make test'."

## make bench-cache: time to ready and resident memory of the cluster cache over a synthetic
## cluster of 355,000 objects served by the loopback fixture (release build; see docs/benchmarks.md).
bench-cache:
	$(CARGO) bench -p warrant-objects --bench cache --locked
