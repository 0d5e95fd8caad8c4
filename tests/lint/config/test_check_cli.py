"""`shmguard check`, `rules` and `rule` end to end (in process): text, JSON against the packaged
schema, exit codes, selection, bad input, --fix / --diff on copies of the fixtures."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from schema_registry import validator
from shmguard.cli import app

FIXTURES = Path(__file__).parent / "fixtures"
SCHEMA = validator("check")


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), input=stdin)
    return r.exit_code, r.stdout, r.stderr


def test_text_output_lines_and_default_fail_on_warning() -> None:
    code, out, _ = run("check", str(FIXTURES / "run_lines.sh"))
    lines = out.splitlines()
    assert lines[0] == (
        f"{FIXTURES / 'run_lines.sh'}:2:1: SHM001 [warning] docker run of an ML workload (image "
        "pytorch/pytorch:2.3.0 (pytorch)) without --shm-size or --ipc=host: /dev/shm is the "
        "default 64 MiB"
    )
    assert lines[1] == "  fix (safe): Add --shm-size=1g"
    assert lines[-1] == "7 findings (3 errors, 4 warnings, 0 info) in 1 file"
    assert code == 1
    # only warnings selected, threshold error: exit 0
    code, _, _ = run("check", "--select", "SHM001,SHM012", "--fail-on", "error", str(FIXTURES))
    assert code == 0
    code, out, _ = run("check", str(FIXTURES / "pod_good.yaml"))
    assert code == 0 and out.strip() == "0 findings (0 errors, 0 warnings, 0 info) in 1 file"


def test_json_validates_and_counts() -> None:
    code, out, _ = run("check", "--json", "--ignore", "SHM023", str(FIXTURES))
    doc = json.loads(out)
    SCHEMA.validate(doc)
    assert doc["schema"] == "shmguard.check/1" and code == 1
    codes = [f["code"] for file in doc["files"] for f in file["findings"]]
    # compose_bad's train has its size only under build: SHM019, not SHM001
    assert "SHM023" not in codes and codes.count("SHM001") == 1 and "SHM007" in codes
    s = doc["summary"]
    assert (s["error"], s["warning"], s["files"], s["exit_status"]) == (9, 9, 4, 1)
    first = doc["files"][0]["findings"][0]
    assert first["code"] == "SHM019"
    assert first["location"]["path"] == "services.train.build.shm_size"
    assert first["fix"]["applicability"] == "safe"
    assert first["fix"]["edits"] == [{"start": 49, "end": 49, "content": '    shm_size: "8g"\n'}]


def test_bad_input_is_one_line_per_file_and_others_are_checked(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("services:\n  a: [unclosed\n")
    (tmp_path / "b.bin").write_bytes(b"\x00\x01docker run")
    (tmp_path / "chart.yaml").write_text("spec:\n  x: {{ .Values.shm }}\n")
    shutil.copy(FIXTURES / "run_lines.sh", tmp_path / "z.sh")
    code, out, err = run("check", str(tmp_path))
    errs = err.splitlines()
    assert errs[0].startswith(f"shmguard: error: {tmp_path / 'a.yaml'}:3:1: invalid-yaml:")
    # binary in a walk: skipped and counted, no error (issue 21)
    assert errs[1].startswith(f"shmguard: {tmp_path / 'chart.yaml'}:2:6: info: unrendered-template")
    assert len(errs) == 2
    assert "z.sh:2:1: SHM001" in out  # the other files were still checked
    assert out.splitlines()[-1].endswith(
        "in 2 files; 1 file with errors (on stderr); 1 file skipped: binary 1"
    )
    assert code == 2  # a.yaml
    # named on the command line, the binary file is an error
    code, _, err = run("check", str(tmp_path / "b.bin"))
    assert err.splitlines() == [
        f"shmguard: error: {tmp_path / 'b.bin'}: binary: binary file (contains NUL bytes); not read"
    ]
    assert code == 2


def test_stdin_and_usage_errors() -> None:
    text = (FIXTURES / "pod_bad.yaml").read_text()
    code, out, _ = run("check", "--select", "SHM006", "-", stdin=text)
    assert out.splitlines()[0].startswith("-:21:34: SHM006 [error]") and code == 1
    code, _, err = run("check", "--select", "SHM999", "-", stdin=text)
    assert code == 2 and "SHM999: no such rule" in err
    code, _, err = run("check", "--fix", "-", stdin=text)
    assert code == 2 and "--fix cannot write to standard input" in err


def test_config_file_is_honoured(tmp_path: Path) -> None:
    conf = tmp_path / ".shmguard.toml"
    conf.write_text('ignore = ["SHM0"]\n[severity]\nSHM001 = "error"\n')
    code, out, _ = run("check", "--config", str(conf), str(FIXTURES / "run_lines.sh"))
    assert code == 0 and out.startswith("0 findings")
    conf.write_text('[severity.ml]\nSHM001 = "info"\n')
    code, out, _ = run(
        "check", "--config", str(conf), "--select", "SHM001", str(FIXTURES / "run_lines.sh")
    )
    assert "SHM001 [info]" in out and code == 0


def test_fix_changes_only_the_edits_and_twice_is_a_no_op(tmp_path: Path) -> None:
    target = tmp_path / "compose.yaml"
    original = (FIXTURES / "compose_bad.yaml").read_bytes().replace(b"\n", b"\r\n")
    target.write_bytes(original)
    os.chmod(target, 0o640)
    code, out, _ = run("check", "--fix", str(target))
    fixed = target.read_bytes()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    # byte for byte: the original up to the service's first key, the inserted line (with the
    # file's CRLF), the original up to the value inside the quotes of "2Gi", 2g, the donor's
    # ipc: shareable (SHM013), the rest
    line = b'    shm_size: "8g"\r\n'
    at, value_at = original.index(b"    image"), original.index(b"2Gi")
    serve_at = original.index(b"  serve:\r\n") + len(b"  serve:\r\n")
    assert fixed == (
        original[:at]
        + line
        + original[at:serve_at]
        + b"    ipc: shareable\r\n"
        + original[serve_at:value_at]
        + b"2g"
        + original[value_at + 3 :]
    )
    assert fixed == original.replace(b'"2Gi"', b'"2g"').replace(
        b"  train:\r\n", b'  train:\r\n    shm_size: "8g"\r\n'
    ).replace(b"  serve:\r\n", b"  serve:\r\n    ipc: shareable\r\n")
    lines = out.splitlines()
    # what was fixed, one line each, at its place in the file before the fix
    assert lines[:3] == [
        f'fixed: {target}:8:17: SHM019 (Add shm_size: "8g" to the service)',
        f"fixed: {target}:11:15: SHM002 (Write 2g)",
        f"fixed: {target}:22:10: SHM013 (Set ipc: shareable on 'serve')",
    ]
    assert lines[-1] == "3 findings (0 errors, 3 warnings, 0 info) in 1 file; 3 fixed"
    remaining = [line.split(": ")[1].split()[0] for line in lines[3:-1] if ": SHM" in line]
    assert remaining == ["SHM012", "SHM023", "SHM011"] and code == 1
    code, out, _ = run("check", "--fix", str(target))
    assert target.read_bytes() == fixed and "fixed" not in out.splitlines()[-1]
    # --unsafe-fixes: what is left (SHM011, SHM012, SHM023) has no fix to apply
    run("check", "--fix", "--unsafe-fixes", str(target))
    assert target.read_bytes() == fixed


def test_fix_run_lines_and_kubernetes_values(tmp_path: Path) -> None:
    for name in ("run_lines.sh", "pod_bad.yaml"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    _, out, _ = run("check", "--fix", str(tmp_path))
    sh = (tmp_path / "run_lines.sh").read_text().splitlines()
    assert sh[1] == "docker run --shm-size=1g --gpus all pytorch/pytorch:2.3.0 python train.py"
    assert sh[4] == "docker run --shm-size=2g -m 8g nginx"
    pod = (tmp_path / "pod_bad.yaml").read_text()
    old = (FIXTURES / "pod_bad.yaml").read_text()
    plain = "        - name: plain\n          image: vllm/vllm-openai:v0.6.0\n"
    # SHM001: the container 'plain' mounts the pod's existing dshm (reused, not duplicated)
    mount = "          volumeMounts:\n            - name: dshm\n              mountPath: /dev/shm\n"
    assert pod == old.replace("memory: 512m,", "memory: 512Mi,").replace(
        "{medium: memory, sizeLimit: 2g}", "{medium: Memory, sizeLimit: 2Gi}"
    ).replace(plain, plain + mount)
    assert "7 fixed" in out.splitlines()[-1]


def test_diff_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    shutil.copy(FIXTURES / "run_lines.sh", target)
    before = target.read_bytes()
    _, out, _ = run("check", "--diff", "--select", "SHM001", str(target))
    assert target.read_bytes() == before
    assert f"--- a/{target}" in out
    assert "-docker run --gpus all pytorch/pytorch:2.3.0 python train.py" in out
    assert "+docker run --shm-size=1g --gpus all pytorch/pytorch:2.3.0 python train.py" in out
    # nothing written: the summary says fixable, and no "fixed:" lines
    assert (
        out.splitlines()[-1]
        == "1 finding (0 errors, 1 warning, 0 info) in 1 file; 1 fixable (not written: --diff)"
    )
    assert "fixed:" not in out


def test_rules_and_rule() -> None:
    code, out, _ = run("rules")
    codes = [line.split()[0] for line in out.splitlines()]
    assert code == 0 and codes[0] == "ENV001" and "SHM001" in codes and "SHM025" in codes
    code, out, _ = run("rule", "shm004")
    assert code == 0 and out.startswith("## SHM004 `milli-memory-quantity`")
    assert "### Fix safety" in out
    code, _, err = run("rule", "SHM999")
    assert code == 2 and "SHM999: no such rule" in err


def _prose(doc: str) -> list[str]:
    """The lines of a rule's documentation outside its code blocks."""
    out, fenced = [], False
    for line in doc.splitlines():
        fenced ^= line.startswith("```")
        if not fenced and not line.startswith("```"):
            out.append(line)
    return out


