#!/usr/bin/env bash
# Build the shmguard image (deploy/image/Dockerfile; docs/deploy.md#the-image).
#
#   deploy/image/build.sh [--base IMAGE] [--tag TAG]
#
# 1. asks BASE which Python it has (version, implementation, machine, C library), in a
#    container with no network;
# 2. builds shmguard's wheel on this host, from a clean copy of the checkout;
# 3. fills a wheelhouse with every dependency's wheel for BASE's Python and platform
#    (`pip download --only-binary=:all: --python-version ... --platform ...`: psutil, PyYAML
#    and ahocorasick-rs are ABI-specific); where no such wheel exists and this host's Python is
#    the same version on the same machine, `pip wheel` builds the missing ones here instead;
# 4. runs `docker build --network none` with that wheelhouse as the context: the Dockerfile
#    installs from it with `pip install --no-index`, so the build needs no package index.
#
# Only this host talks to a package index (pip's own configuration applies: an index, a mirror,
# PIP_INDEX_URL); the daemon needs no network unless BASE must be pulled. Environment:
# PYTHON (default python3) is the host's Python with pip; DOCKER (default docker) the Docker
# client; SHMGUARD_SOURCE becomes the org.opencontainers.image.source label (default
# https://github.com/your-org/shmguard).
# Prints the image id and its size, and the size it adds over BASE.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: deploy/image/build.sh [--base IMAGE] [--tag TAG]

Build the shmguard image from a wheelhouse made on this host.

  --base IMAGE  a Python 3.10+ image with the venv module (default python:3.11-slim-bookworm)
  --tag TAG     the image's name (default shmguard:<version>)
  -h, --help    this text

Environment: PYTHON (host Python with pip, default python3), DOCKER (the Docker client,
default docker), SHMGUARD_SOURCE (the org.opencontainers.image.source label).
EOF
}

die() {
  echo "build.sh: $*" >&2
  exit 2
}

BASE=python:3.11-slim-bookworm
TAG=
while [ $# -gt 0 ]; do
  case "$1" in
    --base) [ $# -ge 2 ] && [ -n "$2" ] || die "--base needs an image"; BASE=$2; shift 2 ;;
    --base=*) BASE=${1#--base=}; shift ;;
    --tag) [ $# -ge 2 ] && [ -n "$2" ] || die "--tag needs a name"; TAG=$2; shift 2 ;;
    --tag=*) TAG=${1#--tag=}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
[ -n "$BASE" ] || die "--base needs an image"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
DOCKER="${DOCKER:-docker}"
command -v "$DOCKER" >/dev/null || die "$DOCKER not found (set DOCKER to a Docker client)"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON to a Python with pip)"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "$PYTHON has no pip (set PYTHON)"
"$DOCKER" version >/dev/null 2>&1 || die "the Docker daemon does not answer (DOCKER_HOST=${DOCKER_HOST:-unset})"

START=$SECONDS
WORK="$(mktemp -d "${TMPDIR:-/tmp}/shmguard-image.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src" "$WORK/context/wheels"
WHEELS="$WORK/context/wheels"

# 1. BASE's Python: "3.11 cpython x86_64 glibc 2.36" (musl: "... musl 1.2"; the musl version
# is not in the interpreter, 1.2 covers every musllinux wheel of today).
echo "build.sh: asking $BASE for its Python" >&2
probe='import platform, sys
ma = getattr(sys.implementation, "_multiarch", "") or ""
libc, ver = platform.libc_ver()
if "musl" in ma:
    libc, ver = "musl", "1.2"
print("%d.%d" % sys.version_info[:2], sys.implementation.name, platform.machine(),
      libc or "unknown", ver or "0.0")'
if ! info="$("$DOCKER" run --rm --network none --entrypoint python3 "$BASE" -c "$probe")"; then
  die "could not run python3 in $BASE (is it an image with Python 3?)"
fi
read -r PYVER IMPL MACHINE LIBC LIBCVER <<<"$info"
echo "build.sh: $BASE has Python $PYVER ($IMPL) on $MACHINE, $LIBC $LIBCVER" >&2
[ "$IMPL" = cpython ] || die "$BASE's Python is $IMPL; the wheelhouse is made for CPython only"
case "$PYVER" in
  3.1[0-9] | 3.[2-9][0-9]) ;;
  *) die "$BASE has Python $PYVER; shmguard needs 3.10 or later" ;;
esac
PYNODOT=${PYVER/./}

# The platform tags a wheel for BASE may carry, newest first (pip does not expand a
# manylinux_2_X tag to older ones itself).
platforms=()
case "$LIBC" in
  glibc)
    minor=${LIBCVER#*.}
    minor=${minor%%.*}
    for ((m = minor; m >= 17; m--)); do platforms+=(--platform "manylinux_2_${m}_${MACHINE}"); done
    platforms+=(--platform "manylinux2014_${MACHINE}")
    if [ "$MACHINE" = x86_64 ] || [ "$MACHINE" = i686 ]; then
      platforms+=(--platform "manylinux_2_12_${MACHINE}" --platform "manylinux2010_${MACHINE}")
      platforms+=(--platform "manylinux_2_5_${MACHINE}" --platform "manylinux1_${MACHINE}")
    fi
    ;;
  musl)
    platforms+=(--platform "musllinux_1_2_${MACHINE}" --platform "musllinux_1_1_${MACHINE}")
    ;;
  *) die "$BASE's C library is not recognised ($LIBC): no wheel platform for it" ;;
