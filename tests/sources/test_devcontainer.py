"""Dev Container configurations (devcontainer.json: JSON with comments and trailing commas)
read as the `docker run` they start, on real files (tests/fixtures/devcontainer/SOURCES.tsv)."""

from __future__ import annotations

import shutil
from pathlib import Path

from shmguard.fix.devcontainer import add_run_arg
from shmguard.lint.check import check_loaded, fix_file
from shmguard.sources.devcontainer import blank_jsonc, compose_paths
from shmguard.sources.discover import walk
from shmguard.sources.load import load_bytes, load_path

FIXTURES = Path(__file__).parents[1] / "fixtures" / "devcontainer"


def _codes(path: Path) -> list[tuple[str, int]]:
    r = check_loaded(load_path(str(path)))
    assert r.diagnostics == ()
    return [(f.code, f.location.line or 0) for f in r.findings if f.location is not None]


def test_blanking_keeps_every_offset() -> None:
    data = b'{\n  // a comment \xc3\xa9\n  "runArgs": ["--gpus", "all",], /* x */\n'
    data += b'  "a": "//not",\n}\n'
    out = blank_jsonc(data)
    assert len(out) == len(data)
    assert out.count(b"\n") == data.count(b"\n")
    assert b"comment" not in out and b"/* x */" not in out
    assert b'"all" ]' in out and b'"//not"' in out  # a trailing comma blanked, a string kept


def test_real_configurations_and_their_findings() -> None:
    assert _codes(FIXTURES / "nemo" / "devcontainer.json") == []  # --shm-size=128g
    assert _codes(FIXTURES / "nemo-unsized" / "devcontainer.json") == [("SHM001", 16)]
    # a GPU alone is no ML evidence; the image comes from the Dockerfile's FROM (miniconda)
    lf = load_path(str(FIXTURES / "pytorch-cuda" / "devcontainer.json"))
    assert lf.kind == "devcontainer"
    (dc,) = lf.devcontainers
    assert dc.run is not None and dc.run.image is not None
    assert dc.run.image[0] == "mcr.microsoft.com/vscode/devcontainers/miniconda:0-3"
    assert [(f.name, f.value) for f in dc.run.flags] == [("--gpus", "all")]
    assert _codes(FIXTURES / "pytorch-cuda" / "devcontainer.json") == []
    assert _codes(FIXTURES / "onnxruntime" / "devcontainer.json") == []


def test_fix_adds_the_flag_to_run_args_keeping_comments_and_formatting(tmp_path: Path) -> None:
    bad = (FIXTURES / "nemo-unsized" / "devcontainer.json").read_bytes()
    r = fix_file(bad, "devcontainer.json")
    assert r.data == bad.replace(
        b'        "--gpus=all"\n', b'        "--gpus=all",\n        "--shm-size=1g"\n'
    )
    assert b'// "build": {' in r.data  # the comments stay
    assert fix_file(r.data, "devcontainer.json").applied == ()  # idempotent
    # the CLI writes it (atomically, as for every file)
    target = tmp_path / ".devcontainer" / "devcontainer.json"
    target.parent.mkdir()
    target.write_bytes(bad)
    from typer.testing import CliRunner

    from shmguard.cli import app

    assert CliRunner().invoke(app, ["check", "--fix", str(target)]).exit_code == 0
    assert target.read_bytes() == r.data


def test_the_edit_on_tabs_one_line_arrays_and_no_run_args() -> None:
    # onnxruntime's one-line runArgs, tab-indented file: `, "--shm-size=1g"` before the `]`
    data = (FIXTURES / "onnxruntime" / "devcontainer.json").read_bytes()
    (dc,) = load_bytes(data, "devcontainer.json").devcontainers
    edit = add_run_arg(dc, "--shm-size=1g")
    assert edit is not None
    out = data[: edit.start] + edit.content.encode() + data[edit.end :]
    assert b'"seccomp=unconfined", "--shm-size=1g" ]' in out
    # no runArgs: the key after the last member, at its indentation (a tab), after the
    # trailing comma the file has
    src = b'{\n\t// ML dev box\n\t"image": "nvcr.io/nvidia/pytorch:24.01-py3",\n}\n'
    r = fix_file(src, ".devcontainer.json")
    assert r.data == (
        b'{\n\t// ML dev box\n\t"image": "nvcr.io/nvidia/pytorch:24.01-py3",\n'
        b'\t"runArgs": ["--shm-size=1g"],\n}\n'
    )
    ipc = b'{"image": "pytorch/pytorch", "runArgs": ["--ipc=host"]}'
    assert check_loaded(load_bytes(ipc, "devcontainer.json")).findings == ()