def test_each_rule_names_its_own_sources_wrapped() -> None:
    # Every `shmguard rule X` printed the same ~900-character unwrapped Sources paragraph.
    _, out, _ = run("rules")
    seen = {}
    for code in [line.split()[0] for line in out.splitlines()]:
        _, doc, _ = run("rule", code)
        long = [line for line in _prose(doc) if len(line) > 100]
        assert long == [], (code, long)
        text = " ".join(_prose(doc))
        if code.startswith("SHM"):
            seen[code] = re.split(r"\.(?:\s|$)", text[text.index("Sources: ") :])[0]
    assert seen["SHM003"].startswith("Sources: Kubernetes (")  # a Kubernetes-only rule
    assert "Docker" not in seen["SHM003"] and "Compose" not in seen["SHM003"]
    assert "Kubernetes" not in seen["SHM014"] and "compose-spec" in seen["SHM014"]
    assert "Podman 4.3" in seen["SHM023"] and "resource.Quantity" in seen["SHM023"]
    assert len(seen["SHM003"]) < 300 and len(set(seen.values())) > 5


def test_a_display_only_fix_is_a_fix_in_rule_rules_json_and_check() -> None:
    # `rules --json` said "fix": "none" for SHM023 while check prints its fix (display-only)
    code, out, _ = run("check", "--select", "SHM023", str(FIXTURES / "pod_bad.yaml"))
    assert code == 1 and "SHM023 [warning]" in out
    assert "  fix (display-only): Mount a memory-backed emptyDir at /dev/shm instead" in out
    _, out, _ = run("rule", "SHM023")
    assert "Fix: display-only." in out.splitlines()[2]
    _, out, _ = run("rules", "--json")
    (shm023,) = [r for r in json.loads(out)["rules"] if r["code"] == "SHM023"]
    assert shm023["fix"] == "always"


