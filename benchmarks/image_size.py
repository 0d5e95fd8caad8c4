"""The size the shmguard image adds over its base image (target: under 60 MB).

Run after deploy/image/build.sh, in the same Docker daemon:
``python benchmarks/image_size.py [IMAGE] [BASE]`` (defaults: shmguard:<version> and
python:3.11-slim-bookworm, build.sh's defaults). DOCKER picks the client (default docker).

Prints both sizes as the daemon reports them (``docker image inspect``: the uncompressed
size of every layer), the difference against the target, and the layers the image adds
(``docker history``), largest first. MB is 10^6 bytes, as Docker prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

TARGET_MB = 60
ROOT = Path(__file__).resolve().parents[1]


def _docker(*args: str) -> str:
    docker = os.environ.get("DOCKER", "docker")
    return subprocess.run(
        [docker, *args], capture_output=True, text=True, check=True, timeout=120
    ).stdout


def _history(image: str) -> list[tuple[int, str]]:
    """(bytes, instruction) per layer, newest first."""
    out = _docker("history", "--no-trunc", "--human=false", "--format", "{{json .}}", image)
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [(int(r["Size"]), " ".join(r["CreatedBy"].split())) for r in rows]


def main() -> int:
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("image", nargs="?", default=f"shmguard:{version.group(1) if version else ''}")
    ap.add_argument("base", nargs="?", default="python:3.11-slim-bookworm")
    args = ap.parse_args()
    size = int(_docker("image", "inspect", "-f", "{{.Size}}", args.image))
    base = int(_docker("image", "inspect", "-f", "{{.Size}}", args.base))
    added = size - base
    verdict = "under" if added < TARGET_MB * 10**6 else "OVER"
    print(f"image {args.image}: {size / 1e6:.1f} MB")
    print(f"base  {args.base}: {base / 1e6:.1f} MB")
    print(f"added: {added / 1e6:.1f} MB ({verdict} the {TARGET_MB} MB target)")
    mine = _history(args.image)
    layers = mine[: len(mine) - len(_history(args.base))]
    for n, created in sorted(layers, reverse=True):
        if n:
            print(f"  {n / 1e6:7.1f} MB  {created[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
