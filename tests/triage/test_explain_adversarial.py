"""Regressions from an adversarial pass over ``explain``: realistic logs that were misread
(disk-full ENOSPC given /dev/shm advice, NCCL/c10d network wordings, torchrun signal
summaries, kubectl memory requests read as limits, host IPC, a rejected Podman flag
repeated as the fix, errors before a progress-bar redraw) and inputs that crashed or hung
(stdin closed, devices, read errors, FIFOs and catastrophic regexes in signature dirs)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from _triage_helpers import diagnose_text

from shmguard.fix.snippets import fix_snippets
from shmguard.triage.loader import SignatureError, builtin_dir, load_file, nested_repeat
from shmguard.triage.matchers import Matcher
from shmguard.triage.model import Diagnosis, Signature
from shmguard.triage.scanner import looks_utf16, make_line_literals
from shmguard.units import GiB

ALLOC_LINE = (
    b"RuntimeError: unable to allocate shared memory(shm) for file </torch_1_2_0>: No space "
    b"left on device (28)\n"
)
BUS = (
    "RuntimeError: DataLoader worker (pid 9041) is killed by signal: Bus error. It is possible "
    "that dataloader's workers are out of shared memory. Please try to raise your shared "
    "memory limit.\n"
)


def _shm_advice(d: Diagnosis) -> list[str]:
    """Ids of results whose fix prints a /dev/shm size or snippet."""
    return [
        r.id
        for r in d.results
        if r.fix is not None and (r.fix.shm_size is not None or fix_snippets(r.fix))
    ]


# --- disk-full ENOSPC on a named path is not /dev/shm -------------------------------------

DISK_FULL = {
    "checkpoint": (
        "Epoch 3: 100%|##########| 1250/1250\n"
        '  File "/workspace/train.py", line 301, in <module>\n'
        '    torch.save(model.state_dict(), "/checkpoints/run7/epoch3.pt")\n'
        "OSError: [Errno 28] No space left on device: '/checkpoints/run7/epoch3.pt'\n",
        4,
    ),
    "tmp-in-worker": (
        '  File "/usr/lib/python3.10/site-packages/torch/utils/data/_utils/worker.py", '
        "line 308, in _worker_loop\n"
        "    data = fetcher.fetch(index)\n"
        "OSError: [Errno 28] No space left on device: '/tmp/cache/1234.npy'\n",
        3,
    ),
    "relative-path": ("OSError: [Errno 28] No space left on device: 'outputs/x.npy'\n", 1),
    "pip": (
        "Collecting torch==2.3.0\n"
        "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on "
        "device\n",
        2,
    ),
    "cp": ("cp: error writing '/tmp/features.bin': No space left on device\n", 1),
    "docker-layer": (
        "failed to register layer: write /var/lib/docker/overlay2/4a1f/diff/usr/lib/x.so: "
        "no space left on device\n",
        1,
    ),
    "torch-save": (
        "RuntimeError: [enforce fail at inline_container.cc:595] . PytorchStreamWriter "
        "failed writing file data/12: file write failed\n",
        1,
    ),
}


@pytest.mark.parametrize("case", sorted(DISK_FULL))
def test_disk_full_on_a_named_path_gets_no_shm_advice(
    case: str, catalogue: Sequence[Signature]
) -> None:
    text, line = DISK_FULL[case]
    d = diagnose_text(text, catalogue)
    top = d.results[0]
    assert top.id == "disk-full" and top.kind == "disk_full"
    assert top.evidence[0].line == line
    assert _shm_advice(d) == []
    assert d.exit_code == 1


def test_enospc_under_dev_shm_is_still_shm(catalogue: Sequence[Signature]) -> None:
    for text in (
        "OSError: [Errno 28] No space left on device: '/dev/shm/cache_batch_0001.npy'\n",
        "write /dev/shm/region_1: no space left on device\n",
    ):
        d = diagnose_text(text, catalogue)
        assert d.results[0].id == "shm-enospc-path", text
        assert "disk-full" not in {r.id for r in d.results}
        fix = d.results[0].fix
        assert fix is not None and fix.shm_size is not None and fix.shm_size.bytes == 2 * GiB


# --- NCCL and c10d networking, every wording, never shm advice -----------------------------

NETWORK = {
    "nccl-2.7-connect": (
        "node-2:3011:3090 [0] include/socket.h:403 NCCL WARN Connect to 10.0.0.1<37255> "
        "failed : Connection refused\n"
        "node-2:3011:3090 [0] NCCL INFO bootstrap.cc:95 -> 2\n"
        "RuntimeError: NCCL error in: /opt/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:32, "
        "unhandled system error, NCCL version 2.7.3\n",
        [1],
    ),
    "recv-reset": (
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, "
        "NCCL version 2.14.3\n"
        "Last error:\n"
        "socketProgressOpt: Call to recv from 10.0.0.7<59022> failed : Connection reset by "
        "peer\n",
        [3],
    ),
    "c10d-refused": (
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to "
        "[master-0]:29500 (errno: 111 - Connection refused).\n",
        [1],
    ),
    "c10d-timeout": (
        "[E socket.cpp:957] [c10d] The client socket has timed out after 1800s while trying "
        "to connect to (master, 29500).\n"
        "torch.distributed.DistNetworkError: The client socket has timed out after 1800s "
        "while trying to connect to (master, 29500).\n",
        [1, 2],
    ),
    "store-socket-timeout": (
        "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from "
        "[0] via c10d key-value store by key '0', but store->get('0') got error: Socket "
        "Timeout\n",
        [1],
    ),
}


@pytest.mark.parametrize("case", sorted(NETWORK))
def test_network_errors_are_network_not_shm(case: str, catalogue: Sequence[Signature]) -> None:
    text, lines = NETWORK[case]
    d = diagnose_text(text, catalogue)
    top = d.results[0]
    assert (top.id, top.confidence) == ("nccl-network", "medium")
    assert [e.line for e in top.evidence] == lines
    assert _shm_advice(d) == []
    system = [r for r in d.results if r.id == "nccl-system-error"]
    assert all(r.explained_by == "nccl-network" for r in system)


def test_posix_fallocate_is_not_network(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(
        "node-0:1:2 [0] include/shm.h:48 NCCL WARN Call to posix_fallocate failed : No space "
        "left on device\n",
        catalogue,
    )
    assert d.results[0].id == "nccl-shm-segment"
    assert "nccl-network" not in {r.id for r in d.results}


# --- signals reported by torchrun and by the shell ------------------------------------------

ELASTIC = """\
WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 202 closing signal SIGTERM
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -7) local_rank: 0 (pid: 201) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
  exitcode  : -7 (pid: 201)
  traceback : Signal 7 (SIGBUS) received by PID 201
