"""SHM013 `ipc-donor-not-shareable`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

from _rule_helpers import fixed, found

from shmguard.lint.check import check_loaded
from shmguard.sources.load import load_bytes

COMPOSE_DONOR = """\
services:
  server:
    image: vllm/vllm-openai
    shm_size: "8g"
  sidecar:
    image: busybox
    ipc: "service:server"
  priv:
    image: busybox
    ipc: private
  joins_priv:
    image: busybox
    ipc: service:priv
  share:
    image: busybox
    ipc: shareable
  joins_share:
    image: busybox
    ipc: service:share
  joins_outside:
    image: busybox
    ipc: service:elsewhere
"""


RUN = """\
docker run -d --name donor --shm-size=8g vllm/vllm-openai
docker run --rm --ipc=container:donor busybox ls /dev/shm
docker run -d --name shared --ipc=shareable busybox sleep 1
docker run --ipc=container:shared busybox true
podman run -d --name pdonor busybox sleep 1
podman run --ipc=container:pdonor busybox true
docker run --ipc=container:unknown busybox true
"""


def test_shm013_compose_donor_without_shareable() -> None:
    got = found(COMPOSE_DONOR, "compose.yaml", "SHM013")
    assert [g[:4] for g in got] == [("error", 7, 10, "safe"), ("error", 13, 10, "safe")]
    assert "non-shareable IPC" in got[0][4] and "'server'" in got[0][4]


def test_shm013_compose_fix_sets_donor_shareable() -> None:
    out = fixed(COMPOSE_DONOR, "compose.yaml", "SHM013")
    assert out.startswith("services:\n  server:\n    ipc: shareable\n    image: vllm/vllm-openai\n")
    assert "  priv:\n    image: busybox\n    ipc: shareable\n" in out
    assert found(out, "compose.yaml", "SHM013") == []


def test_shm013_not_for_podman_compose_or_host_donor() -> None:
    from shmguard.lint.check import CheckOptions
    from shmguard.model.target import parse_target

    opts = CheckOptions(target=parse_target("compose=podman-compose"))
    r = check_loaded(load_bytes(COMPOSE_DONOR.encode(), "c.yaml"), opts)
    assert [f for f in r.findings if f.code == "SHM013"] == []
    host = "services:\n  a:\n    image: x\n    ipc: host\n  b:\n    image: y\n    ipc: service:a\n"
    assert found(host, "c.yaml", "SHM013") == []


def test_shm013_run_line_donor_in_same_file() -> None:
    got = found(RUN, "run.sh", "SHM013")
    assert [g[:4] for g in got] == [("error", 2, 17, "safe")]
    assert "started on line 1" in got[0][4]
    out = fixed(RUN, "run.sh", "SHM013")
    assert (
        out.splitlines()[0]
        == "docker run --ipc=shareable -d --name donor --shm-size=8g vllm/vllm-openai"
    )
    assert found(out, "run.sh", "SHM013") == []
