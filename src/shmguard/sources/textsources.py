"""Find ``docker run`` / ``podman run`` lines in shell scripts, Makefiles, Dockerfiles,
Markdown and reStructuredText.

* Shell scripts and Makefiles: the whole text is split into commands
  (:func:`~shmguard.sources.shell.split_commands`); Make's recipe prefixes ``@ - +`` are
  ignored on the tool word.
* Dockerfiles: only ``RUN`` instructions in shell form (``CMD``/``ENTRYPOINT`` run the image,
  not Docker; a ``docker run`` inside a build is rare but real with a mounted socket).
* Markdown: fenced and indented code blocks only, located with markdown-it-py (CommonMark);
  blocks tagged as a data or programming language other than a shell are skipped. Shell
  prompts (``$ ``) are ignored. Inline code in prose (`` `docker run pytorch/pytorch` ``) is
  not read: it names a command in a sentence, it is not a command anyone runs as written
  (issue 21).
* reStructuredText: literal blocks after ``::`` (``.. code-block:: bash`` included), not
  inline literals in prose, for the same reason.

A run line inside a code block keeps exact byte offsets into the file: blocks are split where
they lie in the original text, never from a copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from shmguard.sources.runline import RunLine, may_run, parse_run
from shmguard.sources.shell import split_commands
from shmguard.sources.shellvars import ShellVars
from shmguard.sources.text import SourceText

#: Cheap pre-filter: a file without this cannot hold a run line.
MENTION = re.compile(r"(?:docker|podman)(?:\s+(?:-\S+\s+)*container)?\s+(?:\S+\s+)*?run\b")
_SKIP_LANGS = frozenset(
    [
        "yaml",
        "yml",
        "json",
        "toml",
        "python",
        "py",
        "python3",
        "go",
        "golang",
        "rust",
        "js",
        "javascript",
        "ts",
        "java",
        "c",
        "cpp",
        "dockerfile",
        "ini",
        "hcl",
        "text-yaml",
    ]
)
_RST_DIRECTIVE = re.compile(r"[ \t]*\.\.[ \t]+(?:code-block|code|sourcecode|prompt)::")
_DOCKERFILE_RUN = re.compile(r"^[ \t]*RUN[ \t]+(?!\[)", re.I | re.M)


def _lines_start(text: str) -> list[int]:
    starts = [0]
    starts += [m.end() for m in re.finditer("\n", text)]
    return starts


def shell_run_lines(
    src: SourceText, start: int = 0, end: int | None = None, env: ShellVars | None = None
) -> Iterator[RunLine]:
    """Run lines in ``src.text[start:end]`` read as shell (character offsets), their words
    expanded with the assignments before them (``env``: shared by the code blocks of one
    document; a new one when None)."""
    text = src.text
    env = ShellVars() if env is None else env
    for words in split_commands(text, start, end):
        if env.assign(text, words) or not may_run(words):
            continue
        rl = parse_run(env.expand(words), src.byte_offset, src.file, src.line_col, text)
        if rl is not None:
            yield rl


def _assign_only(src: SourceText, start: int, end: int, env: ShellVars) -> None:
    """Record the assignments of a code block that runs nothing (``export IMAGE=...`` in
    one block of a README, ``docker run $IMAGE`` in the next)."""
    if "=" in src.text[start:end]:
        for words in split_commands(src.text, start, end):
            env.assign(src.text, words)


def dockerfile_run_lines(src: SourceText) -> Iterator[RunLine]:
    """Run lines inside ``RUN`` instructions (shell form) of a Dockerfile."""
    text = src.text
    for m in _DOCKERFILE_RUN.finditer(text):
        end = m.end()
        while True:
            nl = text.find("\n", end)
            if nl < 0:
                end = len(text)
                break
            if text[end:nl].rstrip("\r").endswith("\\"):
                end = nl + 1
                continue
            end = nl
            break
        yield from shell_run_lines(src, m.end(), end)


def markdown_run_lines(src: SourceText) -> Iterator[RunLine]:
    """Run lines in Markdown fenced and indented code blocks (not inline code spans)."""
    text = src.text
    starts = _lines_start(text)

    def pos(line: int) -> int:
        return starts[line] if line < len(starts) else len(text)

    from markdown_it import MarkdownIt  # imported here: a check of YAML files never needs it

    env = ShellVars()  # one document: a block's assignments hold in the blocks after it
    for tok in MarkdownIt("commonmark").parse(text):
        if tok.map is None:
            continue
        a, b = tok.map
        if tok.type in ("fence", "code_block"):
            lang = (tok.info or "").strip().split()[0].lower() if tok.info.strip() else ""
            if lang in _SKIP_LANGS:
                continue
            first = a + 1 if tok.type == "fence" else a
            last = b - 1 if tok.type == "fence" and tok.markup and b - 1 > first else b
            if tok.type == "fence" and not text[pos(last) : pos(last + 1)].strip().startswith(
                tok.markup
            ):
                last = b
            if not MENTION.search(tok.content):
                _assign_only(src, pos(first), pos(last), env)
                continue
            yield from shell_run_lines(src, pos(first), pos(last), env)


def rst_run_lines(src: SourceText) -> Iterator[RunLine]:
    """Run lines in reST literal blocks (after ``::``; not inline literals)."""
    text = src.text
    lines = text.splitlines(keepends=True)
    starts = _lines_start(text)
    env = ShellVars()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") or _RST_DIRECTIVE.match(line):
            base = len(line) - len(line.lstrip())
            j = i + 1
            while j < len(lines) and (
                not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > base
            ):
                j += 1
            if j > i + 1:
                a, b = starts[i + 1], starts[j] if j < len(starts) else len(text)
                if MENTION.search(text, a, b):
                    yield from shell_run_lines(src, a, b, env)
                else:
                    _assign_only(src, a, b, env)
            i = j
            continue
        i += 1
