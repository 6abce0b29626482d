# The commands the README names. Everything here works on a fresh clone with only the Rust
# toolchain and kubectl installed: `make test` installs the other tools the tests call
# (scripts/test-tools) the first time, and CI's .ci/run is `make test` on a fresh machine.

CARGO ?= cargo
# Written once scripts/test-tools has installed everything (make test-tools).
TEST_TOOLS_STAMP := target/test-tools.stamp

.PHONY: test test-tools lint fmt run build release notices bench bench-micro bench-load bench-cache bench-signer bench-signer-hsm fuzz soak wrk-installed h2load-installed

## make test: formatting, lints and every test, as CI runs them. The first run installs the
## tools the tests call (make test-tools); later runs skip that step.
test: $(TEST_TOOLS_STAMP) lint
	$(CARGO) test --workspace --locked

lint: $(TEST_TOOLS_STAMP)
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	@# Licences, duplicate crates, sources, and one crypto backend (aws-lc-rs): deny.toml.
	$(CARGO) deny --log-level error check licenses bans sources

## make test-tools: installs (or names the command that installs) every tool the tests call
## that is not a Rust crate: SoftHSM2, OpenSC, openssl, moto, PyJWT, cryptography,
## azure-storage-blob, Azurite and cargo-deny, at the versions scripts/test-tools pins. make test
## runs it once, and again only when that script changes (its stamp is older); a tool removed
## since makes the test that calls it fail with one line naming the command.
test-tools:
	@rm -f $(TEST_TOOLS_STAMP)
	@$(MAKE) --no-print-directory $(TEST_TOOLS_STAMP)

$(TEST_TOOLS_STAMP): scripts/test-tools
	scripts/test-tools install
	@mkdir -p $(dir $@) && touch $@

fmt:
	$(CARGO) fmt --all

build:
	$(CARGO) build --workspace --locked

## make release: what people fetch, in dist/: for amd64 and arm64 (both targets must be
## installed; RELEASE_TARGETS for fewer, on purpose), warrant-VERSION-PLATFORM.tar.gz (the
## stripped binary, LICENSE and THIRD-PARTY-NOTICES), its debug info (.debug) and a CycloneDX
## SBOM (.cdx.json, the crates built for that target: scripts/sbom), and SHA256SUMS over them,
## signed with RELEASE_SIGNING_KEY (SHA256SUMS.sig). VERSION is scripts/version's, Cargo.toml's.
## Needs no test tool. See scripts/release.
release:
	scripts/release

## make notices: regenerates THIRD-PARTY-NOTICES with cargo-about (installs it the first time),
## after a dependency changes (make test says when).
notices:
	scripts/notices

## make run: the standalone issuer with a local example (deploy/local/objects.yaml).
## The first run creates .warrant/ (CA, serving certificate, signing key, admin token,
## kubeconfig); later runs reuse it, so tokens issued earlier stay valid.
LOCAL   ?= .warrant
ADDRESS ?= 127.0.0.1
PORT    ?= 8443
ISSUER  ?= https://$(ADDRESS):$(PORT)
# More `warrant serve` flags for make run, e.g.
#   make run ARGS="--authorization-policy-file .warrant/policy.yaml"
ARGS    ?=

run:
	$(CARGO) build --locked --bin warrant
	./target/debug/warrant local-setup --dir $(LOCAL) --address $(ADDRESS) --port $(PORT)
	@echo
	@echo "warrant is starting on $(ISSUER). In another terminal, try:"
	@echo
	@echo "  export KUBECONFIG=$$PWD/$(LOCAL)/kubeconfig"
	@echo "  kubectl create token app -n demo --audience vault"
	@echo "  kubectl create token app -n demo --bound-object-kind Pod --bound-object-name app-0"
	@echo "  kubectl get --raw /.well-known/openid-configuration"
	@echo
	@echo "docs/getting-started.md walks through reviewing and verifying tokens."
	@echo
	exec ./target/debug/warrant serve \
		--service-account-issuer $(ISSUER) \
		--service-account-signing-key-file $(LOCAL)/sa.key \
		--tls-cert-file $(LOCAL)/serving.crt \
		--tls-private-key-file $(LOCAL)/serving.key \
		--token-auth-file $(LOCAL)/tokens.csv \
		--objects-file deploy/local/objects.yaml \
		--bind-address $(ADDRESS) --secure-port $(PORT) $(ARGS)

## make bench-cache: time to ready and resident memory of the cluster cache over a synthetic
## cluster of 355,000 objects served by the loopback fixture (release build; see docs/benchmarks.md).
bench-cache:
	$(CARGO) bench -p warrant-objects --bench cache --locked