"""  # noqa: E501


def test_torchrun_sigbus_and_sigkill_summaries(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(ELASTIC, catalogue)
    assert [(r.id, r.confidence) for r in d.results] == [("sigbus-generic", "medium")]
    assert [e.line for e in d.results[0].evidence] == [2, 5, 6]
    killed = ELASTIC.replace("-7", "-9").replace("Signal 7 (SIGBUS)", "Signal 9 (SIGKILL)")
    d = diagnose_text(killed, catalogue)
    assert [(r.id, r.confidence) for r in d.results] == [("memory-oom-kill", "medium")]
    assert [e.line for e in d.results[0].evidence] == [2, 5, 6]
    assert _shm_advice(d) == []


@pytest.mark.parametrize(
    ("line", "sig_id"),
    [
        (
            "/workspace/run.sh: line 12:  4123 Killed                  python train.py\n",
            "memory-oom-kill",
        ),
        ("[1]+  Killed                  python train.py\n", "memory-oom-kill"),
        ("Killed\n", "memory-oom-kill"),
        (
            "train.sh: line 12:  4242 Bus error               (core dumped) python train.py\n",
            "sigbus-generic",
        ),
    ],
)
def test_shell_job_reports(line: str, sig_id: str, catalogue: Sequence[Signature]) -> None:
    d = diagnose_text("step 450 loss 0.21\n" + line, catalogue)
    assert [(r.id, r.evidence[0].line) for r in d.results] == [(sig_id, 2)]


def test_words_killed_and_bus_error_in_prose_do_not_match(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(
        "INFO: 3 Killed processes were restarted\nKilled 3 stale sessions\n"
        "INFO: 3 Bus error counters reset\n",
        catalogue,
    )
    assert d.results == ()


# --- an error followed by a CR redraw on the same line --------------------------------------


def test_error_before_a_progress_redraw_is_found(catalogue: Sequence[Signature]) -> None:
    data = (
        "Epoch 0:   3%|3  | 31/1000 [00:05<02:41]\r" + BUS.rstrip("\n") + "\r"
        "Epoch 0:   3%|3  | 32/1000 [00:05<02:41]\n"
    )
    d = diagnose_text(data, catalogue)
    top = d.results[0]
    assert top.id == "dataloader-bus-error" and top.evidence[0].line == 1
    assert top.evidence[0].text == BUS.strip()


# --- byte-order marks: Windows PowerShell writes UTF-16LE, editors a UTF-8 BOM -------------


def test_utf16_log_with_bom_is_read(catalogue: Sequence[Signature]) -> None:
    text = "Epoch 1\r\n" + DESCRIBE_HUGEPAGES.replace("\n", "\r\n") + BUS
    for codec in ("utf-16", "utf-16-be"):
        data = text.encode(codec)
        if codec == "utf-16-be":
            data = b"\xfe\xff" + data
        d = diagnose_text(data, catalogue, runtime="kubernetes")
        assert [(f.name, f.bytes, f.line) for f in d.facts] == [("mem_limit", 32 * GiB, 7)]
        top = d.results[0]
        assert (top.id, top.evidence[0].line, top.evidence[0].text) == (
            "dataloader-bus-error",
            10,
            BUS.strip(),
        )
        assert d.inputs[0].bytes == len(data) and not d.inputs[0].binary


def test_binary_starting_with_ff_fe_stays_bytes(catalogue: Sequence[Signature]) -> None:
    data = b"\xff\xfe" + ALLOC_LINE
    assert not looks_utf16(data) and looks_utf16("\ufeffabcd".encode("utf-16-le"))
    d = diagnose_text(data, catalogue)
    assert [(r.id, r.evidence[0].line) for r in d.results][:1] == [("torch-shm-alloc-failed", 1)]
    assert d.inputs[0].lines == 1


def test_utf8_bom_does_not_hide_the_first_line(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(b"\xef\xbb\xbfKilled\n", catalogue)
    assert [(r.id, r.evidence[0].line, r.evidence[0].text) for r in d.results] == [
        ("memory-oom-kill", 1, "Killed")
    ]


# --- kubectl describe: a memory request is not the limit ------------------------------------

DESCRIBE_NO_LIMIT = """\
Containers:
  trainer:
    Limits:
      nvidia.com/gpu:  1
    Requests:
      memory:          16Gi
      nvidia.com/gpu:  1
