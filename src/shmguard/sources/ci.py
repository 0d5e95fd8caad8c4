"""CI pipelines: GitHub Actions workflows and GitLab CI files, read for the containers they
start.

GitHub Actions (docs.github.com, "Workflow syntax for GitHub Actions"): a workflow is a YAML
file with top-level ``jobs``, each with ``runs-on`` or ``steps``. ``jobs.<id>.container``
(an image string, or a mapping with ``image`` and ``options``: "additional Docker container
resource options", passed to ``docker create``) and ``jobs.<id>.services.<id>`` (the same
keys) start containers: each is read as the ``docker run`` of its image with its ``options``
as flags (:class:`CiContainer`); a fix appends to ``options`` (or adds it). The shell of
``steps[*].run`` is searched for ``docker|podman run`` lines like any script.

GitLab CI (docs.gitlab.com, "CI/CD YAML syntax reference"): ``.gitlab-ci.yml`` (or a file
with top-level jobs holding ``script``); the ``script``, ``before_script`` and
``after_script`` lines (a string or a list) are searched for run lines. A job's own image
runs under the runner, whose /dev/shm is the runner's ``[runners.docker] shm_size``, not in
this file.

A scalar's shell keeps its positions: a plain or quoted scalar is read between its quotes, a
block scalar (``run: |``) from the line after its indicator, in the file's own text, so a fix
splices the flag into the file where the command is.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from shmguard.sources.runline import RunLine, parse_run
from shmguard.sources.shell import Word, split_commands
from shmguard.sources.shellvars import ShellVars
from shmguard.sources.textsources import MENTION, shell_run_lines
from shmguard.sources.yamlload import YamlFile
from shmguard.sources.yamlnode import YMap, YNode, YScalar, YSeq

_GITLAB_KEYS = ("before_script", "script", "after_script")
_GITLAB_RESERVED = frozenset(
    {"stages", "variables", "include", "default", "workflow", "image", "services", "cache"}
)


@dataclass(frozen=True)
class CiContainer:
    """A GitHub Actions job container or service container.

    Attributes:
        job: the job id; service: the service id (None for the job's ``container``).
        node: the ``container`` / ``services.<id>`` value (a mapping, or the image string).
        options: its ``options`` scalar, if any.
        run: the ``docker run`` it amounts to (None without an image).
    """

    job: str
    service: str | None
    node: YNode
    options: YScalar | None
    run: RunLine | None


@dataclass(frozen=True)
class CiFile:
    """What a CI file starts: containers (GitHub Actions) and run lines in its shell."""

    kind: str
    containers: tuple[CiContainer, ...]
    run_lines: tuple[RunLine, ...]


def scalar_region(node: YScalar) -> tuple[int, int] | None:
    """The character span of ``node``'s content in the file's text: between the quotes of a
    quoted scalar, the whole of a plain one, the lines after the indicator of a block scalar;
    None for one with escapes (its text is not its value)."""
    text = node.src.text
    a, b = int(node.node.start_mark.index), int(node.node.end_mark.index)
    style = node.style
    if style == "plain":
        return a, b
    if style in ("single", "double"):
        inner = text[a + 1 : b - 1]
        if ("\\" in inner and style == "double") or ("''" in inner and style == "single"):
            return None
        return a + 1, b - 1
    nl = text.find("\n", a)
    return (nl + 1, b) if 0 <= nl < b else None


def _workflow(root: YMap) -> bool:
    jobs = root.get("jobs")
    return isinstance(jobs, YMap) and any(
        isinstance(j, YMap) and any(k in j.entries for k in ("runs-on", "steps", "uses"))
        for _, (_, j) in jobs.entries.items()
    )


def _gitlab(path: str, root: YMap) -> bool:
    name = os.path.basename(path)
    if name == ".gitlab-ci.yml" or name.endswith(".gitlab-ci.yml"):
        return True
    return "stages" in root.entries and any(
        isinstance(v, YMap) and "script" in v.entries
        for k, (_, v) in root.entries.items()
        if k not in _GITLAB_RESERVED
    )


def _shell(node: YNode | None, env: ShellVars) -> Iterator[RunLine]:
    scalars = node.items if isinstance(node, YSeq) else [node] if node is not None else []
    for s in scalars:
        if not isinstance(s, YScalar) or not MENTION.search(s.value):
            continue
        region = scalar_region(s)
        if region is not None:
            yield from shell_run_lines(s.src, region[0], region[1], env)


def _container(job: str, service: str | None, node: YNode) -> CiContainer:
    src = node.src
    image: YScalar | None = node if isinstance(node, YScalar) else None
    options = None
    if isinstance(node, YMap):
        i, o = node.get("image"), node.get("options")
        image = i if isinstance(i, YScalar) else None
        options = o if isinstance(o, YScalar) else None
    if image is None or not image.value.strip():
        return CiContainer(job, service, node, options, None)
    head = int(node.node.start_mark.index)
    words = [Word("docker", head, head, ""), Word("run", head, head, "")]
    region = scalar_region(options) if options is not None else None
    if region is not None:
        words += [w for cmd in split_commands(src.text, *region) for w in cmd]
    ia, ib = int(image.node.start_mark.index), int(image.node.end_mark.index)
    if image.style in ("single", "double"):
        ia, ib = ia + 1, ib - 1
    words.append(Word("--", ia, ia, ""))  # the image is known: never an unknown flag's value
    words.append(Word(image.value.strip(), ia, ib, src.text[ia:ib]))
    rl = parse_run(words, src.byte_offset, src.file, src.line_col, src.text)
    return CiContainer(job, service, node, options, rl)


def ci_file(path: str, yf: YamlFile) -> CiFile | None:
    """The CI file ``yf`` is (read from ``path``), or None when it is neither a GitHub Actions
    workflow nor a GitLab CI file."""
    for doc in yf.documents:
        root = doc.root
        if not isinstance(root, YMap):
            continue
        env = ShellVars()
        if _workflow(root):
            jobs = root.get("jobs")
            assert isinstance(jobs, YMap)
            containers: list[CiContainer] = []
            lines: list[RunLine] = []
            for job_id, (_, job) in jobs.entries.items():
                if not isinstance(job, YMap):
                    continue
                c = job.get("container")
                if c is not None:
                    containers.append(_container(job_id, None, c))
                services = job.get("services")
                if isinstance(services, YMap):
                    for sid, (_, svc) in services.entries.items():
                        containers.append(_container(job_id, sid, svc))
                steps = job.get("steps")
                for step in steps.items if isinstance(steps, YSeq) else []:
                    if isinstance(step, YMap):
                        lines += _shell(step.get("run"), env)
            return CiFile("github-actions", tuple(containers), tuple(lines))
        if _gitlab(path, root):
            lines = []
            for key, (_, job) in root.entries.items():
                if key in _GITLAB_RESERVED or not isinstance(job, YMap):
                    continue
                for k in _GITLAB_KEYS:
                    lines += _shell(job.get(k), env)
            return CiFile("gitlab-ci", (), tuple(lines))
    return None
