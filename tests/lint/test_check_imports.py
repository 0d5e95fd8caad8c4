"""``shmguard check`` on YAML files starts without the modules it does not need (start-up is
part of its throughput, benchmarks/check_throughput.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

COMPOSE = "services:\n  train:\n    image: pytorch/pytorch:2.3.0\n    shm_size: 2gb\n"


def test_check_of_yaml_imports_no_markdown_rich_or_torch(tmp_path: Path) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE)
    code = (
        "import sys\n"
        f"sys.argv = ['shmguard', 'check', '--fail-on', 'never', {str(f)!r}]\n"
        "from shmguard.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
        "heavy = {'markdown_it', 'rich', 'torch', 'numpy', 'matplotlib', 'psutil'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stderr.strip().splitlines()[-1] == "[]", out.stderr
    assert out.returncode == 0, out.stderr
