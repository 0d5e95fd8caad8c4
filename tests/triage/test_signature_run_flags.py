"""The signature files' ``shm``, ``sigbus`` and ``state_only`` fields: what a match says of a
run that measure, probe or the guard watched. They replaced three lists in
shmguard.measure.outcome; the sets below are those lists, the regression anchor."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from shmguard.measure.outcome import is_shm, is_shm_failure, is_sigbus, is_state_only
from shmguard.triage.loader import SignatureError, builtin_dir, parse_signature
from shmguard.triage.text import builtin_catalogue

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: outcome.SHM_KINDS before the fields: the kinds whose cause is a failed shm allocation.
OLD_SHM_KINDS = frozenset({"dataloader_shm", "shm_full", "nccl_shm", "triton_shm", "ray_shm"})
#: The built-in signatures of those kinds when the list was removed.
SHM_IDS = frozenset(
    {
        "dataloader-bus-error",
        "dataloader-feeder-failure",
        "enospc-bare",
        "nccl-shm-segment",
        "nccl-shm-sigbus",
        "paddle-dataloader-shm",
        "ray-object-store-shm",
        "shm-enospc-path",
        "shm-full-df",
        "sigbus-generic",
        "torch-shm-alloc-failed",
        "torch-shm-write-failed",
        "triton-python-backend-shm",
    }
)
#: Signatures added since (issue 22), of kinds the old list never had: a failed /dev/shm
#: allocation of Chrome's renderer, of PostgreSQL's dynamic shared memory, of 389-ds's
#: database region files and of an MPI/UCX transport's segment (mpi-shm-small, kind shm_small:
#: UCX's 'Not enough memory to write', Open MPI's 'not enough space for ... the shared-memory
#: backing file').
ADDED_SHM_IDS = frozenset(
    {"browser-shm-crash", "postgres-dsm-resize", "dirsrv-shm-db-region", "mpi-shm-small"}
)
#: outcome.SIGBUS_SIGNATURES before the fields.
SIGBUS_IDS = frozenset({"dataloader-bus-error", "sigbus-generic"})
#: outcome.STATE_SIGNATURES before the fields.
STATE_IDS = frozenset({"shm-full-df"})


def test_the_fields_mark_what_the_old_lists_named() -> None:
    sigs = builtin_catalogue()
    assert {s.id for s in sigs if s.shm} == SHM_IDS | ADDED_SHM_IDS
    assert {s.id for s in sigs if s.kind in OLD_SHM_KINDS} == SHM_IDS
    assert {s.id for s in sigs if s.sigbus} == SIGBUS_IDS
    assert {s.id for s in sigs if s.state_only} == STATE_IDS
    # what measure, probe and the guard ask of a result's id
    for s in sigs:
        assert is_shm(s.id) is (s.id in SHM_IDS | ADDED_SHM_IDS), s.id
        assert is_sigbus(s.id) is (s.id in SIGBUS_IDS), s.id
        assert is_state_only(s.id) is (s.id in STATE_IDS), s.id
        # the hang detector's filter: shm causes that are not a state
        shm_failure = s.id in (SHM_IDS | ADDED_SHM_IDS) - STATE_IDS
        assert is_shm_failure(s) is (s.role == "cause" and shm_failure), s.id
    assert not is_shm("no-such-signature") and not is_sigbus(None)


def _sigbus_generic() -> dict[str, Any]:
    return dict(tomllib.loads((builtin_dir() / "sigbus-generic.toml").read_text()))


def test_the_file_parses_with_its_flags() -> None:
    sig = parse_signature(_sigbus_generic(), "sigbus-generic.toml")
    assert (sig.shm, sig.sigbus, sig.state_only) == (True, True, False)
    data = _sigbus_generic()
    for key in ("shm", "sigbus"):
        del data[key]
    sig = parse_signature(data, "plain.toml")
    assert (sig.shm, sig.sigbus, sig.state_only) == (False, False, False)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"shm": "yes"}, "bad.toml: shm: must be true or false"),
        ({"sigbus": 1}, "bad.toml: sigbus: must be true or false"),
        ({"state_only": "true"}, "bad.toml: state_only: must be true or false"),
        ({"shm": False, "sigbus": False, "state_only": True}, "bad.toml: state_only: needs shm"),
        ({"state_only": True}, "bad.toml: state_only: a state is not a SIGBUS"),
        ({"role": "info", "remedy": "none"}, "bad.toml: shm: only a signature of role = 'cause'"),
    ],
    ids=[
        "shm-string",
        "sigbus-int",
        "state-string",
        "state-without-shm",
        "state-and-sigbus",
        "info",
    ],
)
def test_the_validator_rejects_a_bad_flag(change: dict[str, Any], message: str) -> None:
    data = {**_sigbus_generic(), **change}
    with pytest.raises(SignatureError) as err:
        parse_signature(data, "bad.toml")
    assert str(err.value).startswith(message), str(err.value)
