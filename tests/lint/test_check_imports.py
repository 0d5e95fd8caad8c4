"""``shmguard check`` on YAML files starts without the modules it does not need (start-up is
part of its throughput, and of every commit a pre-commit hook checks:
benchmarks/check_throughput.py measures it). Structural: which modules are loaded, not how
long they take."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

COMPOSE = "services:\n  train:\n    image: pytorch/pytorch:2.3.0\n    shm_size: 2gb\n"


def test_check_of_yaml_imports_no_markdown_rich_torch_tls_or_typer(tmp_path: Path) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE)
    code = (
        "import sys\n"
        f"sys.argv = ['shmguard', 'check', '--fail-on', 'never', {str(f)!r}]\n"
        "from shmguard.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
        "heavy = {'markdown_it', 'rich', 'torch', 'numpy', 'matplotlib', 'psutil', 'ssl',\n"
        "         'prometheus_client', 'http', 'typer', 'click', 'subprocess'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stderr.strip().splitlines()[-1] == "[]", out.stderr
    assert out.returncode == 0, out.stderr


def test_pre_commit_hooks_arguments_take_the_fast_path(tmp_path: Path) -> None:
    """The hook's own arguments (.pre-commit-hooks.yaml: ``--jobs 1 --force-exclude``) on two
    staged files, one with a finding: no Typer, no Rich, no http.server, no TLS."""
    ok = tmp_path / "compose.yaml"
    ok.write_text(COMPOSE)
    bad = tmp_path / "run.sh"
    bad.write_text("docker run --gpus all pytorch/pytorch:2.3.0 python train.py\n")
    code = (
        "import sys\n"
        f"sys.argv = ['shmguard', 'check', '--jobs', '1', '--force-exclude', {str(ok)!r}, "
        f"{str(bad)!r}]\n"
        "from shmguard.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    print('exit', e.code, file=sys.stderr)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'typer', 'click', 'rich',"
        " 'ssl', 'torch', 'prometheus_client'} or m == 'http.server'), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stderr.strip().splitlines()[-2:] == ["exit 1", "[]"], out.stderr
    assert "SHM001" in out.stdout