## make bench: every benchmark, on a release build: the micro-benchmarks (criterion), the load
## benchmark (warrant-bench drives `warrant serve` with wrk and h2load) and the cluster cache.
## Installs wrk and h2load (Debian's packages) if missing. Figures and how to read them:
## docs/benchmarks.md.
bench: bench-micro bench-load bench-cache bench-signer

bench-micro:
	$(CARGO) bench --locked -p warrant-token --bench token
	$(CARGO) bench --locked -p warrant-objects --bench review
	$(CARGO) bench --locked -p warrant-auth --bench claims
	$(CARGO) bench --locked -p warrant-server --bench stack
	$(CARGO) bench --locked -p warrant-server --bench hotpath
	$(CARGO) bench --locked -p warrant-podcert --bench issue

## make bench-load: the load table (docs/benchmarks.md, "Load"): every scenario over HTTP/1.1
## (wrk) and HTTP/2 (h2load), warrant's CPU µs per request against its limit, and the floor
## against a minimal hyper + rustls server. BENCH_ARGS narrows a run, e.g.
##   make bench-load BENCH_ARGS="--scenarios floor,tokenreview-distinct --algorithms RS256 --connections 32 --seconds 5"
BENCH_ARGS ?=

bench-load: wrk-installed h2load-installed
	$(CARGO) build --locked --release -p warrant -p warrant-bench
	./target/release/warrant-bench --warrant target/release/warrant $(BENCH_ARGS)

## make bench-signer: Sign over the external signer's Unix socket at 1 and 32 streams, against
## the same signatures in-process (docs/benchmarks.md, "External signer").
bench-signer:
	$(CARGO) build --locked --release -p warrant -p warrant-bench
	./target/release/warrant-bench --warrant target/release/warrant --signer

## make bench-signer-hsm: the same with each key in a SoftHSM2 token (docs/benchmarks.md,
## "PKCS#11 (SoftHSM2)"); `cargo bench -p warrant-hsm --bench pkcs11` is the raw C_Sign rate.
bench-signer-hsm:
	$(CARGO) build --locked --release -p warrant -p warrant-bench
	./target/release/warrant-bench --warrant target/release/warrant --signer --pkcs11-module /usr/lib/softhsm/libsofthsm2.so

# wrk drives the load benchmarks; Debian packages it.
wrk-installed:
	@command -v wrk >/dev/null 2>&1 || { echo "installing wrk"; \
		if [ "$$(id -u)" -eq 0 ]; then apt-get update -qq && apt-get install -y -qq wrk; \
		else sudo apt-get update -qq && sudo apt-get install -y -qq wrk; fi; }

# h2load (nghttp2's load generator) drives the HTTP/2 rows of bench-load; Debian packages it.
h2load-installed:
	@command -v h2load >/dev/null 2>&1 || { echo "installing h2load"; \
		if [ "$$(id -u)" -eq 0 ]; then apt-get update -qq && apt-get install -y -qq nghttp2-client; \
		else sudo apt-get update -qq && sudo apt-get install -y -qq nghttp2-client; fi; }

## make soak: good clients (TokenRequest + TokenReview) for SOAK_SECONDS while abusive ones
## hold idle TCP and TLS connections, dribble headers and abandon delegated lookups against a
## kube-apiserver that never answers; prints throughput, p99, and warrant's memory and
## descriptors before, during and after (docs/benchmarks.md, "Soak"). Installs wrk if missing.
SOAK_SECONDS ?= 120

soak: wrk-installed
	$(CARGO) build --locked --release -p warrant -p warrant-bench
	./target/release/warrant-bench --warrant target/release/warrant --soak $(SOAK_SECONDS)

## make fuzz: every coverage-guided fuzz target (fuzz/, cargo-fuzz + libFuzzer) for
## FUZZ_SECONDS each (default 60). Installs cargo-fuzz if it is missing; runs on the stable
## toolchain (RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass the sanitizer flags it needs). Each run
## starts from the committed seeds (fuzz/corpus/<target>/, replayed by `make test`) and keeps
## what it learns in fuzz/target/corpus/<target>/ (not committed), so later runs go on from there.
## A crash stops the run and is written to fuzz/artifacts/<target>/: commit it to the seeds
## with its fix (docs/security.md, "Fuzzing").
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= token signed_payload dpop_proof signed_proof cnf request_body admission_review request_path manifest duration

fuzz:
	@command -v cargo-fuzz >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked
	@for target in $(FUZZ_TARGETS); do \
		echo "== fuzzing $$target for $(FUZZ_SECONDS) s"; \
		mkdir -p $(CURDIR)/fuzz/target/corpus/$$target; \
		RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run $$target $(CURDIR)/fuzz/target/corpus/$$target $(CURDIR)/fuzz/corpus/$$target \
			-- -max_total_time=$(FUZZ_SECONDS) \
			-max_len=65536 -rss_limit_mb=2048 || exit 1; \
	done
