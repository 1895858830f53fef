#!/usr/bin/env bash
# Builds Magnetar's container images from this checkout:
#   $MAGNETAR_IMAGE             (default local/magnetar:latest)           deploy/Dockerfile
#   $MAGNETAR_PROMETHEUS_IMAGE  (default local/magnetar-prometheus:latest) deploy/prometheus/Dockerfile
#
#   deploy/build-image.sh                 from python:3.11-slim and debian:bookworm-slim
#   deploy/build-image.sh --local-base    from local/debian-py:bookworm, made here with
#                                         debootstrap + docker import when missing (CI:
#                                         no registry is reachable); the app image is
#                                         built with --network=none
#
# The app image installs only wheels made on this machine (the magnetar wheel
# and every dependency, `pip wheel`), so its build needs no network. The
# Prometheus image installs Debian's `prometheus` package with apt.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${MAGNETAR_IMAGE:-local/magnetar:latest}
PROM_IMAGE=${MAGNETAR_PROMETHEUS_IMAGE:-local/magnetar-prometheus:latest}
LOCAL_BASE=local/debian-py:bookworm
PY=${PYTHON:-.venv/bin/python}

local_base=0
for arg in "$@"; do
  case "$arg" in
    --local-base) local_base=1 ;;
    *) echo "usage: $0 [--local-base]" >&2; exit 2 ;;
  esac
done

step() { printf '[build-image %5.1fs] %s\n' "$SECONDS" "$*"; }

build_local_base() {
  if docker image inspect "$LOCAL_BASE" >/dev/null 2>&1; then
    step "$LOCAL_BASE exists"
    return
  fi
  command -v debootstrap >/dev/null || { echo "debootstrap is not installed" >&2; exit 1; }
  local rootfs
  rootfs=$(mktemp -d /var/tmp/magnetar-rootfs.XXXXXX)
  step "debootstrap bookworm (python3, python3-venv) into $rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv bookworm "$rootfs" \
    >"$rootfs.log" 2>&1 || { tail -20 "$rootfs.log" >&2; rm -rf "$rootfs"; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  step "docker import -> $LOCAL_BASE"
  tar -C "$rootfs" -c . | docker import - "$LOCAL_BASE" >/dev/null
  rm -rf "$rootfs" "$rootfs.log"
}

# The interpreter in the image is 3.11 on x86_64/aarch64 glibc; the wheels
# pip picks for this machine's Python fit it only if that is 3.11 too.
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' || {
  echo "$PY must be Python 3.11 (the image's Python) to pick its wheels" >&2; exit 1; }

ctx=$(mktemp -d /var/tmp/magnetar-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
step "wheels of magnetar and its dependencies"
# setuptools reuses build/lib: a module deleted from the source would stay in the wheel.
rm -rf build
"$PY" -m pip wheel -q --disable-pip-version-check -w "$ctx/wheels" . >"$ctx/pip.log" 2>&1 || {
  cat "$ctx/pip.log" >&2; exit 1; }
cp deploy/Dockerfile "$ctx/Dockerfile"

if [ "$local_base" = 1 ]; then
  build_local_base
  app_args=(--network=none --build-arg "BASE=$LOCAL_BASE")
  prom_args=(--build-arg "BASE=$LOCAL_BASE")
else
  app_args=()
  prom_args=()
fi

# The legacy builder (there is no buildx here) prints a deprecation banner
# on stderr: shown only when a build fails.
build() {
  docker build -q "$@" >/dev/null 2>"$ctx/build.log" || { cat "$ctx/build.log" >&2; exit 1; }
}
step "docker build $IMAGE"
build "${app_args[@]}" -t "$IMAGE" "$ctx"
docker image prune -f --filter label=magnetar.stage=build >/dev/null
step "docker build $PROM_IMAGE"
build "${prom_args[@]}" -t "$PROM_IMAGE" deploy/prometheus
step "done: $(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%s %.0f MB", "'"$IMAGE"'", $1/1e6}')"