def test_unknown_codes_and_prefixes_exit_2_with_one_line(tmp_path: Path) -> None:
    target = str(FIXTURES / "run_lines.sh")
    syntax = "is not a rule code or prefix: rules are ENV, SHM and USR followed by 3 digits "
    from shmguard.lint.config import RULES

    have = f"(check has SHM001-{RULES[-1].code}: shmguard rules lists them)"
    cases = {
        ("--select", "FOO"): f"--select: 'FOO' {syntax}(ENV001, SHM0, ENV)",
        ("--ignore", "XYZ"): f"--ignore: 'XYZ' {syntax}(ENV001, SHM0, ENV)",
        ("--select", "SHM0,foo"): f"--select: 'FOO' {syntax}(ENV001, SHM0, ENV)",
        ("--ignore", "shm999"): f"--ignore: SHM999: no such rule {have}",
        # doctor's codes name no rule check runs: --select ENV would silently report nothing
        ("--select", "ENV"): f"--select: ENV: no such rule {have}",
    }
    for args, message in cases.items():
        code, out, err = run("check", *args, target)
        assert (code, out, err) == (2, "", f"shmguard: error: {message}\n"), args
    code, _, _ = run("check", "--select", "SHM01", target)  # a prefix of SHM011, SHM012
    assert code == 1
    conf = tmp_path / ".shmguard.toml"
    conf.write_text('ignore = ["SHM999"]\n')
    code, out, err = run("check", "--config", str(conf), target)
    assert (code, err) == (2, f"shmguard: error: {conf}: SHM999: no such rule {have}\n")
    conf.write_text('select = ["FOO"]\n')
    code, out, err = run("check", "--config", str(conf), target)
    message = f"{conf}: select: 'FOO' {syntax}(ENV001, SHM0, ENV)"
    assert (code, err) == (2, f"shmguard: error: {message}\n")
    # the file is shared with doctor: its ENV codes are doctor's business
    conf.write_text('ignore = ["ENV004"]\n')
    code, _, _ = run("check", "--config", str(conf), target)
    assert code == 1