Volumes:
  dshm:
    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)
    Medium:     Memory
    SizeLimit:  1Gi
"""

DESCRIBE_HUGEPAGES = """\
    Limits:
      cpu:                8
      ephemeral-storage:  100Gi
      hugepages-1Gi:      0
      hugepages-2Mi:      0
      memory:             32Gi
    Requests:
      memory:             16Gi
"""


def test_memory_request_is_not_read_as_limit(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(DESCRIBE_NO_LIMIT + BUS, catalogue, runtime="kubernetes")
    assert [(f.name, f.bytes, f.line) for f in d.facts] == [("shm_total", GiB, 12)]
    fix = d.results[0].fix
    assert fix is not None and fix.memory_limit is None
    assert "limits" not in fix_snippets(fix)[0].text


def test_memory_limit_after_hugepages_is_read(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(DESCRIBE_HUGEPAGES + BUS, catalogue, runtime="kubernetes")
    assert [(f.name, f.bytes, f.line) for f in d.facts] == [("mem_limit", 32 * GiB, 6)]
    fix = d.results[0].fix
    # The sizing policy's 1 GiB default (the log shows no loader) fits beside the margin
    # under the 32 GiB limit read: the size decision raises no limit.
    assert fix is not None and fix.shm_size is not None and fix.shm_size.bytes == GiB
    assert fix.memory_limit is None


DISK_EMPTYDIR_EVICTED = """\
Status:       Failed
Reason:       Evicted
Message:      Usage of EmptyDir volume "hf-cache" exceeds the limit "50Gi".
Containers:
  trainer:
    Mounts:
      /root/.cache/huggingface from hf-cache (rw)
