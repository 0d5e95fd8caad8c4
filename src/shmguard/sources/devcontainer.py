"""Dev Container configurations (``devcontainer.json``, ``.devcontainer.json``,
``.devcontainer/**/devcontainer.json``) read as the ``docker run`` they start.

The format is JSON with comments (``//``, ``/* */``) and trailing commas (the Dev Container
specification, containers.dev ``devcontainer.json`` reference; VS Code's "JSON with Comments").
It is read by blanking comments and trailing commas byte for byte (and tabs outside strings,
which PyYAML refuses in places), then parsing the result with the node layer: every offset is
the original file's, so an edit computed on the blanked text applies to the file as it is.

An image or Dockerfile configuration starts one container, ``docker run`` with ``runArgs``
(containers.dev: "an array of Docker CLI arguments that should be used when running the
container"), so it becomes a :class:`~shmguard.sources.runline.RunLine`: the ``runArgs``
words as flags, ``mounts`` as ``--mount``, ``containerEnv`` as ``--env``,
``hostRequirements.gpu`` as ``--gpus all`` (the devcontainers CLI adds it when the host has a
GPU), and the image: ``image``, else the first ``FROM`` of ``build.dockerfile`` (relative to
the configuration; read through the one bounded reader). When the image cannot be known (the
Dockerfile is not there, or its ``FROM`` is a build argument) the ``runArgs`` are still read,
as a run line without an image. A Docker Compose configuration
(``dockerComposeFile``: a path or a list, relative to the configuration) ignores ``runArgs``;
its Compose files are checked as Compose (:func:`compose_paths`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from shmguard.sources.read import read_input
from shmguard.sources.runline import RunLine, parse_run
from shmguard.sources.shell import Word
from shmguard.sources.text import SourceText
from shmguard.sources.yamlload import YamlFile, load_yaml
from shmguard.sources.yamlnode import YMap, YNode, YScalar, YSeq

NAMES = ("devcontainer.json", ".devcontainer.json")
_FROM = re.compile(r"^[ \t]*FROM[ \t]+(?:--\S+[ \t]+)*(\S+)", re.I | re.M)


def is_devcontainer(path: str) -> bool:
    """Whether ``path`` is named as a Dev Container configuration."""
    return os.path.basename(path) in NAMES


def blank_jsonc(data: bytes) -> bytes:
    """``data`` with comments, trailing commas and tabs outside strings replaced by spaces
    (line breaks kept), byte for byte: the same length, every offset unchanged."""
    out = bytearray(data)
    i, n = 0, len(data)
    in_str = False
    commas: list[int] = []
    while i < n:
        c = data[i]
        if in_str:
            if c == 0x5C:  # backslash: skip the escaped byte
                i += 2
                continue
            if c == 0x22:
                in_str = False
            i += 1
            continue
        if c == 0x22:
            in_str = True
        elif c == 0x2F and data[i + 1 : i + 2] == b"/":
            end = data.find(b"\n", i)
            end = n if end < 0 else end
            for k in range(i, end):
                if out[k] != 0x0D:
                    out[k] = 0x20
            i = end
            continue
        elif c == 0x2F and data[i + 1 : i + 2] == b"*":
            end = data.find(b"*/", i + 2)
            end = n if end < 0 else end + 2
            for k in range(i, end):
                if out[k] not in (0x0A, 0x0D):
                    out[k] = 0x20
            i = end
            continue
        elif c == 0x09:
            out[i] = 0x20
        elif c == 0x2C:
            commas.append(i)
        i += 1
    for k in commas:
        rest = bytes(out[k + 1 : k + 4096]).lstrip()
        if rest[:1] in (b"]", b"}"):
            out[k] = 0x20
    return bytes(out)


@dataclass(frozen=True)
class DevContainer:
    """One Dev Container configuration.

    Attributes:
        src: the blanked text (the original's bytes and offsets; comments are spaces);
        raw: the original bytes (an edit's indentation is copied from them: tabs stay tabs).
        root: the top-level object; run_args: its ``runArgs`` array, if any.
        run: the ``docker run`` it starts (None for a Docker Compose configuration or one with
            neither an image, a Dockerfile nor ``runArgs``; without ``image[1]`` when the
            image is not known: a Dockerfile that is absent or starts ``FROM ${VARIANT}``).
        compose: the ``dockerComposeFile`` paths as resolved against the configuration's
            directory.
    """

    src: SourceText
    root: YMap
    run_args: YSeq | None
    run: RunLine | None
    compose: tuple[str, ...] = ()
    raw: bytes = b""


def _word(node: YNode, value: str | None = None) -> Word | None:
    """A run-line word for a JSON string scalar: its inner span when the text between the
    quotes is the value (so an edit can replace it), else the whole literal."""
    if not isinstance(node, YScalar):
        return None
    text = node.src.text
    a, b = int(node.node.start_mark.index), int(node.node.end_mark.index)
    raw = text[a:b]
    v = node.value if value is None else value
    if value is None and len(raw) >= 2 and raw[0] == raw[-1] == '"' and raw[1:-1] == v:
        return Word(v, a + 1, b - 1, v)
    return Word(v, a, b, raw)


def _at(node: YNode, value: str) -> Word:
    a = int(node.node.start_mark.index)
    return Word(value, a, a, "")


def _image(path: str, root: YMap) -> tuple[str, YNode] | None:
    image = root.get("image")
    if isinstance(image, YScalar) and image.value.strip():
        return image.value.strip(), image
    build = root.get("build")
    dockerfile = build.get("dockerfile") if isinstance(build, YMap) else root.get("dockerFile")
    if not isinstance(dockerfile, YScalar) or not dockerfile.value.strip():
        return None
    target = os.path.join(os.path.dirname(path) or ".", dockerfile.value.strip())
    data = read_input(target) if path != "-" else None
    if not isinstance(data, bytes):
        return None
    m = _FROM.search(data.decode("utf-8", "replace"))
    if m is None or "$" in m.group(1):
        return None
    return m.group(1), dockerfile


def _run(path: str, src: SourceText, root: YMap, args: YSeq | None) -> RunLine | None:
    found = _image(path, root)
    if found is None and args is None:
        return None
    # An image that cannot be read (a Dockerfile not in the tree, ``FROM ${VARIANT}``) does
    # not make runArgs less of a docker run: they are read with no image, as a run line with
    # an unresolved image is.
    head = args if args is not None else root.get("image") or found[1] if found else None
    if head is None:
        return None
    words: list[Word] = [_at(head, "docker"), _at(head, "run")]
    for item in args or ():
        w = _word(item)
        if w is not None:
            words.append(w)
    mounts = root.get("mounts")
    for m in mounts if isinstance(mounts, YSeq) else ():
        w = _word(m) if isinstance(m, YScalar) else None
        if isinstance(m, YMap):
            parts = [f"{k}={v.value}" for k, (_, v) in m.entries.items() if isinstance(v, YScalar)]
            w = _word(m, ",".join(parts))
        if w is not None:
            words += [_at(m, "--mount"), w]
    env = root.get("containerEnv")
    if isinstance(env, YMap):
        for k, (key, v) in env.entries.items():
            if isinstance(v, YScalar):
                words += [_at(key, "--env"), _word(v, f"{k}={v.value}") or _at(key, k)]
    req = root.get("hostRequirements")
    gpu = req.get("gpu") if isinstance(req, YMap) else None
    if gpu is not None and not (isinstance(gpu, YScalar) and gpu.value in ("false", "")):
        words += [_at(gpu, "--gpus"), _at(gpu, "all")]
    if found is not None:
        image, node = found
        words.append(_at(node, "--"))  # the image is known: never an unknown flag's value
        words.append(_word(node, image) or _at(node, image))
    return parse_run(words, src.byte_offset, src.file, src.line_col, src.text)


def load_devcontainer(data: bytes, path: str) -> tuple[YamlFile, DevContainer | None]:
    """Parse a Dev Container configuration (``data``, the content of ``path``); the blanked
    file's diagnostics (invalid JSON) when it does not parse to an object."""
    blanked = SourceText.decode(blank_jsonc(data), path)
    yf = load_yaml(blanked, path) if isinstance(blanked, SourceText) else load_yaml(data, path)
    if not isinstance(blanked, SourceText) or not yf.documents:
        return yf, None
    root = yf.documents[0].root
    if not isinstance(root, YMap):
        return yf, None
    args = root.get("runArgs")
    seq = args if isinstance(args, YSeq) else None
    compose = root.get("dockerComposeFile")
    files: list[str] = []
    for item in compose if isinstance(compose, YSeq) else [compose] if compose else []:
        if isinstance(item, YScalar) and item.value.strip():
            files.append(os.path.normpath(os.path.join(os.path.dirname(path), item.value)))
    run = None if files else _run(path, blanked, root, seq)
    return yf, DevContainer(blanked, root, seq, run, tuple(files), data)


def compose_paths(data: bytes, path: str) -> list[str]:
    """The Compose files a Dev Container configuration names (``dockerComposeFile``),
    resolved against its directory; [] when it names none or does not parse."""
    try:
        doc = json.loads(blank_jsonc(data))
    except ValueError:
        return []
    ref = doc.get("dockerComposeFile") if isinstance(doc, dict) else None
    refs = ref if isinstance(ref, list) else [ref] if isinstance(ref, str) else []
    return [
        os.path.normpath(os.path.join(os.path.dirname(path), r))
        for r in refs
        if isinstance(r, str) and r.strip()
    ]
