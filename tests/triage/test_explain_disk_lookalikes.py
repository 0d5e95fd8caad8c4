"""ENOSPC and ENOMEM that are not /dev/shm (issue 10, the third of the corpus held out until
it was scored): a full disk in every writer's wording (coreutils, bash, Python's tempfile,
rsync, tar, Apptainer, mksquashfs, Node, Rust, SageMaker, quotas, dataset-cache and checkpoint
tracebacks), inotify's limits, which report ENOSPC and EMFILE, and mmap's map-count limit,
which reports ENOMEM. For each: the cause explain names first, its kind, and that no result
gives a /dev/shm size; and the other way round, that the same writers on /dev/shm stay shm."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from _triage_helpers import diagnose_text

from shmguard.fix.snippets import fix_snippets
from shmguard.triage.model import Diagnosis, Result, Signature
from shmguard.triage.scoring import score


def _shm_advice(d: Diagnosis) -> list[str]:
    """Ids of results whose fix prints a /dev/shm size or snippet."""
    return [
        r.id
        for r in d.results
        if r.fix is not None and (r.fix.shm_size is not None or fix_snippets(r.fix))
    ]


def _top(d: Diagnosis) -> Result:
    causes = [r for r in d.results if r.role == "cause" and r.explained_by is None]
    assert causes, [r.id for r in d.results]
    return causes[0]


# --- a full disk: (log, signature ranked first, its confidence, 1-based evidence line) ------

DISK = {
    "apptainer-blob-colon-lost": (
        "Writing manifest to image destination\n"
        "FATAL:   While performing build: conveyor failed to get: writing blob: write "
        "/tmp/bundle-temp-2094984273/oci-put-blob1495208066 no space left on device\n",
        "disk-full",
        "high",
        2,
    ),
    "mksquashfs": (
        "INFO:    Creating SIF file...\n"
        "FATAL:   While performing build: while creating squashfs: create command failed: "
        "exit status 1: Write failed because No space left on device\n"
        "FATAL ERROR: Failed to write to output filesystem\n",
        "disk-full",
        "high",
        2,
    ),
    "bash-heredoc-and-mkdir": (
        "SLURM assigned me the node(s): host1\n"
        "/var/spool/slurmd/job5944119/slurm_script: line 34: cannot create temp file for "
        "here-document: No space left on device\n"
        "mkdir: cannot create directory ‘/tmp/8e303830’: No space left on device\n",
        "disk-full",
        "high",
        2,
    ),
    "python-tempfile": (
        "FileNotFoundError: [Errno 2] No usable temporary directory found in ['/tmp', "
        "'/var/tmp', '/usr/tmp', '/home/user']\n",
        "disk-full",
        "medium",
        1,
    ),
    "rsync": (
        'rsync: [receiver] write failed on "/tmp/tmpovhfyg0n/casper/minimal.squashfs": '
        "No space left on device (28)\n",
        "disk-full",
        "high",
        1,
    ),
    "tar-relative-member": (
        "tar: usr/share/bug/binutils/presubj: Cannot write: No space left on device\n",
        "disk-full",
        "medium",
        1,
    ),
    "npm": (
        "npm WARN tar ENOSPC: no space left on device, open "
        "'/app/node_modules/.staging/notifu/notifu.exe'\n",
        "disk-full",
        "high",
        1,
    ),
    "safetensors-display": (
        "Error while serializing: I/O error: No space left on device (os error 28)\n",
        "disk-full",
        "high",
        1,
    ),
    "rust-caused-by": (
        "Error: download failed\n\nCaused by:\n    No space left on device (os error 28)\n",
        "disk-full",
        "medium",
        4,
    ),
    "quota": ("OSError: [Errno 122] Disk quota exceeded\n", "disk-full", "high", 1),
    "torch-central-directory": (
        "RuntimeError: [enforce fail at inline_container.cc:603] . PytorchStreamWriter failed "
        "writing central directory: file write failed\n",
        "disk-full",
        "medium",
        1,
    ),
    "torchrun-prefixed-fsspec-write": (
        '[rank4]:   File "pyarrow/error.pxi", line 89, in pyarrow.lib.check_status\n'
        '[rank4]:   File "/env/lib/python3.10/site-packages/fsspec/implementations/local.py", '
        "line 426, in write\n"
        "[rank4]:     return self.f.write(*args, **kwargs)\n"
        "[rank4]: OSError: [Errno 28] No space left on device\n",
        "disk-full-writer",
        "high",
        4,
    ),
    "parquet-writer": (
        '  File "pyarrow/_parquet.pyx", line 1754, in pyarrow._parquet.ParquetWriter.write_table\n'
        '  File "pyarrow/error.pxi", line 91, in pyarrow.lib.check_status\n'
        "OSError: [Errno 28] No space left on device\n",
        "disk-full-writer",
        "high",
        3,
    ),
    "mmengine-checkpoint": (
        '  File "/env/site-packages/mmengine/hooks/checkpoint_hook.py", line 476, in '
        "_save_checkpoint\n"
        "    runner.save_checkpoint(\n"
        '  File "/env/site-packages/mmengine/fileio/backends/local_backend.py", line 169, in put\n'
        "    f.write(obj)\n"
        "OSError: [Errno 28] No space left on device\n",
        "disk-full-writer",
        "high",
        5,
    ),
}


@pytest.mark.parametrize("case", sorted(DISK))
def test_a_full_disk_in_any_writers_wording_is_disk_full(
    case: str, catalogue: Sequence[Signature]
) -> None:
    text, sig_id, confidence, line = DISK[case]
    d = diagnose_text(text, catalogue)
    top = _top(d)
    assert (top.id, top.kind, top.confidence) == (sig_id, "disk_full", confidence)
    assert top.evidence[0].line == line
    assert _shm_advice(d) == []
    # the bare ENOSPC reading (enospc-bare), when it matched too, is explained by the writer
    assert all(r.explained_by == sig_id for r in d.results if r.id == "enospc-bare")


def test_apptainer_build_names_the_runtime_and_its_temporary_directory(
    catalogue: Sequence[Signature],
) -> None:
    d = diagnose_text(DISK["apptainer-blob-colon-lost"][0], catalogue)
    top = _top(d)
    assert d.runtime == "apptainer"
    assert top.fix is not None and top.fix.runtime == "apptainer"
    assert any("APPTAINER_TMPDIR" in n for n in top.fix.runtime_notes)
    assert any("APPTAINER_TMPDIR" in n for n in top.notes)


@pytest.mark.parametrize("stage", ["Artifact upload", "Data download"])
def test_sagemaker_insufficient_disk_space_is_the_training_volume(
    stage: str, catalogue: Sequence[Signature]
) -> None:
    log = (
        "UnexpectedStatusException: Error for Training job hf-training-2021-05-31: Failed. "
        f"Reason: ClientError: {stage} failed:Insufficient disk space\n"
    )
    d = diagnose_text(log, catalogue)
    top = _top(d)
    assert (top.id, top.kind, top.confidence) == ("disk-full", "disk_full", "high")
    assert d.runtime == "sagemaker"
    assert top.fix is not None and any("volume_size" in n for n in top.fix.runtime_notes)
    assert _shm_advice(d) == []


@pytest.mark.parametrize(
    "line",
    [
        # shutil names both files; the full one is the destination, here /dev/shm
        "OSError: [Errno 28] No space left on device: '/data/train.bin' -> '/dev/shm/train.bin'",
        'rsync: [receiver] write failed on "/dev/shm/cache/x.bin": No space left on device (28)',
        "FATAL:   While performing build: write /dev/shm/build-temp-1/x: no space left on device",
        "tar: /dev/shm/data/x.jpg: Cannot write: No space left on device",
    ],
)
def test_the_same_writers_on_dev_shm_are_not_a_full_disk(
    line: str, catalogue: Sequence[Signature]
) -> None:
    d = diagnose_text(line + "\n", catalogue)
    assert "disk-full" not in {r.id for r in d.results}
    assert _top(d).id == "shm-enospc-path"


def test_datasets_free_space_check_is_a_check_and_says_how_it_can_be_wrong(
    catalogue: Sequence[Signature],
) -> None:
    log = (
        "OSError: Not enough disk space. Needed: 134.92 GiB (download: 41.97 GiB, generated: "
        "92.95 GiB, post-processed: Unknown size)\n"
    )
    d = diagnose_text(log, catalogue)
    top = _top(d)
    assert (top.id, top.kind, top.confidence) == ("disk-full", "disk_full", "medium")
    assert "#2972" in top.decide and "df -h" in top.decide
    assert any("another mount" in n for n in top.notes)
    assert _shm_advice(d) == []


# --- inotify: ENOSPC and EMFILE from the watch and instance limits ------------------------

MICROK8S = (
    "Jan 12 23:31:45 host1 microk8s.daemon-kubelet[20887]: W0112 23:31:45.136870   20887 "
    'watcher.go:87] Error while processing event ("/sys/fs/cgroup/devices/system.slice/'
    'run-r7f6.scope": 0x40000100 == IN_CREATE|IN_ISDIR): inotify_add_watch '
    "/sys/fs/cgroup/devices/system.slice/run-r7f6.scope: no space left on device\n"
    "Jan 14 22:41:28 host1 systemd[1]: snap.microk8s.daemon-containerd.service: Failed to add "
    "inotify watch descriptor for control group "
    "/system.slice/snap.microk8s.daemon-containerd.service: No space left on device\n"
)


@pytest.mark.parametrize(
    "log",
    [
        MICROK8S,
        "Error: ENOSPC: System limit for number of file watchers reached, watch '/app/src'\n",
        "2017-10-19 08:54:02,971 pyinotify ERROR] add_watch: cannot watch /var/www/db WD=-1, "
        "Errno=No space left on device (ENOSPC)\n",
        "Failed to watch /volume1; upper limit on inotify watches reached!\n",
    ],
)
def test_inotify_watch_enospc_is_not_a_full_disk_or_dev_shm(
    log: str, catalogue: Sequence[Signature]
) -> None:
    d = diagnose_text(log, catalogue)
    top = _top(d)
    assert (top.id, top.kind, top.confidence) == ("inotify-watch-limit", "other", "high")
    assert "disk-full" not in {r.id for r in d.results}
    assert all(r.explained_by == "inotify-watch-limit" for r in d.results if r.id != top.id)
    assert _shm_advice(d) == []
    assert top.fix is not None and "max_user_watches" in top.fix.summary


@pytest.mark.parametrize(
    "line",
    [
        "failed to create fsnotify watcher: too many open files",
        "Error creating recommended watcher: Too many open files (os error 24)",
        "Failed to allocate directory watch: Too many open files",
    ],
)
def test_watcher_emfile_is_the_inotify_instance_limit_not_the_open_files_limit(
    line: str, catalogue: Sequence[Signature]
) -> None:
    d = diagnose_text(line + "\n", catalogue)
    assert _top(d).id == "inotify-watch-limit"
    fd = [r for r in d.results if r.id == "fd-limit"]
    assert all(r.explained_by == "inotify-watch-limit" for r in fd)


def test_plain_emfile_is_still_the_open_files_limit(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text("OSError: [Errno 24] Too many open files\n", catalogue)
    assert _top(d).id == "fd-limit"
    assert "inotify-watch-limit" not in {r.id for r in d.results}


# --- mmap ENOMEM: the map-count limit --------------------------------------------------------


@pytest.mark.parametrize(
    ("log", "confidence"),
    [
        (
            '  File "pyarrow/io.pxi", line 1053, in pyarrow.lib.memory_map\n'
            '  File "pyarrow/error.pxi", line 91, in pyarrow.lib.check_status\n'
            "OSError: Memory mapping file failed: Cannot allocate memory\n",
            "medium",
        ),
        (
            "RuntimeError: unable to mmap 29764 bytes from file "
            "</torch_10182_3020184674_63991>: Cannot allocate memory (12)\n",
            "high",
        ),
        (
            "RuntimeError: unable to mmap 2048 bytes from file <filename not specified>: "
            "Cannot allocate memory (12)\n",
            "high",
        ),
        (
            '  File "/env/site-packages/numpy/core/memmap.py", line 267, in __new__\n'
            "    mm = mmap.mmap(fid.fileno(), bytes, access=acc, offset=start)\n"
            "OSError: [Errno 12] Cannot allocate memory\n",
            "medium",
        ),
    ],
)
def test_mmap_enomem_is_the_map_count_limit_not_ram_or_dev_shm(
    log: str, confidence: str, catalogue: Sequence[Signature]
) -> None:
    d = diagnose_text(log, catalogue)
    top = _top(d)
    assert (top.id, top.kind, top.confidence) == ("mmap-count-limit", "other", confidence)
    assert "vm.max_map_count" in top.decide
    assert "torch-shm-write-failed" not in {r.id for r in d.results}
    assert _shm_advice(d) == []


def test_torch_shm_enospc_is_still_dev_shm(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(
        "RuntimeError: unable to write to file </torch_12346_144252761_4>: No space left on "
        "device (28)\n",
        catalogue,
    )
    assert _top(d).id == "torch-shm-write-failed"
    assert "mmap-count-limit" not in {r.id for r in d.results}


@pytest.mark.parametrize(
    "log",
    [
        # one 24 GB private mapping of a model file: commit charge, not the map count
        "RuntimeError: unable to mmap 23802932552 bytes from file <./flux1-dev.safetensors>: "
        "Cannot allocate memory (12)\n",
        # fork() refused: memory
        '  File "/usr/lib/python3.10/multiprocessing/popen_fork.py", line 66, in _launch\n'
        "    self.pid = os.fork()\nOSError: [Errno 12] Cannot allocate memory\n",
    ],
)
def test_other_enomem_is_not_the_map_count(log: str, catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(log, catalogue)
    assert "mmap-count-limit" not in {r.id for r in d.results}


# --- how the scorer reads these kinds ---------------------------------------------------------


@pytest.mark.parametrize(
    "log",
    [
        MICROK8S,
        "OSError: Memory mapping file failed: Cannot allocate memory\n",
    ],
)
def test_inotify_and_map_count_are_right_for_a_look_alike_labelled_other(
    log: str, catalogue: Sequence[Signature]
) -> None:
    report = {"kind": "other", "lookalike": True, "decidable": True}
    s = score(report, diagnose_text(log, catalogue))
    assert s.right and not s.shm_advice


def test_node_memory_pressure_eviction_says_to_set_requests(
    catalogue: Sequence[Signature],
) -> None:
    log = (
        "4m11s  Warning  Evicted  pod/egg-1  The node was low on resource: memory. Container "
        "egg was using 5053216Ki, which exceeds its request of 0.\n"
    )
    d = diagnose_text(log, catalogue)
    top = _top(d)
    assert (top.id, top.kind, d.runtime) == ("memory-oom-kill", "cgroup_oom", "kubernetes")
    assert any("requests.memory" in n for n in top.notes)
    assert _shm_advice(d) == []