def test_usage_line_metavars() -> None:
    _, out, _ = run("check", "--help")
    assert out.splitlines()[0] == "Usage: shmguard check [OPTIONS] [PATH...]"  # or --cluster
    _, out, _ = run("rule", "--help")
    assert out.splitlines()[0] == "Usage: shmguard rule [OPTIONS] CODE"


def test_baseline_file_in_a_walked_directory_is_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(FIXTURES / "run_lines.sh", "run.sh")
    code, out, _ = run("check", "--create-baseline", "b.json", ".")
    assert out == "0 findings (0 errors, 0 warnings, 0 info) in 1 file; 7 in the baseline\n"
    code, out, _ = run("check", "--baseline", "b.json", ".")
    assert code == 0
    assert out == "0 findings (0 errors, 0 warnings, 0 info) in 1 file; 7 in the baseline\n"
    # named as a path, it is read like any file (JSON is no config: nothing found in it)
    _, out, _ = run("check", "--baseline", "b.json", "b.json", "run.sh")
    assert out.endswith("in 2 files; 7 in the baseline\n")


def test_shm009_message_names_the_container_plainly() -> None:
    _, out, _ = run("check", "--select", "SHM009", str(FIXTURES / "pod_bad.yaml"))
    assert out.splitlines()[0] == (
        f"{FIXTURES / 'pod_bad.yaml'}:47:24: SHM009 [warning] volume 'dshm': sizeLimit 16Gi "
        "(16 GiB) is above the memory limit of container 'vllm' (4 GiB): shm pages are charged "
        "to that limit, so the container is OOM-killed first"
    )
