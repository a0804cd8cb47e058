# syntax=docker/dockerfile:1
#
# The composition-webhook image: the binary CI builds and tests (same Cargo.lock, same
# features, `--locked`), linked statically against musl, alone on distroless/static as
# user 65532. Build from the project's root:
#
#   docker build -t composition-webhook:dev .
#
# The build stage compiles natively for the platform being built (buildx builds arm64 on
# an arm64 builder or under emulation); ring and mimalloc compile C, hence musl-tools.
#
# The binary is optimised with a profile of its own work (PGO, scripts/pgo-build.sh): built
# instrumented with the serve bench, trained on testdata/'s Compositions in-process and
# through the server, then built again with the profile (docs/performance.md): two builds
# instead of one; `--build-arg PGO=false` builds once, without a profile.

ARG RUST_VERSION=1.95
ARG PGO=true

FROM docker.io/library/rust:${RUST_VERSION}-slim-bookworm AS build
ARG PGO
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
RUN case "$(uname -m)" in \
      x86_64) echo x86_64-unknown-linux-musl ;; \
      aarch64) echo aarch64-unknown-linux-musl ;; \
      *) echo "unsupported architecture $(uname -m)" >&2; exit 1 ;; \
    esac > /rust-target \
 && rustup target add "$(cat /rust-target)" \
 && if [ "$PGO" = true ]; then rustup component add llvm-tools; fi
WORKDIR /src
# What `cargo build` reads: the manifest and lock file, the build script and the .proto
# files it compiles (proto/), the sources, the vendored crates
# Cargo.toml patches in (vendor/), the CRDs embedded at build time (crds/upstream), and the
# bench targets Cargo.toml declares; for the profile, the serve bench's test harness
# (tests/webhook, tests/common), its Compositions and schemas (testdata) and the script.
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto ./proto
COPY vendor ./vendor
COPY src ./src
COPY crds ./crds
COPY benches ./benches
COPY tests ./tests
COPY testdata ./testdata
COPY scripts ./scripts
# The profile's line tables are left out of the image (139 MB with them, 29 MB without, on
# x86_64-unknown-linux-gnu); symbols stay, for backtraces.
ENV CARGO_PROFILE_RELEASE_STRIP=debuginfo
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    if [ "$PGO" = true ]; then \
      scripts/pgo-build.sh --target "$(cat /rust-target)" --out /composition-webhook; \
    else \
      cargo build --release --locked --bin composition-webhook --target "$(cat /rust-target)" \
      && cp "target/$(cat /rust-target)/release/composition-webhook" /composition-webhook; \
    fi

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /composition-webhook /composition-webhook
USER 65532:65532
# Admission (HTTPS) and operations (/livez, /readyz, /metrics) ports.
EXPOSE 9443 8080
ENTRYPOINT ["/composition-webhook"]
CMD ["serve"]
