"""``docker run`` / ``podman run`` command lines: each flag with its value and byte spans.

From the words of a simple command (:mod:`~shmguard.sources.shell`), a run line is
``[sudo|env|exec|time ...] (docker|podman|nvidia-docker) [global options] [container] run
[flags] IMAGE [COMMAND...]``. Flags are read as the Docker CLI (cobra/pflag) reads them:
``--flag=value``, ``--flag value``, ``-m2g``, ``-m 2g`` and clusters ``-itd``; every long flag
not in :data:`BOOL_FLAGS` takes a value (docker/cli ``cli/command/container/opts.go`` and
``run.go``; podman ``cmd/podman/common/create.go``). Short flags are mapped to their long names
(``-m`` -> ``--memory``, ``-e`` -> ``--env``, ``-v`` -> ``--volume``).

Each :class:`Flag` records the byte span of the flag token and of the value in the file, so a
fixer can replace a value (``--shm-size=64m`` -> ``--shm-size=2g``) or insert a flag.

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
from collections.abc import Callable
from dataclasses import dataclass

from shmguard.sources.shell import Word

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


@dataclass(frozen=True, slots=True)  # slots: a 7 MB run line has 1.2M words
class Flag:
    """One option of a run line.

    Attributes:
        name: the long name (``--shm-size``, ``--memory`` for ``-m``).
        spelled: as written (``-m``, ``--memory``, ``-itd``).
        value: the value after shell quote removal; None for a boolean flag.
        flag_start, flag_end: byte span of the word holding the flag.
        value_start, value_end: byte span of the value's source text (quotes included), the
            part of ``--x=v`` after ``=``, or the next word; None for a boolean flag.
    """

    name: str
    spelled: str
    value: str | None
    flag_start: int
    flag_end: int
    value_start: int | None = None
    value_end: int | None = None


@dataclass(frozen=True)
class RunLine:
    """A ``docker|podman run`` command found in a file.

    Attributes:
        file: the path; tool: ``docker``, ``podman`` or ``nvidia-docker``.
        line, column: 1-based position of the tool word; start, end: byte span of the command.
        flags: in order; image: the image word's value and byte span (None when missing);
        command: the words after the image (value, start, end).
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
    flags: tuple[Flag, ...]
    image: tuple[str, int, int] | None
    command: tuple[tuple[str, int, int], ...]
    text: str
    opaque: tuple[str, ...] = ()

    def get(self, name: str) -> list[Flag]:
        """The flags with long name ``name`` (``--shm-size``), in order."""
        return [f for f in self.flags if f.name == name]

    def last(self, name: str) -> Flag | None:
        """The last ``name`` flag: the one that takes effect for single-valued options."""
        found = self.get(name)
        return found[-1] if found else None


def may_run(words: list[Word]) -> bool:
    """Whether ``words`` hold a tool word at all (a cheap test before expanding them)."""
    return any(os.path.basename(w.value.lstrip("@+-")) in TOOLS for w in words)


def parse_run(
    words: list[Word],
    offset: Callable[[int], int],
    file: str,
    line_col: Callable[[int], tuple[int, int]],
    text: str,
) -> RunLine | None:
    """The run line in ``words``, or None. ``offset`` maps a character index of ``text`` to a
    byte offset in the file; ``line_col`` maps a byte offset to a 1-based line and column."""
    i = 0
    while i < len(words) and (words[i].value in _PREFIX or "=" in words[i].value.split("/")[0]):
        i += 1
    if i >= len(words) or os.path.basename(words[i].value.lstrip("@+-")) not in TOOLS:
        return None
    tool_word = words[i]
    i += 1
    while i < len(words) and words[i].value.startswith("-"):
        has_value = words[i].value in _GLOBAL_VALUE
        i += 2 if has_value else 1
    if i < len(words) and words[i].value == "container":
        i += 1
    if i >= len(words) or words[i].value != "run":
        return None
    i += 1
    flags: list[Flag] = []
    opaque: list[str] = []
    image = None
    while i < len(words):
        w = words[i]
        v = w.value
        if w.bare and _options(w, words[i + 1 : i + 2]):
            opaque.append(_written(w.raw))
            i += 1
            continue
        if v == "--":
            i += 1
            break
        if v.startswith("--") and len(v) > 2:
            name, eq, val = v.partition("=")
            if eq:
                vs = offset(w.start + w.raw.find("=") + 1)
                flags.append(
                    Flag(name, name, val, offset(w.start), offset(w.end), vs, offset(w.end))
                )
            elif name in BOOL_FLAGS or i + 1 >= len(words) or _end_mark(words[i + 1]):
                flags.append(Flag(name, name, None, offset(w.start), offset(w.end)))
            else:
                nxt = words[i + 1]
                flags.append(
                    Flag(
                        name,
                        name,
                        nxt.value,
                        offset(w.start),
                        offset(w.end),
                        offset(nxt.start),
                        offset(nxt.end),
                    )
                )
                i += 1
        elif v.startswith("-") and len(v) > 1:
            for k, ch in enumerate(v[1:], start=1):
                long = SHORT.get(ch, f"-{ch}")
                if long in BOOL_FLAGS:
                    flags.append(Flag(long, v, None, offset(w.start), offset(w.end)))
                    continue
                rest = v[k + 1 :]
                if rest:
                    val = rest[1:] if rest.startswith("=") else rest
                    vs = offset(w.end - len(val)) if w.raw.endswith(val) else offset(w.start)
                    flags.append(
                        Flag(long, v, val, offset(w.start), offset(w.end), vs, offset(w.end))
                    )
                elif i + 1 < len(words):
                    nxt = words[i + 1]
                    flags.append(
                        Flag(
                            long,
                            v,
                            nxt.value,
                            offset(w.start),
                            offset(w.end),
                            offset(nxt.start),
                            offset(nxt.end),
                        )
                    )
                    i += 1
                break
        else:
            break
        i += 1
    if i < len(words):
        image = (words[i].value, offset(words[i].start), offset(words[i].end))
        i += 1
    command = tuple((w.value, offset(w.start), offset(w.end)) for w in words[i:])
    start = offset(tool_word.start)
    end = offset(words[-1].end)
    line, col = line_col(start)
    return RunLine(
        file,
        os.path.basename(tool_word.value.lstrip("@+-")),
        line,
        col,
        start,
        end,
        tuple(flags),
        image,
        command,
        text[tool_word.start : words[-1].end],
        tuple(opaque),
    )


def _end_mark(w: Word) -> bool:
    """A ``--`` that a source put before an image it knows (a Quadlet ``Image=``, a
    devcontainer's ``image``: no text of its own), never an unknown flag's value."""
    return w.value == "--" and w.raw == "" and w.start == w.end


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