def test_docker_compose_file_is_checked_as_compose(tmp_path: Path) -> None:
    cfg = FIXTURES / "postgres-pytorch" / "devcontainer.json"
    assert compose_paths(cfg.read_bytes(), str(cfg)) == [str(cfg.parent / "docker-compose.yml")]
    # named alone, the configuration brings its Compose file into the run
    w = walk([str(cfg)])
    assert w.files == [str(cfg), str(cfg.parent / "docker-compose.yml")]
    # line 19: its postgres service, at info (the database class, issue 22)
    assert _codes(cfg.parent / "docker-compose.yml") == [("SHM001", 4), ("SHM001", 19)]
    assert walk([str(FIXTURES / "postgres" / "devcontainer.json")]).files[1:] == [
        str(FIXTURES / "postgres" / "docker-compose.yml")
    ]
    # a walk finds .devcontainer/**/devcontainer.json, and reads them as configurations
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "nemo-unsized", repo / ".devcontainer" / "gpu")
    found = walk([str(repo)]).files
    assert found == [str(repo / ".devcontainer" / "gpu" / "devcontainer.json")]
    assert _codes(Path(found[0])) == [("SHM001", 16)]


def test_invalid_jsonc_is_one_diagnostic() -> None:
    lf = load_bytes(b'{\n  "image": "pytorch/pytorch"\n  "runArgs": []\n}\n', "devcontainer.json")
    assert lf.devcontainers == ()
    assert len(lf.diagnostics) == 1
    assert lf.diagnostics[0].kind.value == "invalid-json"


def test_run_args_are_read_when_the_image_cannot_be(tmp_path: Path) -> None:
    # Before: a Dockerfile not in the tree (or FROM ${VARIANT}) gave no run line at all, so
    # runArgs went unchecked: --shm-size beside --ipc=host, NCCL_* in -e.
    cfg = tmp_path / ".devcontainer" / "devcontainer.json"
    cfg.parent.mkdir()
    build = '"build": {"dockerfile": "Dockerfile"}'  # no Dockerfile beside it
    cfg.write_text(f'{{{build}, "runArgs": ["--gpus", "all", "--ipc=host", "--shm-size=8g"]}}')
    assert _codes(cfg) == [("SHM011", 1)]
    bad = f'{{\n  {build},\n  "runArgs": ["--gpus", "all", "-e", "NCCL_DEBUG=INFO"]\n}}\n'
    cfg.write_text(bad)
    assert _codes(cfg) == [("SHM001", 3)]
    r = fix_file(bad.encode(), str(cfg))
    assert (
        r.data == bad.replace('"NCCL_DEBUG=INFO"]', '"NCCL_DEBUG=INFO", "--shm-size=1g"]').encode()
    )
    assert fix_file(r.data, str(cfg)).applied == ()
    # a GPU alone is still no ML evidence, with or without the image (pytorch-cuda above)
    shutil.copy(FIXTURES / "pytorch-cuda" / "devcontainer.json", cfg)
    (dc,) = load_path(str(cfg)).devcontainers
    assert dc.run is not None and dc.run.image is None
    assert [(f.name, f.value) for f in dc.run.flags] == [("--gpus", "all")]
    assert _codes(cfg) == []
    # neither an image nor runArgs: nothing is run
    cfg.write_text(f"{{{build}}}")
    assert load_path(str(cfg)).devcontainers[0].run is None
