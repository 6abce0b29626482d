# A minimal image of the warrant binary (docs/install.md). Not built by this repository's
# tests (they run no container engine); build it with `docker build -t warrant .`.
#
# Build: the toolchain the workspace pins (Cargo.toml rust-version), with cmake for aws-lc.
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# .git is not copied (.dockerignore): pass what /version and --version should name, e.g.
#   --build-arg WARRANT_GIT_COMMIT=$(git rev-parse HEAD)
#   --build-arg WARRANT_BUILD_DATE=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
ARG WARRANT_GIT_COMMIT=""
ARG WARRANT_BUILD_DATE=""
ENV WARRANT_GIT_COMMIT=$WARRANT_GIT_COMMIT WARRANT_BUILD_DATE=$WARRANT_BUILD_DATE
COPY . .
RUN cargo build --release --locked --bin warrant && cp target/release/warrant /warrant

# Run: distroless with glibc (aws-lc links against it), no shell, non-root (uid 65532).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /warrant /warrant
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/warrant"]
CMD ["--help"]
