"""README for a first-time user: its first two commands (what they install, checked by running
their shell logic with stand-in `python3` and `shmguard` programs: no network, nothing
installed), its length, its command tables against `shmguard --help`, and its links."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from cli_run import shmguard_out

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
GUARD = (
    "python3 -c 'import torch' 2>/dev/null || python3 -m pip install torch==2.13.0 "
    "--index-url https://download.pytorch.org/whl/cpu && "
)
CPU_INDEX = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
DEMO = GUARD + "python3 -m pip install -e '.[torch]' && shmguard demo"
TESTS = GUARD + "python3 -m pip install -e '.[torch,dev,plot]' && python3 -m pytest -q"
MAX_WORDS = 1200
MAX_CELL_WORDS = 15
FAKE = """#!/bin/sh
echo "$(basename "$0") $*" >> "$LOG"
if [ "$1" = "-c" ] && [ -n "$NO_TORCH" ]; then exit 1; fi
exit 0
"""


def commands() -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", README, re.S)


def one_line(command: str) -> str:
    """The command as one line: README breaks it after `||` and `&&`, where sh continues."""
    return " ".join(command.split())


def table_rows() -> list[list[str]]:
    """Every row of every Markdown table in README, as its cells (`\\|` stays in a cell)."""
    rows = []
    for line in README.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            rows.append([c.strip() for c in cells])
    return rows


def help_groups() -> dict[str, list[str]]:
    """`shmguard --help`'s groups (``find: doctor, explain.``), read from a real run of it."""
    out = shmguard_out("--help", columns=400)
    text = " ".join(out.split("Options:")[0].split())  # the groups precede the options
    groups = dict(re.findall(r"\b([a-z]+): ([a-z, ]+)\.", text))
    listed = re.findall(r"^  ([a-z]+)  ", out.split("Commands:")[1], re.M)
    assert groups and sorted(c for g in groups.values() for c in g.split(", ")) == sorted(listed)
    return {name: members.split(", ") for name, members in groups.items()}


def test_readme_starts_with_the_two_commands() -> None:
    starts = [m.start() for m in re.finditer("```", README)]
    assert len(starts) >= 4 and starts[3] < README.index("\n## ")  # both before any section
    demo, tests = commands()[:2]
    assert one_line(demo) == DEMO
    assert one_line(tests) == TESTS
    # every line but the last ends where sh reads on: pasting it runs one command, not three
    for command in (demo, tests):
        assert all(line.endswith(("||", "&&")) for line in command.splitlines()[:-1])
    # torch==2.13.0 is the CPU build only from PyTorch's CPU index (on PyPI it is CUDA)
    assert "that is the CPU wheel" not in README


def test_readme_first_screen_says_what_it_does_and_answers() -> None:
    first_screen = README[: README.index("```")]
    assert first_screen.startswith("# shmguard\n\nshmguard finds, measures and fixes")
    for message in (
        "DataLoader worker (pid N) is killed by signal: Bus error",
        "unable to allocate shared memory(shm)",
        "hangs forever",
    ):
        assert message in first_screen


@pytest.mark.parametrize("has_torch", [True, False])
def test_the_commands_keep_an_installed_torch_or_install_the_cpu_wheel(
    tmp_path: Path, has_torch: bool
) -> None:
    for name in ("python3", "shmguard"):
        fake = tmp_path / name
        fake.write_text(FAKE)
        fake.chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "LOG": str(log)}
    if not has_torch:
        env["NO_TORCH"] = "1"
    for command in commands()[:2]:
        log.write_text("")
        done = subprocess.run(["sh", "-c", command], env=env, timeout=30, check=False)
        assert done.returncode == 0
        calls = log.read_text().splitlines()
        assert calls[0] == "python3 -c import torch"
        installs_torch = [c for c in calls if "install torch" in c]
        if has_torch:
            assert installs_torch == []  # the torch already there is used
        else:
            assert installs_torch == [f"python3 -m {CPU_INDEX}"]
        assert calls[-1] in ("shmguard demo", "python3 -m pytest -q")


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\"$PY\" -m pip install -q -e '.[torch,dev,plot]'" in ci
    assert '"$PY" -m pytest -q' in ci
    assert TESTS.endswith("python3 -m pytest -q")  # the same command, with the venv's python
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


def test_readme_is_short() -> None:
    assert len(README.split()) <= MAX_WORDS  # as `wc -w README.md` counts


def test_table_cells_are_short() -> None:
    rows = table_rows()
    assert len(rows) > 17
    longest = max((cell for row in rows for cell in row), key=lambda c: len(c.split()))
    assert len(longest.split()) <= MAX_CELL_WORDS, longest


def test_the_command_tables_follow_the_help_groups() -> None:
    """Every command `shmguard --help` lists is in a table, under the heading of its group."""
    sections = dict(re.findall(r"^### (\w+)\n(.*?)(?=^#|\Z)", README, re.S | re.M))
    for group, members in help_groups().items():
        section = sections.get(group.capitalize())
        assert section is not None, f"no '### {group.capitalize()}' section"
        named = set(re.findall(r"^\| \[?`shmguard ([a-z]+)", section, re.M))
        assert named == set(members), group


def test_relative_links_resolve() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    relative = [link for link in links if not re.match(r"[a-z]+:|#", link)]
    assert relative
    for link in relative:
        path, _, anchor = link.partition("#")
        assert (ROOT / path).exists(), link
        if anchor:  # a heading of that page, as GitHub (and mkdocs' toc) make its id
            headings = re.findall(r"^#+ (.*)$", (ROOT / path).read_text(), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
            assert anchor in slugs, link
