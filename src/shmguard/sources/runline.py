"""``docker run`` / ``podman run`` command lines: each flag with its value and byte spans.

From the words of a simple command (:mod:`~shmguard.sources.shell`), a run line is
``[sudo|env|exec|time ...] (docker|podman|nvidia-docker) [global options] [container] run
[flags] IMAGE [COMMAND...]``. Flags are read as the Docker CLI (cobra/pflag) reads them:
``--flag=value``, ``--flag value``, ``-m2g``, ``-m 2g`` and clusters ``-itd``; every long flag
not in :data:`BOOL_FLAGS` takes a value (docker/cli ``cli/command/container/opts.go`` and
``run.go``; podman ``cmd/podman/common/create.go``). Short flags are mapped to their long names
(``-m`` -> ``--memory``, ``-e`` -> ``--env``, ``-v`` -> ``--volume``).

Each :class:`~shmguard.sources.runflags.Flag` records the byte span of the flag token and of the
value in the file, so a fixer can replace a value (``--shm-size=64m`` -> ``--shm-size=2g``) or
insert a flag. A line's flags and command are built from its words when read
(:mod:`~shmguard.sources.runflags`: a 7 MB line holds 1.56M words).

Words after the image are the container's command and its arguments, never run flags:
both CLIs stop reading flags at the first positional word (docker/cli
``cli/command/container/run.go`` and podman ``cmd/podman/containers/run.go`` both call
``flags.SetInterspersed(false)``), so ``docker run IMAGE --shm-size=1g python x.py`` passes
``--shm-size=1g`` to the container and /dev/shm keeps the default.

Words come expanded with the file's own assignments
(:class:`~shmguard.sources.shellvars.ShellVars`). A *bare* unresolved expansion among the
flags (``$EXTRA_MOUNTS``, ``${ARGS[@]}``, ``${gpus:+--gpus $gpus}``) may stand for any number
of flags: it is read as options (:attr:`RunLine.opaque`) unless it names an image
(``$IMAGE``, ``${DOCKER_IMAGE}``, ``$IMG_NAME``) or nothing says it is options and the next
word is neither a flag nor another such expansion (then it is the image, as before).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shmguard.sources.runflags import NEXT_WORD, NO_VALUE, Command, Flag, Flags, Named
from shmguard.sources.shell import Word, Words

TOOLS = ("docker", "podman", "nvidia-docker")
#: Boolean long flags of ``docker run`` and ``podman run``; any other long flag takes a value.
BOOL_FLAGS = frozenset(
    [
        "--detach",
        "--interactive",
        "--tty",
        "--rm",
        "--privileged",
        "--init",
        "--read-only",
        "--publish-all",
        "--no-healthcheck",
        "--oom-kill-disable",
        "--disable-content-trust",
        "--help",
        "--quiet",
        "--replace",
        "--env-host",
        "--rootfs",
        "--no-hosts",
        "--rmi",
        "--passwd",
        "--read-only-tmpfs",
        "--http-proxy",
        "--sig-proxy",
        "--use-api-socket",
        "--tls",
        "--tlsverify",
        "--debug",
    ]
)
#: Short flags -> long names (docker run; podman adds none that matter here).
SHORT = {
    "d": "--detach",
    "i": "--interactive",
    "t": "--tty",
    "P": "--publish-all",
    "q": "--quiet",
    "a": "--attach",
    "c": "--cpu-shares",
    "e": "--env",
    "h": "--hostname",
    "l": "--label",
    "m": "--memory",
    "p": "--publish",
    "u": "--user",
    "v": "--volume",
    "w": "--workdir",
}
_GLOBAL_VALUE = frozenset({"-H", "--host", "-c", "--context", "--config", "-l", "--log-level"})
#: Variable names that say an unresolved expansion holds the image, or options.
_IMAGE_NAME = re.compile(r"IMAGE|IMG", re.I)
_OPTIONS_NAME = re.compile(
    r"OPT|ARG|FLAG|PARAM|MOUNT|VOL|ENV|GPU|DEVICE|EXTRA|RUN|DOCKER|PODMAN|NET|PORT|[@*]", re.I
)
_PREFIX = frozenset(
    {"sudo", "exec", "time", "env", "nohup", "command", "-E", "$", "%", "!"}
    | {"if", "then", "else", "elif", "do", "while", "until", "{"}
)


@dataclass(frozen=True)
class RunLine:
    """A ``docker|podman run`` command found in a file.

    Attributes:
        file: the path; tool: ``docker``, ``podman`` or ``nvidia-docker``.
        line, column: 1-based position of the tool word; start, end: byte span of the command.
        flags: in order (:class:`Flags`: built on demand from the words); image: the image
        word's value and byte span (None when missing); command: the words after the image
        (value, start, end; :class:`Command`, built on demand).
        text: the command's source text.
        opaque: the unresolved expansions read as options, as written without outer quotes
            (``$EXTRA_MOUNTS``, ``${ARGS[@]}``): they could carry any flag.
    """

    file: str
    tool: str
    line: int
    column: int
    start: int
    end: int
    flags: Flags
    image: tuple[str, int, int] | None
    command: Command
    text: str
    opaque: tuple[str, ...] = ()

    def get(self, name: str) -> Named:
        """The flags with long name ``name`` (``--shm-size``), in order."""
        return self.flags.named(name)

    def last(self, name: str) -> Flag | None:
        """The last ``name`` flag: the one that takes effect for single-valued options."""
        return self.flags.last(name)


def may_run(words: Words) -> bool:
    """Whether ``words`` hold a tool word at all (a cheap test before expanding them)."""
    return any(os.path.basename(words.value(k).lstrip("@+-")) in TOOLS for k in range(len(words)))


def parse_run(
    words: Sequence[Word],
    offset: Callable[[int], int],
    file: str,
    line_col: Callable[[int], tuple[int, int]],
    text: str,
) -> RunLine | None:
    """The run line in ``words`` (character offsets into ``text``), or None. ``offset`` maps a
    character index of ``text`` to a byte offset in the file; ``line_col`` maps a byte offset
    to a 1-based line and column. The line's flags and command keep ``words`` (as
    :class:`Words`) and ``offset`` and are built from them when read."""
    ws = words if isinstance(words, Words) else Words(text, words)
    n = len(ws)
    i = 0
    while i < n and (ws.value(i) in _PREFIX or "=" in ws.value(i).split("/")[0]):
        i += 1
    if i >= n or os.path.basename(ws.value(i).lstrip("@+-")) not in TOOLS:
        return None
    tool = i
    i += 1
    while i < n and ws.value(i).startswith("-"):
        has_value = ws.value(i) in _GLOBAL_VALUE
        i += 2 if has_value else 1
    if i < n and ws.value(i) == "container":
        i += 1
    if i >= n or ws.value(i) != "run":
        return None
    i += 1
    flags = Flags(ws, offset)
    opaque: list[str] = []
    image = None
    while i < n:
        v = ws.value(i)
        w = ws.whole(i)  # a bare expansion is always kept whole
        if w is not None and w.bare and _options(w, ws[i + 1 : i + 2]):
            opaque.append(_written(w.raw))
            i += 1
            continue
        if v == "--":
            i += 1
            break
        if v.startswith("--") and len(v) > 2:
            name, eq, _ = v.partition("=")
            if eq:
                flags.add(i, name, len(name) + 1)
            elif name in BOOL_FLAGS or i + 1 >= n or _end_mark(ws, i + 1):
                flags.add(i, name, NO_VALUE)
            else:
                flags.add(i, name, NEXT_WORD)
                i += 1
        elif v.startswith("-") and len(v) > 1:
            for k, ch in enumerate(v[1:], start=1):
                long = SHORT.get(ch, f"-{ch}")
                if long in BOOL_FLAGS:
                    flags.add(i, long, NO_VALUE)
                    continue
                rest = v[k + 1 :]
                if rest:
                    flags.add(i, long, k + 2 if rest.startswith("=") else k + 1)
                elif i + 1 < n:
                    flags.add(i, long, NEXT_WORD)
                    i += 1
                break
        else:
            break
        i += 1
    if i < n:
        image = (ws.value(i), offset(ws.start(i)), offset(ws.end(i)))
        i += 1
    start = offset(ws.start(tool))
    end = offset(ws.end(n - 1))
    line, col = line_col(start)
    return RunLine(
        file,
        os.path.basename(ws.value(tool).lstrip("@+-")),
        line,
        col,
        start,
        end,
        flags,
        image,
        Command(ws, i, offset),
        text[ws.start(tool) : ws.end(n - 1)],
        tuple(opaque),
    )


def _end_mark(ws: Words, k: int) -> bool:
    """A ``--`` that a source put before an image it knows (a Quadlet ``Image=``, a
    devcontainer's ``image``: no text of its own), never an unknown flag's value."""
    return ws.start(k) == ws.end(k) and ws.value(k) == "--" and ws.raw(k) == ""


def _written(raw: str) -> str:
    return raw[1:-1] if len(raw) >= 2 and raw[0] == raw[-1] == '"' else raw


def _options(w: Word, after: list[Word]) -> bool:
    """Whether the bare unresolved expansion ``w`` in the flags is options (module doc)."""
    name = w.unresolved[0] if w.unresolved else w.raw
    if ":+" in name or "[@]" in name or "[*]" in name:
        return True  # ${x:+--flag $x}, "${ARGS[@]}": words, conditionally or many
    if _IMAGE_NAME.search(name):
        return False
    if _OPTIONS_NAME.search(name):
        return True
    if after and after[0].bare:
        return True  # $uid_mapping ${shm:+--shm-size=$shm} ${docker_image}: still flags
    return bool(after) and after[0].value.startswith("-")


__all__ = [
    "BOOL_FLAGS",
    "SHORT",
    "TOOLS",
    "Flag",
    "Flags",
    "Named",
    "RunLine",
    "may_run",
    "parse_run",
]
