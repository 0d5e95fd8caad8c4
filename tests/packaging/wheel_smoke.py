"""Smoke-test shmguard as shipped: build the sdist and wheel, install the wheel into a fresh
virtual environment (not editable, run from a temporary directory so no source tree is on the
path) and run every command's --help, doctor --json, check on a fixture, explain on a bundled
sample, rules, and plan --format json validated against the plan schema the wheel ships.

    python tests/packaging/wheel_smoke.py            # deps from the package index
    python tests/packaging/wheel_smoke.py --offline  # deps from this interpreter's site-packages

--offline builds with --no-build-isolation and installs the wheel with --no-deps; the fresh venv
sees this interpreter's site-packages through a plain path in a .pth file, whose own .pth files
(an editable shmguard's finder) are not processed, so only the wheel's shmguard can be imported.
Exit status 0 when every step passes; 1 with the failing step named otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import site as site_mod
import subprocess
import sys
import sysconfig
import tempfile
import venv
from pathlib import Path

import jsonschema
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "shell" / "openrlhf__docker_run-unsized.sh"


class SmokeError(Exception):
    pass


def _run(cmd: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    if proc.returncode not in ok:
        raise SmokeError(
            f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    if "Traceback (most recent call last)" in proc.stderr:
        raise SmokeError(f"{' '.join(cmd)}: traceback\n{proc.stderr[-3000:]}")
    return proc.stdout


def _json(cmd: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> object:
    out = _run(cmd, cwd, ok)
    try:
        return json.loads(out)
    except json.JSONDecodeError as exc:
        raise SmokeError(f"{' '.join(cmd)}: not JSON ({exc}): {out[:300]!r}") from None


def _copy_tree(dest: Path) -> Path:
    """The checkout's files (tracked and untracked-not-ignored) copied to dest: a build there
    cannot pick up a stale egg-info or build/ directory of the checkout (one listing a removed
    package-data file would hide the removal)."""
    listed = _run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT)
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def build(dist: Path, offline: bool) -> tuple[Path, Path]:
    """The sdist and wheel of the checkout, built into dist from a clean copy."""
    tree = _copy_tree(dist.parent / "src-copy")
    iso = ["--no-isolation"] if offline else []
    try:
        import build  # noqa: F401
    except ImportError:
        build_cmd = None
    else:
        build_cmd = [sys.executable, "-m", "build", *iso, "--outdir", str(dist), str(tree)]
    if build_cmd is not None:
        _run(build_cmd, cwd=dist)
    else:
        # No `build` frontend: setuptools' own sdist, then pip's wheel from that sdist (so the
        # wheel is made from what the sdist ships, as `python -m build` does).
        _run(
            [
                sys.executable,
                "-c",
                "from setuptools import setup; setup()",
                "-q",
                "sdist",
                "--dist-dir",
                str(dist),
            ],
            cwd=tree,
        )
        sdist = next(dist.glob("shmguard-*.tar.gz"))
        nobi = ["--no-build-isolation"] if offline else []
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                *nobi,
                "-w",
                str(dist),
                str(sdist),
            ],
            cwd=dist,
        )
    sdists, wheels = list(dist.glob("shmguard-*.tar.gz")), list(dist.glob("shmguard-*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        raise SmokeError(f"expected one sdist and one wheel in {dist}, got {sdists + wheels}")
    return sdists[0], wheels[0]


def install(wheel: Path, env_dir: Path, offline: bool) -> Path:
    """A fresh venv with the wheel installed; returns its python."""
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    if offline:
        site = Path(
            _run(
                [str(py), "-c", "import sysconfig;print(sysconfig.get_paths()['purelib'])"],
                cwd=env_dir,
            ).strip()
        )
        outer = [sysconfig.get_paths()["purelib"], *site_mod.getsitepackages()]
        (site / "_shmguard_smoke_deps.pth").write_text("\n".join(dict.fromkeys(outer)) + "\n")
        _run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], cwd=env_dir)
    else:
        _run([str(py), "-m", "pip", "install", "-q", str(wheel)], cwd=env_dir)
    return py


def smoke(py: Path, work: Path) -> list[str]:
    """Run the commands from work (outside the source tree); returns the steps passed."""
    steps: list[str] = []
    where = _run(
        [str(py), "-c", "import shmguard,pathlib;print(pathlib.Path(shmguard.__file__).parent)"],
        cwd=work,
    ).strip()
    pkg = Path(where)
    if ROOT in pkg.parents or not str(pkg).startswith(str(py.parents[1])):
        raise SmokeError(f"shmguard imported from {pkg}, not from the wheel's venv")
    steps.append(f"import from {pkg}")
    cli = [str(py), "-m", "shmguard"]
    top = _run([*cli, "--help"], cwd=work)
    commands = [
        line.split()[0]
        for line in top.split("Commands:", 1)[1].splitlines()
        if line.startswith("  ") and line.split()
    ]
    if len(commands) < 10:
        raise SmokeError(f"--help lists only {commands}")
    for name in commands:
        _run([*cli, name, "--help"], cwd=work)
    steps.append(f"--help of {len(commands)} commands")
    # doctor exits 1 when it finds a problem on this host; either way the JSON must parse.
    _json([*cli, "doctor", "--json"], cwd=work, ok=(0, 1))
    steps.append("doctor --json")
    fixture = work / FIXTURE.name
    fixture.write_bytes(FIXTURE.read_bytes())
    report = _json([*cli, "check", "--format", "json", str(fixture)], cwd=work, ok=(1,))
    if not isinstance(report, dict) or not report.get("files"):
        raise SmokeError("check found nothing in the unsized fixture")
    steps.append("check (finding in fixture)")
    samples = sorted((pkg / "triage" / "signatures" / "samples").glob("*.pos.log"))
    if not samples:
        raise SmokeError("the wheel ships no explain samples")
    _json([*cli, "explain", "--json", str(samples[0])], cwd=work, ok=(0, 1))
    steps.append(f"explain {samples[0].name}")
    if "SHM" not in _run([*cli, "rules"], cwd=work):
        raise SmokeError("rules lists no SHM rule")
    steps.append("rules")
    plan = _json(
        [
            *cli,
            "plan",
            "--batch-size",
            "32",
            "--sample-shape",
            "3,224,224",
            "--num-workers",
            "4",
            "--format",
            "json",
        ],
        cwd=work,
    )
    schemas = pkg / "schemas"
    if not (schemas / "plan.schema.json").is_file():
        raise SmokeError(f"the wheel ships no {schemas / 'plan.schema.json'}")
    store = {}
    for path in schemas.glob("*.json"):
        doc = json.loads(path.read_text())
        store[doc.get("$id", path.name)] = doc
    schema = store.get("plan.schema.json") or json.loads((schemas / "plan.schema.json").read_text())
    registry_validator = jsonschema.validators.validator_for(schema)
    registry = Registry().with_resources(
        (uri, Resource.from_contents(doc)) for uri, doc in store.items()
    )
    try:
        registry_validator(schema, registry=registry).validate(plan)
    except jsonschema.ValidationError as exc:
        msg = f"plan --format json does not match plan.schema.json: {exc.message}"
        raise SmokeError(msg) from None
    steps.append("plan --format json valid against the shipped schema")
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="no package index")
    parser.add_argument("--wheel", type=Path, help="test this wheel instead of building one")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="shmguard-wheel-") as tmp:
        base = Path(tmp)
        (base / "dist").mkdir()
        (base / "work").mkdir()
        try:
            if args.wheel:
                wheel = args.wheel.resolve()
            else:
                sdist, wheel = build(base / "dist", args.offline)
                print(f"built {sdist.name} and {wheel.name}")
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)
            os.environ.clear()
            os.environ.update(env)
            py = install(wheel, base / "venv", args.offline)
            for step in smoke(py, base / "work"):
                print(f"ok: {step}")
        except SmokeError as exc:
            print(f"wheel smoke failed: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
