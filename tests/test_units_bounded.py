"""Every size and count parse is length-bounded before ``int()``/``float()``/``Fraction()``
(issue 24 item 2): a 5,000-digit integer, ``1e999`` or ``1e9999999`` in any size field is that
file's one-line error or the rule's own invalid-size finding, never a traceback, an
OverflowError or seconds of big-number arithmetic; a quantity above 8 EiB is invalid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shmguard.cli import app
from shmguard.sources.compose_types import docker_py_parse_bytes
from shmguard.units import (
    SIZE_MAX_CHARS,
    SizeError,
    k8s_quantity_bytes,
    parse_docker_size,
    parse_ecs_mib,
    parse_k8s_quantity,
    parse_size_annotation,
    parse_size_flag,
    parse_tmpfs_size,
    whole_number,
)

BIG = "9" * 5000  # over Python's 4,300-digit int-string limit


@pytest.mark.parametrize(
    "parse",
    [
        parse_docker_size,
        lambda t: parse_docker_size(t, legacy=True),
        parse_k8s_quantity,
        parse_tmpfs_size,
        parse_ecs_mib,
        docker_py_parse_bytes,
        parse_size_flag,
    ],
)
def test_a_5000_digit_size_is_a_size_error(parse) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SizeError, match="too long") as e:
        parse(BIG)
    assert "\n" not in str(e.value) and len(str(e.value)) < 200


def test_compose_v1_1e999_is_out_of_range_not_an_overflow() -> None:
    with pytest.raises(SizeError, match="out of range"):
        docker_py_parse_bytes("1e999")


@pytest.mark.parametrize("text", ["1e9999999", "1E9999999", "5e129", "100Ei", "8Ei", "1e999"])
def test_a_quantity_above_8_eib_is_invalid(text: str) -> None:
    with pytest.raises(SizeError, match="more than 8 EiB"):
        k8s_quantity_bytes(text)


def test_the_largest_quantity_and_tiny_exponents_still_parse() -> None:
    assert k8s_quantity_bytes(str(2**63 - 1)) == 2**63 - 1
    assert k8s_quantity_bytes("1e-9999999") == 1  # rounded up, as Quantity.Value()
    assert k8s_quantity_bytes("-1e-9999999") == 0
    assert k8s_quantity_bytes("0e9999999") == 0
    assert k8s_quantity_bytes("2Gi") == 2 * 2**30


def test_the_annotation_still_says_more_than_8_eib() -> None:
    with pytest.raises(SizeError, match="more than 8 EiB"):
        parse_size_annotation("100Ei")


def test_whole_number_takes_only_bounded_ascii_digits() -> None:
    assert whole_number(" 42 ") == 42
    assert whole_number("9" * SIZE_MAX_CHARS) == int("9" * SIZE_MAX_CHARS)
    assert whole_number("9" * (SIZE_MAX_CHARS + 1)) is None
    assert whole_number("²") is None  # str.isdigit() says True; int() refuses it
    assert whole_number("") is None


POD = """apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  containers:
  - name: c
    image: pytorch/pytorch
    command: ["python", "train.py", "--num-workers", "{v}"]
    resources: {{limits: {{memory: "{v}", nvidia.com/gpu: "{v}"}}}}
    volumeMounts: [{{name: dshm, mountPath: /dev/shm}}]
  volumes:
  - name: dshm
    emptyDir: {{medium: Memory, sizeLimit: "{v}"}}
"""


def _compose(v: str) -> str:
    return f"""services:
  a:
    image: pytorch/pytorch
    shm_size: {v}
    mem_limit: "{v}"
    tmpfs:
      - /dev/shm:size={v}
    deploy:
      resources:
        limits:
          memory: "{v}"
  b:
    image: pytorch/pytorch
    build:
      context: .
      shm_size: "{v}"
  c:
    image: pytorch/pytorch
    shm_size: "{v}"
"""


RUN = "#!/bin/sh\ndocker run --shm-size {v} --tmpfs /dev/shm:size={v} --gpus {v} pytorch/pytorch\n"
ECS = '{{"containerDefinitions": [{{"name": "t", "image": "pytorch/pytorch", "memory": "{v}",'
ECS += ' "linuxParameters": {{"sharedMemorySize": "{v}", "tmpfs": [{{"containerPath":'
ECS += ' "/dev/shm", "size": "{v}"}}]}}}}], "family": "f"}}'


def _files(tmp: Path, v: str) -> list[Path]:
    out = []
    for name, body in (
        ("compose.yaml", _compose(v)),
        ("pod.yaml", POD.format(v=v)),
        ("run.sh", RUN.format(v=v)),
        ("taskdef.json", ECS.format(v=v)),
    ):
        p = tmp / name
        p.write_text(body)
        out.append(p)
    return out


@pytest.mark.parametrize(
    "value",
    [BIG, "1e999", "1e9999999", "100Ei"],
    ids=["5000-digits", "1e999", "1e9999999", "100Ei"],
)
@pytest.mark.parametrize(
    "target", [[], ["--target", "compose=v1"], ["--target", "compose=podman-compose"]]
)
def test_check_reports_huge_numbers_without_a_traceback(
    tmp_path: Path, value: str, target: list[str]
) -> None:
    files = _files(tmp_path, value)
    r = CliRunner().invoke(app, ["check", "--format", "json", *target, *map(str, files)])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["summary"]["files"] == len(files)
    assert r.exit_code in (0, 1), r.stderr  # 2 would be a file's error: these files are valid