esac

# 2. shmguard's wheel, built from the checkout's files (tracked and untracked-not-ignored)
# copied to a temporary directory: a stale build/ in the checkout cannot leak into it.
echo "build.sh: building shmguard's wheel" >&2
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -C "$WORK/src" -xf -
  REVISION="$(git -C "$ROOT" rev-parse HEAD)"
else
  tar -C "$ROOT" --exclude=.git --exclude=.venv --exclude=build --exclude=dist -cf - . |
    tar -C "$WORK/src" -xf -
  REVISION=unknown
fi
"$PYTHON" -m pip wheel -q --no-deps -w "$WHEELS" "$WORK/src" >&2 ||
  die "pip wheel of the checkout failed"
wheel="$(ls "$WHEELS"/shmguard-*.whl)"
VERSION="$(basename "$wheel" | cut -d- -f2)"
[ -n "$TAG" ] || TAG="shmguard:$VERSION"

# 3. the dependencies, as wheels for BASE's Python. pip evaluates environment markers against
# the host's Python whatever --python-version says, so shmguard's own requirements are
# evaluated here for BASE's (tomli is needed below 3.11) and named explicitly; a marker in a
# dependency's own requirements is still the host's (the default base and CI use the host's
# version, so their set is exact; otherwise `pip install --no-index` names anything missing).
marker_probe='import sys, zipfile
try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.markers import Marker
    from pip._vendor.packaging.requirements import Requirement
wheel, pyver, machine = sys.argv[1:4]
env = {"python_version": pyver, "python_full_version": pyver + ".0",
       "implementation_name": "cpython", "platform_python_implementation": "CPython",
       "platform_machine": machine, "sys_platform": "linux", "platform_system": "Linux",
       "os_name": "posix", "extra": ""}
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode().splitlines()
for line in lines:
    if line.startswith("Requires-Dist:"):
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is None or req.marker.evaluate(env):
            req.marker = None
            print(req)'
reqs="$("$PYTHON" -c "$marker_probe" "$wheel" "$PYVER" "$MACHINE")" ||
  die "could not read the requirements of $wheel"
requirements=()
[ -z "$reqs" ] || mapfile -t requirements <<<"$reqs"
echo "build.sh: downloading dependency wheels for CPython $PYVER on ${platforms[1]}" >&2
if ! "$PYTHON" -m pip download -q -d "$WHEELS" --only-binary=:all: \
  --python-version "$PYVER" --implementation cp --abi "cp$PYNODOT" "${platforms[@]}" \
  "$wheel" "${requirements[@]}" >&2; then
  host="$("$PYTHON" -c 'import platform, sys; print("%d.%d" % sys.version_info[:2], platform.machine())')"
  if [ "$host" != "$PYVER $MACHINE" ]; then
    die "some dependency has no wheel for CPython $PYVER on $MACHINE, and this host's Python ($host) cannot build one for it"
  fi
  echo "build.sh: no wheel for every dependency; building the missing ones with this host's Python $host" >&2
  "$PYTHON" -m pip wheel -q -w "$WHEELS" "$wheel" >&2 || die "pip wheel of the dependencies failed"
fi
echo "build.sh: wheelhouse: $(find "$WHEELS" -name '*.whl' | wc -l) wheels, $(du -sh "$WHEELS" | cut -f1)" >&2

# 4. the image, with nothing but the wheelhouse in its context and no network. BuildKit where
# the client has it (buildx, or a client before 23.0 with DOCKER_BUILDKIT=1): the legacy
# builder commits a container for every instruction, about 15 s each on the vfs storage driver.
cp "$HERE/Dockerfile" "$WORK/context/Dockerfile"
if [ -z "${DOCKER_BUILDKIT:-}" ]; then
  if "$DOCKER" buildx version >/dev/null 2>&1; then
    export DOCKER_BUILDKIT=1
  else
    client="$("$DOCKER" version --format '{{.Client.Version}}' 2>/dev/null || echo 0)"
    if [ "${client%%.*}" -lt 23 ] 2>/dev/null; then
      export DOCKER_BUILDKIT=1
    else
      echo "build.sh: $DOCKER $client has no buildx: the legacy builder (slower)" >&2
    fi
  fi
fi
echo "build.sh: docker build -t $TAG (base $BASE)" >&2
"$DOCKER" build --network none --iidfile "$WORK/iid" -t "$TAG" \
  --build-arg "BASE=$BASE" --build-arg "VERSION=$VERSION" \
  --label "org.opencontainers.image.revision=$REVISION" \
  --label "org.opencontainers.image.source=${SHMGUARD_SOURCE:-https://github.com/your-org/shmguard}" \
  "$WORK/context" >&2 || die "docker build failed"

size="$("$DOCKER" image inspect -f '{{.Size}}' "$TAG")"
base_size="$("$DOCKER" image inspect -f '{{.Size}}' "$BASE")"
echo "build.sh: built in $((SECONDS - START)) s" >&2
echo "image $TAG"
echo "id $(cat "$WORK/iid")"
echo "size $size bytes ($((size / 1000000)) MB; $(((size - base_size) / 1000000)) MB over $BASE)"