Volumes:
  hf-cache:
    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)
    Medium:
    SizeLimit:  50Gi
"""


def test_disk_emptydir_eviction_is_not_called_dev_shm(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(DISK_EMPTYDIR_EVICTED, catalogue)
    assert d.facts == ()  # a disk emptyDir's sizeLimit is not the /dev/shm size
    assert [(r.id, r.confidence) for r in d.results] == [("k8s-emptydir-evicted-other", "medium")]
    assert d.results[0].evidence[0].captures == {"volume": "hf-cache", "limit": "50Gi"}
    assert _shm_advice(d) == [] and d.runtime == "kubernetes"


@pytest.mark.parametrize("volume", ["dshm", "shm", "shared-mem", "cache-shm"])
def test_shm_named_emptydir_eviction_is_dev_shm(
    volume: str, catalogue: Sequence[Signature]
) -> None:
    line = f'  Warning  Evicted  3m  kubelet  Usage of EmptyDir volume "{volume}" exceeds the limit "1Gi".\n'  # noqa: E501
    d = diagnose_text(line, catalogue)
    assert [r.id for r in d.results] == ["k8s-emptydir-evicted"]
    fix = d.results[0].fix
    assert fix is not None and fix.shm_size is not None and fix.shm_size.bytes == 2 * GiB


@pytest.mark.parametrize(
    "line",
    [
        "Message: Pod ephemeral local storage usage exceeds the total limit of containers 10Gi.",
        '  Warning  Evicted  1m  kubelet  Container trainer exceeded its local ephemeral storage limit "20Gi".',  # noqa: E501
        "  Warning  Evicted  2m  kubelet  The node was low on resource: ephemeral-storage.",
    ],
)
def test_ephemeral_storage_eviction_is_disk(line: str, catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(line + "\n", catalogue)
    assert [(r.id, r.confidence) for r in d.results] == [("disk-full", "high")]
    assert d.runtime == "kubernetes" and _shm_advice(d) == []


# --- host IPC: /dev/shm is the host's, --shm-size is ignored --------------------------------


def test_host_ipc_gets_no_shm_size_snippet(catalogue: Sequence[Signature]) -> None:
    log = (
        "$ docker run --gpus all --ipc=host --shm-size=16g nvcr.io/nvidia/pytorch:24.05-py3 "
        "python train.py\n" + BUS
    )
    d = diagnose_text(log, catalogue)
    assert d.facts == ()  # the ignored --shm-size is not the /dev/shm size
    assert [(r.id, r.role) for r in d.results] == [
        ("dataloader-bus-error", "cause"),
        ("host-ipc", "info"),
    ]
    fix = d.results[0].fix
    assert fix is not None and fix.runtime == "docker"
    assert fix.shm_size is None and fix_snippets(fix) == () and fix.runtime_notes == ()
    assert fix.next[0].startswith("The container uses the host's IPC namespace (log line 1)")


def test_nvidia_banner_example_is_not_host_ipc(catalogue: Sequence[Signature]) -> None:
    banner = (
        "NOTE: The SHMEM allocation limit is set to the default of 64MB.  This may be\n"
        "   insufficient for PyTorch.  NVIDIA recommends the use of the following flags:\n"
        "   docker run --gpus all --ipc=host --ulimit memlock=-1 --ulimit stack=67108864 ...\n"
    )
    d = diagnose_text(banner, catalogue)
    assert [(r.id, r.role) for r in d.results] == [("nvidia-shm-banner", "info")]
    assert d.exit_code == 0 and d.runtime is None
    d = diagnose_text(banner + BUS, catalogue, runtime="docker")
    fix = d.results[0].fix
    assert fix is not None and fix.shm_size is not None and fix.shm_size.bytes == GiB


def test_podman_host_ipc_rejection_is_not_answered_with_the_same_flag(
    catalogue: Sequence[Signature],
) -> None:
    log = (
        "$ podman run --ipc=host --shm-size=4g -it quay.io/org/trainer:latest\n"
        "Error: cannot set shmsize when running in the host IPC Namespace\n"
    )
    d = diagnose_text(log, catalogue)
    top = d.results[0]
    assert top.id == "ipc-shmsize-conflict" and d.runtime == "podman"
    assert top.fix is not None and fix_snippets(top.fix) == () and top.fix.shm_size is None
    assert top.fix.runtime_notes == (
        "Drop --shm-size with --ipc=host (the host's /dev/shm is used); in a pod, give the "
        "size to `podman pod create --shm-size` (podman 4.x+).",
    )


# --- signature files: catastrophic regexes and special files --------------------------------

USER_SIG = """
id = "my-redos"
title = "T"
kind = "k"
remedy = "investigate"
cause = "c"
references = ["x"]

