#!/bin/bash
# Build memtop's exporter image (contrib/container/Containerfile) as TAG:
#   scripts/container_image.sh [TAG]            (make image runs it)
# pip builds memtop's wheel and its dependencies' wheels here, with this machine's package index
# settings, into build/wheels; podman builds the Containerfile with build/ as its context, so the
# image installs from those wheels only. Its base, debian:bookworm-slim, is taken from the local
# store; where there is none (no registry reachable), `--base` makes it first with mmdebstrap from
# Debian's packages, the way Debian's own slim image is made (minbase, merged /usr, no docs).
set -euo pipefail
cd "$(dirname "$0")/.."
base=0
if [ "${1:-}" = "--base" ]; then base=1; shift; fi
tag="${1:-localhost/memtop:latest}"
runtime="${PODMAN_RUNTIME:-runc}"  # crun refuses hybrid cgroup hierarchies
if [ "$base" = 1 ] && ! podman image exists docker.io/library/debian:bookworm-slim; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    mmdebstrap --variant=minbase --quiet \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
        bookworm "$tmp/rootfs.tar"
    podman import --quiet "$tmp/rootfs.tar" docker.io/library/debian:bookworm-slim >/dev/null
fi
rm -rf build/wheels
"${PIP:-.venv/bin/pip}" wheel --quiet --wheel-dir build/wheels . 2> >(grep -v "^WARNING: Location" >&2)
podman build --quiet --runtime "$runtime" -f contrib/container/Containerfile -t "$tag" build >/dev/null
echo "$tag"
