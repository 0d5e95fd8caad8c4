"""Every finding over ../shared/corpus, in full, is the same as when the digest was recorded.

:data:`DIGEST` is the SHA-256 of the finding lists (code, name, severity, file, line, column,
end line and column, byte offsets, YAML path, message, why, fix with its changes and edits,
for every file, in order) and of the bytes each file with edits becomes when they are applied
(the first round of ``fix_file``, any applicability). It was computed with the code of main at
commit f6ccc26, before the speed-ups of issue 8 (tag resolution, lazy evidence locations and paths):
a change that should only make ``check`` faster must leave it equal. Only the rules that
existed then are run, so rules added later do not move it (their own tests cover them).

A change meant to alter findings updates :data:`DIGEST` (and the per-code snapshot of
test_corpus_check.py) in the same commit.
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pytest

from shmguard.lint.check import check_loaded
from shmguard.lint.config import RULES
from shmguard.model.finding import Edit, Finding, apply_edits
from shmguard.sources.discover import discover
from shmguard.sources.load import load_bytes

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"
pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason="../shared/corpus (next to the repository) is absent"
)

#: The rules of main at f6ccc26.
CODES = frozenset(
    {"SHM001", "SHM002", "SHM003", "SHM004", "SHM006", "SHM008", "SHM009", "SHM011", "SHM012"}
    | {"SHM014", "SHM016", "SHM017", "SHM018", "SHM019", "SHM021", "SHM023", "SHM025"}
)

#: Recorded again after SHM007 landed (SHM001 leaves a container SHM007 reports to it: one
#: finding less); the code before and after the speed-ups gives this same value. Recorded
#: again when a block mapping ending in a block scalar (a container's ``command: |``) took new
#: entries after its first one, or before it: six SHM001 findings more have their edits (143
#: of 147, was 137), the findings themselves unchanged. Recorded again when images and
#: commands came to be matched by token (issue 19): the evidence in 78 SHM001 messages names
#: the token (``(pytorch)``, was ``(nvcr.io/nvidia/pytorch)``; ``(text-embeddings-inference)``,
#: was ``(huggingface)``); every other field, each finding and each fixed file unchanged.
#: Recorded again when SHM001's Kubernetes fix came to name the plan's volume (issue 19): one
#: finding (NVIDIA nim-deploy, a pod with a volume named ``dshm`` already) says ``name:
#: dshm-1``, which its edit writes (was ``name: dshm``); every edit and fixed file unchanged.
#: Recorded again when check --fix came to read ``shmguard.io/dataloader`` (issue 19, fix A),
#: after the volume-name change above: SHM001's and SHM008's fix descriptions name that
#: annotation; with the old sentences the digest was the value before, so every size, edit and
#: fixed file is unchanged.
#: Recorded again when run lines came to be read with the file's own shell assignments
#: (issue 21): over the corpus run lines, 3 SHM001 messages change, no finding or edit does:
#: two Triton lines name their whole image (``nvcr.io/nvidia/tritonserver:<your container
#: version>-py3``: a placeholder of several words is one word now, was cut at ``<``), and the
#: picotron README line says ``(unless ${DOCKER_ARGS[@]} sets --shm-size or --ipc; the file
#: does not assign it)`` (the corpus keeps the line, not the README that declares the array).
#: Recorded again when the command's arguments became evidence (issue 21, item 3): 5 SHM001
#: findings go from warning to info (variant ``no-workers``, message ``...; info only:
#: --workers=0 starts no DataLoader worker and one GPU needs no NCCL shared memory inside the
#: container``, fix unsafe): the single-GPU imagenet PyTorchJobs of aws-do-eks and of
#: awsome-distributed-training's task-governance (team a and b; nvidia.com/gpu 1,
#: ``--workers=0``, ``torchrun --nproc_per_node=1``), kubeflow's elastic imagenet example (no
#: GPU, ``--workers=0``) and aws-do-eks's classy-vision ElasticJob (``--num_workers=0``,
#: ``--nproc_per_node=1``). Every other finding and every fixed file unchanged.
# 372baf12... -> bf30c165...: SHM001 at info on the corpus's 9 PostgreSQL services (issue 22)
DIGEST = "bf30c16516b0cab1ce2e2b4356af330e9b1ae3ccc6ddea03c1ee3a2646a8ca98"


def _files() -> list[tuple[str, bytes]]:
    out = [
        (f, Path(f).read_bytes()) for f in discover([str(CORPUS / "compose"), str(CORPUS / "k8s")])
    ]
    with (CORPUS / "docker_run_lines.tsv").open() as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            out.append((row["corpus_path"] + ".sh", row["command"].encode()))
    return out


def _repr(f: Finding) -> str:
    # Dataclass reprs name every field (Location, Fix, Change, Edit); the paths are made
    # relative to the corpus so the digest does not depend on where the checkout is.
    return repr(f).replace(str(CORPUS), "<corpus>")


def _first_round(data: bytes, findings: tuple[Finding, ...]) -> bytes:
    """``data`` with the edits of every finding (any applicability) applied, in file order,
    a finding overlapping an edit already taken left out (``fix_file``'s first round)."""
    taken: list[Edit] = []
    for f in findings:
        if f.fix is None or not f.fix.edits:
            continue
        spans = [(e.start, e.end) for e in f.fix.edits]
        if any(a == t.start or (a < t.end and t.start < b) for a, b in spans for t in taken):
            continue
        taken.extend(f.fix.edits)
    return apply_edits(data, taken)


def corpus_digest() -> tuple[str, int]:
    """The SHA-256 of every finding and fixed file over the corpus, and the finding count."""
    rules = tuple(r for r in RULES if r.code in CODES)
    assert sorted(r.code for r in rules) == sorted(CODES)
    h = hashlib.sha256()
    n = 0
    for name, data in _files():
        rel = name.replace(str(CORPUS), "<corpus>")
        result = check_loaded(load_bytes(data, name), rules=rules)
        h.update(f"\0{rel}\0{len(result.findings)}\n".encode())
        for f in result.findings:
            h.update(_repr(f).encode() + b"\n")
        n += len(result.findings)
        edits = [e for f in result.findings if f.fix is not None for e in f.fix.edits]
        if edits:
            h.update(hashlib.sha256(_first_round(data, result.findings)).digest())
    return h.hexdigest(), n


def test_corpus_findings_unchanged() -> None:
    digest, n = corpus_digest()
    assert n > 0
    assert digest == DIGEST
