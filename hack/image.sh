#!/usr/bin/env bash
# Packs karmada-controller-manager (the entrypoint), karmada-agent and karmadactl into an image archive,
# without a container daemon or a base image from a registry:
#
#   hack/image.sh [--bin-dir DIR] [--out FILE] [--tag REF]
#
# --bin-dir: where the three binaries are (default: `cargo build --release --locked` them, target/release).
# --out:     the archive (default target/image/karmada-rs-image.tar); the SBOM is written beside it,
#            FILE without .tar + .cdx.json (CycloneDX JSON, hack/sbom).
# --tag:     the reference the archive carries (default ghcr.io/karmada-rs/karmada-controller-manager:<version>).
#
# The archive is a docker-archive tarball (manifest.json + config + layer, `crane mutate -o`), the one
# format `docker load`, `podman load` and `kind load image-archive` (containerd's import) all read; an OCI
# layout would need `skopeo`/`ctr` flags on the docker side. crane only mutates images in a registry, so
# the layer is appended to an empty base in a throwaway `crane registry serve` on 127.0.0.1, then
# mutated (entrypoint, user, labels, annotations) and written out.
#
# Contents (one layer): the three binaries, built for glibc (no musl target is installed for the offline
# toolchain), with the dynamic loader and every library `ldd` lists for them, copied from this machine;
# the machine's CA bundle at /etc/ssl/certs/ca-certificates.crt; /etc/passwd and /etc/group naming
# 65532 (nonroot); an empty /tmp. The image runs as 65532:65532.
#
# Reproducible: every file has mtime SOURCE_DATE_EPOCH (default: the last commit's date), owner 0:0 and
# its tar entries are sorted; the config carries no build time other than the created label.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "image: $*" >&2; exit 1; }

bin_dir="" out="$root/target/image/karmada-rs-image.tar" tag=""
while [ $# -gt 0 ]; do
  case $1 in
    --bin-dir) bin_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    *) die "unknown argument $1 (usage: hack/image.sh [--bin-dir DIR] [--out FILE] [--tag REF])" ;;
  esac
done

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
source_url=$(sed -n 's/^repository = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
[ -n "$tag" ] || tag="ghcr.io/karmada-rs/karmada-controller-manager:$version"
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
bins=(karmada-controller-manager karmada-agent karmadactl)

if [ -z "$bin_dir" ]; then
  (cd "$root" && SOURCE_DATE_EPOCH=$epoch cargo build --release --locked \
    -p karmada-controller-manager -p karmada-agent -p karmadactl --bins) ||
    die "cargo build --release of ${bins[*]} failed: see the errors above"
  bin_dir="${CARGO_TARGET_DIR:-$root/target}/release"
fi
for b in "${bins[@]}"; do [ -x "$bin_dir/$b" ] || die "$bin_dir/$b is missing or not executable"; done

crane_dir=$("$root/hack/build-test-binaries.sh") || die "cannot build crane (hack/build-test-binaries.sh failed)"
crane="$crane_dir/crane"
[ -x "$crane" ] || crane=${KUBEBUILDER_ASSETS:-}/crane
[ -x "$crane" ] || die "crane is not in $crane_dir (hack/build-test-binaries.sh should have built it)"

work=$(mktemp -d "${TMPDIR:-/tmp}/karmada-rs-image.XXXXXX")
registry_pid=""
cleanup() { [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# ---- the root filesystem ----
rootfs="$work/rootfs"
mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
for b in "${bins[@]}"; do install -m 0755 "$bin_dir/$b" "$rootfs/$b"; done
# The loader and the libraries, at the paths the binaries name (PT_INTERP) and ldd resolves.
libs=$(for b in "${bins[@]}"; do ldd "$bin_dir/$b" || die "ldd $bin_dir/$b failed"; done |
  awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
[ -n "$libs" ] || die "ldd lists no library for ${bins[*]} (a static build needs none: not supported here yet)"
for lib in $libs; do
  mkdir -p "$rootfs$(dirname "$lib")"
  install -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
done
[ -f /etc/ssl/certs/ca-certificates.crt ] ||
  die "/etc/ssl/certs/ca-certificates.crt is missing (install the ca-certificates package)"
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=gnu \
  -C "$rootfs" -cf "$work/layer.tar" . || die "cannot write the layer tarball"

# ---- the image, through a throwaway registry ----
"$crane" registry serve --address 127.0.0.1:0 2>"$work/registry.log" &
registry_pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
  [ -n "$port" ] && break
  kill -0 "$registry_pid" 2>/dev/null || die "crane registry serve exited: $(cat "$work/registry.log")"
  sleep 0.1
done
[ -n "$port" ] || die "crane registry serve did not say its port within 10s: $(cat "$work/registry.log")"
staging="127.0.0.1:$port/karmada-rs:staging"
"$crane" append --oci-empty-base -f "$work/layer.tar" -t "$staging" >/dev/null 2>"$work/append.log" ||
  die "crane append failed: $(cat "$work/append.log")"
oci=(org.opencontainers.image.source="$source_url" org.opencontainers.image.revision="$revision"
  org.opencontainers.image.version="$version" org.opencontainers.image.created="$created"
  org.opencontainers.image.title=karmada-rs org.opencontainers.image.licenses=Apache-2.0)
mutate=(--entrypoint=/karmada-controller-manager --user=65532:65532 --workdir=/ --set-platform="linux/$arch"
  --exposed-ports=8080/tcp,10357/tcp)
for kv in "${oci[@]}"; do mutate+=(--label "$kv" --annotation "$kv"); done
mkdir -p "$(dirname "$out")"
rm -f "$out"
"$crane" mutate "$staging" "${mutate[@]}" -t "$tag" -o "$out" 2>"$work/mutate.log" ||
  die "crane mutate failed: $(cat "$work/mutate.log")"

# ---- the SBOM, beside it ----
sbom="${out%.tar}.cdx.json"
(cd "$root" && cargo run -q --locked -p sbom -- --image "$tag" --created "$created" \
  -p karmada-controller-manager -p karmada-agent -p karmadactl) >"$sbom.tmp" ||
  die "hack/sbom failed: see the errors above"
mv "$sbom.tmp" "$sbom"
echo "image: wrote $out ($tag) and $sbom" >&2
echo "$out"
