# syntax=docker/dockerfile:1
# karmada-rs image: karmada-controller-manager (the entrypoint), karmada-agent and karmadactl, nothing else.
#
#   make image                      # docker build -t ghcr.io/karmada-rs/karmada-controller-manager:<version> .
#
# Not built in this repository's CI (no container runtime there): kept correct by review. The chart runs
# `/karmada-controller-manager` as UID 65532 with a read-only root filesystem.

# ---- build -------------------------------------------------------------------------------------------
# Same toolchain line as rust-version/CI; bookworm so the binary's glibc matches the runtime image.
ARG RUST_VERSION=1.95
FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Reproducible: versions come only from Cargo.lock (--locked fails if it is stale); the build date and
# git facts baked into `version` come from SOURCE_DATE_EPOCH and the build args below.
ARG SOURCE_DATE_EPOCH=0
ENV SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH} \
    CARGO_TERM_COLOR=never \
    CARGO_INCREMENTAL=0
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p karmada-controller-manager -p karmada-agent -p karmadactl --bins \
 && install -D -m 0755 target/release/karmada-controller-manager /out/karmada-controller-manager \
 && install -D -m 0755 target/release/karmada-agent /out/karmada-agent \
 && install -D -m 0755 target/release/karmadactl /out/karmadactl

# ---- runtime -----------------------------------------------------------------------------------------
# distroless "cc": glibc, libgcc, CA certificates (rustls-native-certs reads them); no shell, no package
# manager. The :nonroot tag runs as 65532:65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/karmada-controller-manager /karmada-controller-manager
COPY --from=build /out/karmada-agent /karmada-agent
COPY --from=build /out/karmadactl /karmadactl
USER 65532:65532
EXPOSE 8080 10357
ENTRYPOINT ["/karmada-controller-manager"]