[[patterns]]
name = "p"
literal = "aaa"
regex = "{regex}"

[fix]
summary = "s"
"""


@pytest.mark.parametrize(
    ("regex", "nested"),
    [
        (r"^(a+)+$", True),
        (r"(?:\s+\S+)*x", True),
        (r"(a*)*", True),
        (r"(.*a){20}", True),
        (r"(a|b+)*", True),
        (r"(?=(a+)+)", True),
        (r"(?:\d+\.){3}\d+", False),
        (r"(?:a++)+", False),
        (r"(?>a+)+", False),
        (r"a{1,100}b", False),
        (r"DataLoader worker \(pid\(s\) (?P<pids>[\d, ]+)\) exited", False),
    ],
)
def test_nested_repeat_detection(regex: str, nested: bool) -> None:
    assert nested_repeat(regex) is nested


def test_catastrophic_regex_is_refused_on_load(tmp_path: Path) -> None:
    p = tmp_path / "redos.toml"
    p.write_text(USER_SIG.replace("{regex}", r"^(a+)+$"))
    with pytest.raises(SignatureError) as err:
        load_file(p)
    assert str(err.value) == (
        f"{p}: patterns[0].regex: a repeated group contains an unbounded repeat (like '(a+)+' "
        "or '(\\s+\\S+)*'), which can backtrack for hours on one line; drop the outer repeat, "
        "or make the inner one possessive ('a++') or atomic ('(?>a+)')"
    )


def test_builtin_catalogue_has_no_nested_repeats(catalogue: Sequence[Signature]) -> None:
    assert [
        (s.id, p.name) for s in catalogue for p in s.patterns if nested_repeat(p.regex.pattern)
    ] == []


def test_signature_fifo_and_device_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    dev = tmp_path / "zero.toml"
    dev.symlink_to("/dev/zero")
    for p in (fifo, dev):
        with pytest.raises(SignatureError) as err:
            load_file(p)
        assert str(err.value) == f"{p}: not a regular file"


def test_size_runtimes_validated(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        USER_SIG.replace("{regex}", "aaa").replace('remedy = "investigate"', 'remedy = "config"')
        + '\n[size]\ndefault = "1g"\nfloor = "64m"\nbasis = "b"\nruntimes = ["swarm"]\n'
    )
    with pytest.raises(SignatureError) as err:
        load_file(p)
    assert str(err.value) == (
        f"{p}: size.runtimes[0]: 'swarm' is not one of docker, compose, kubernetes, podman, ecs"
    )


# --- the command line: closed stdin, devices, read errors, hostile signature dirs -----------


def _run(
    *args: str, close_stdin: bool = False, stdin: bytes | None = b""
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", "from shmguard.cli import main; main()", "explain", *args],
        input=None if close_stdin else stdin,
        stdin=None if not close_stdin else subprocess.DEVNULL,
        preexec_fn=(lambda: os.close(0)) if close_stdin else None,
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": ":".join(sys.path)},
    )


def _one_line_error(r: subprocess.CompletedProcess[bytes]) -> str:
    assert r.returncode == 2 and r.stdout == b""
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.timeout(60)
def test_dash_with_stdin_closed() -> None:
    err = _one_line_error(_run("-", close_stdin=True))
    assert err == "shmguard: error: -: standard input is closed; give a log file instead\n"


@pytest.mark.timeout(60)
def test_device_is_refused_not_read_forever() -> None:
    err = _one_line_error(_run("/dev/zero"))
    assert err == (
        "shmguard: error: /dev/zero: is a device, not a log file "
        "(pipe it in with '-' if you mean it)\n"
    )


@pytest.mark.timeout(60)
def test_read_error_names_the_file() -> None:
    # Reading offset 0 of a process's own memory fails with EIO (page 0 is never mapped).
    err = _one_line_error(_run("/proc/self/mem"))
    assert err == "shmguard: error: /proc/self/mem: read error at byte 0: Input/output error\n"


@pytest.mark.timeout(60)
def test_hostile_signature_dirs_fail_fast(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("a" * 40 + "!\n")
    redos = tmp_path / "redos"
    redos.mkdir()
    (redos / "a.toml").write_text(USER_SIG.replace("{regex}", r"^(a+)+$"))
    err = _one_line_error(_run("--signatures", str(redos), str(log)))
    assert err.startswith(f"shmguard: error: {redos / 'a.toml'}: patterns[0].regex: ")
    fifo_dir = tmp_path / "fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "a.toml")
    err = _one_line_error(_run("--signatures", str(fifo_dir), str(log)))
    assert err == f"shmguard: error: {fifo_dir / 'a.toml'}: not a regular file\n"


# --- the per-line literal check: every literal a hit line holds, overlapping ones too -------


def test_line_literals_are_found_overlapping() -> None:
    lits = [b"No space left on device", b"No space left on device: ", b": No space", b"zzz"]
    present = make_line_literals(lits, "ac")
    assert present is not None
    assert present(b"OSError: [Errno 28] No space left on device: '/tmp/x'") == [0, 1]
    assert present(b"write /tmp/x: No space left on device: zzz") == [0, 1, 2, 3]
    assert present(b"nothing here") == []
    assert make_line_literals(lits, "find") is None


def test_both_prefilter_backends_agree_on_every_sample(catalogue: Sequence[Signature]) -> None:
    samples = sorted((builtin_dir() / "samples").glob("*.log"))
    assert len(samples) > 70
    seen: list[dict[str, list[tuple[str, int, str]]]] = []
    for backend in ("ac", "find"):
        m = Matcher(catalogue, backend=backend)
        for p in samples:
            m.feed(p.name, io.BytesIO(p.read_bytes()))
        seen.append(
            {
                sig: [(e.file, e.line, e.pattern) for e in t.evidence]
                for sig, t in sorted(m.tallies.items())
            }
        )
    assert seen[0] == seen[1]
    assert "disk-full" in seen[0] and "host-ipc" in seen[0]
