# syntax=docker/dockerfile:1
# The warrant image (docs/install.md, "The image"). This repository's tests run no container
# engine, so they do not build it; tests/e2e/deploy.rs checks the invariants below by reading.
#
#   docker build -t ghcr.io/warrant-dev/warrant:$(scripts/version) \
#     --build-arg WARRANT_VERSION=$(scripts/version) \
#     --build-arg WARRANT_GIT_COMMIT=$(git rev-parse HEAD) \
#     --build-arg WARRANT_GIT_TREE_STATE=$(test -z "$(git status --porcelain --untracked-files=no)" && echo clean || echo dirty) \
#     --build-arg WARRANT_BUILD_DATE=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ) .
#
# WARRANT_VERSION is required and must be Cargo.toml's version (scripts/version prints it): the
# label says it, and the build fails if /version and --version would say another.
#
# The stripped binary is in the image; its debug info (for symbolised stack traces and
# profiles) is a separate stage:  docker build --target debug --output type=local,dest=out .

# Build: the toolchain the workspace pins (Cargo.toml rust-version), with cmake for aws-lc.
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# .git is not copied (.dockerignore): these say what /version and --version name. The version is
# Cargo.toml's; WARRANT_VERSION, which the label carries, is held to it by the build
# (crates/warrant-server/build.rs), so the label and /version cannot disagree.
ARG WARRANT_VERSION=""
ARG WARRANT_GIT_COMMIT=""
ARG WARRANT_GIT_TREE_STATE=""
ARG WARRANT_BUILD_DATE=""
RUN test -n "$WARRANT_VERSION" || { echo "--build-arg WARRANT_VERSION=\$(scripts/version) is required: the image's label names it" >&2; exit 1; }
ENV WARRANT_VERSION=$WARRANT_VERSION \
    WARRANT_GIT_COMMIT=$WARRANT_GIT_COMMIT \
    WARRANT_GIT_TREE_STATE=$WARRANT_GIT_TREE_STATE \
    WARRANT_BUILD_DATE=$WARRANT_BUILD_DATE
COPY . .
# Dependencies are cached apart from the source: the registry and the target directory are
# BuildKit cache mounts, kept between builds on the same builder, so a change to warrant's code
# recompiles warrant's crates, not the ~400 it depends on. (On a builder that starts empty every
# time, e.g. a fresh CI runner, persist these mounts or every build starts from scratch.)
# The binary leaves the cache mount stripped, with its debug info in warrant.debug, linked by
# .gnu_debuglink so debuggers and profilers find it.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked --bin warrant \
    && objcopy --only-keep-debug target/release/warrant /warrant.debug \
    && objcopy --strip-all --add-gnu-debuglink=/warrant.debug target/release/warrant /warrant

# Debug info only: `--target debug --output type=local,dest=DIR` writes warrant.debug to DIR.
FROM scratch AS debug
COPY --from=build /warrant.debug /warrant.debug

# Run: distroless with glibc (aws-lc links against it), no shell, non-root (uid 65532).
FROM gcr.io/distroless/cc-debian12:nonroot AS image
ARG WARRANT_VERSION=""
ARG WARRANT_GIT_COMMIT=""
ARG WARRANT_BUILD_DATE=""
LABEL org.opencontainers.image.title="warrant" \
      org.opencontainers.image.description="A standalone, Kubernetes-compatible service-account token issuer." \
      org.opencontainers.image.source="https://github.com/warrant-dev/warrant" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="$WARRANT_VERSION" \
      org.opencontainers.image.revision="$WARRANT_GIT_COMMIT" \
      org.opencontainers.image.created="$WARRANT_BUILD_DATE"
COPY --from=build /warrant /warrant
# warrant's licence, and the licences of the crates built into it (generated: make notices).
COPY LICENSE THIRD-PARTY-NOTICES /usr/share/doc/warrant/
USER 65532:65532
# The HTTPS API, and the metrics and health listener (deploy/'s --metrics-bind-address).
EXPOSE 8443 9090
ENTRYPOINT ["/warrant"]
CMD ["--help"]
