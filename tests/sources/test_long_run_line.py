"""A long ``docker run`` line is held compactly (issue 24 item 3(d)): words as spans of the
text, flags as ints, both built when read. The time and the RSS of the 7 MB line are measured
by ``benchmarks/hostile_inputs.py --only long-runline``; these tests pin the memory bound
(tracemalloc, proportional to the line) and what the compact stores give back."""

from __future__ import annotations

import tracemalloc

from shmguard.lint.check import check_loaded
from shmguard.lint.config._base import CheckOptions
from shmguard.sources.load import load_bytes
from shmguard.sources.runflags import Flag
from shmguard.sources.shell import Word, Words, split_commands
from shmguard.sources.shellvars import ShellVars
from shmguard.sources.text import SourceText
from shmguard.sources.textsources import shell_run_lines


def _long_line(flags: int) -> bytes:
    """benchmarks/hostile_inputs.py's ``long_run_line`` shape: ``-e Vi=x`` flags."""
    body = " ".join(f"-e V{i}=x" for i in range(flags))
    return f"#!/bin/sh\ndocker run {body} pytorch/pytorch:2.3.0 python train.py\n".encode()


def test_long_run_line_memory_is_a_few_bytes_per_byte() -> None:
    data = _long_line(25_000)  # 0.25 MB, 50k words
    check_loaded(load_bytes(_long_line(1), "warm.sh"), CheckOptions())  # imports, caches
    tracemalloc.start()
    try:
        result = check_loaded(load_bytes(data, "long.sh"), CheckOptions())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [f.code for f in result.findings] == ["SHM001"]
    # About 6 bytes a byte of line here (the text, its copy in the run line, the spans);
    # one object per word or flag, as before, was 58.
    assert peak < 16 * len(data), f"peak {peak:,} bytes for a {len(data):,}-byte line"


def _run(text: str) -> tuple[Words, list[Words]]:
    cmds = split_commands(text)
    return cmds[-1], cmds


def test_plain_words_are_spans_only() -> None:
    text = "docker run -e V0=x 'a b' --shm-size=1g img\n"
    words, _ = _run(text)
    assert isinstance(words, Words) and len(words) == 7
    # only the quoted word differs from its text (its value is kept, not a Word): the
    # others are two ints each
    assert [words.plain(k) for k in range(len(words))] == [
        True, True, True, True, False, True, True,
    ]  # fmt: skip
    assert words.whole(4) is None and words.value(4) == "a b" and words.raw(4) == "'a b'"
    assert words[4] == Word("a b", 19, 24, "'a b'")
    assert words[-1] == Word("img", 39, 42, "img") == words[6]
    assert words[1:3] == [Word("run", 7, 10, "run"), Word("-e", 11, 13, "-e")]
    assert words == list(words) and [w.value for w in words][:2] == ["docker", "run"]


def test_expand_keeps_words_without_expansions() -> None:
    words, _ = _run("docker run -e A=1 img\n")
    assert ShellVars().expand(words) is words
    env = ShellVars()
    text = 'X="--ipc host"\ndocker run $X -e A=1 img\n'
    _, cmds = _run(text)
    assert env.assign(text, cmds[0])
    out = env.expand(cmds[1])
    assert [w.value for w in out] == ["docker", "run", "--ipc", "host", "-e", "A=1", "img"]
    assert out.plain(4) and not out.plain(2)  # -e copied as a span; --ipc is not its text
    assert out[2] == Word("--ipc", 26, 28, "$X") and out[3] == Word("host", 26, 28, "$X")


def test_flags_are_built_on_demand_and_compare_as_before() -> None:
    text = "docker run -itd -m2g -e=A=1 --env B=2 --shm-size=1g --rm img python x.py\n"
    src = SourceText.decode(text.encode(), "f.sh")
    assert isinstance(src, SourceText)
    (rl,) = shell_run_lines(src)
    flags = list(rl.flags)
    assert [f.name for f in flags] == [
        "--interactive", "--tty", "--detach", "--memory", "--env", "--env", "--shm-size", "--rm",
    ]  # fmt: skip
    assert flags[3] == Flag("--memory", "-m2g", "2g", 16, 20, 18, 20)
    assert flags[4] == Flag("--env", "-e=A=1", "A=1", 21, 27, 24, 27)
    assert flags[5] == Flag("--env", "--env", "B=2", 28, 33, 34, 37)
    assert flags[6] == Flag("--shm-size", "--shm-size", "1g", 38, 51, 49, 51)
    assert rl.flags == tuple(flags) and hash(rl.flags) == hash(tuple(flags))
    assert list(rl.get("--env")) == flags[4:6] and rl.last("--env") == flags[5]
    assert list(rl.flags.named("--rm", "--memory")) == [flags[3], flags[7]]
    assert not rl.get("--ipc") and rl.last("--ipc") is None
    assert rl.flags[-1] == flags[7] and rl.flags[1:3] == flags[1:3]
    assert list(rl.command) == [("python", 61, 67), ("x.py", 68, 72)]
    assert rl.command[-1] == ("x.py", 68, 72) and rl.image == ("img", 57, 60)
