"""Generate docs/signatures.md from the catalogue, so the documentation cannot drift.

``tests/triage/test_signatures_docs.py`` checks the file equals :func:`render_markdown`;
regenerate it with ``SHMGUARD_REGEN_DOCS=1 python -m pytest tests/triage/test_signatures_docs.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from shmguard.triage.fixes import MODELLED_KINDS
from shmguard.triage.model import Signature
from shmguard.units import format_iec

_FORMAT = """\
# Failure signatures (`shmguard explain`)

This file is generated from `src/shmguard/triage/signatures/*.toml` by
`shmguard.triage.catalogue_doc`; a test keeps it equal to the catalogue.

## File format

One TOML file per signature. Add your own with `shmguard explain --signatures DIR` (or
`[explain] signatures = ["DIR"]` in `.shmguard.toml`, `[tool.shmguard.explain]` in
`pyproject.toml`); they are validated on load and every error names the file and the field,
for example `mine.toml: patterns[0].regex: invalid regular expression: ...`.

| field | meaning |
|---|---|
| `id` | stable kebab-case id, unique across the catalogue |
| `title` | one line |
| `kind` | class of cause (`dataloader_shm`, `nccl_shm`, `cgroup_oom`, ...) |
| `also` | other kinds the same evidence fits (ambiguous signatures list every candidate) |
| `role` | `cause` (default), `info` (not a cause by itself), `context` (facts only) |
| `confidence` | `low`, `medium` (default) or `high`, for patterns that do not set their own |
| `remedy` | `shm-size`, `config`, `memory`, `fd-limit`, `app`, `investigate`, `none` |
| `runtime` | the runtime or platform a match implies: a marker ([explain.md](explain.md#runtime)) |
| `cause` | the cause in plain words (paragraphs separated by a blank line) |
| `decide` | for ambiguous signatures: what evidence decides |
| `explained_by` | ids of more specific signatures; when one matches, this one is a consequence |
| `[[boost]]` | `when = [ids]`, `confidence`: raise the confidence when one of them matched |
| `references` | where the wording and the fix come from |
| `priority` | 0-100, breaks ties between equally confident causes (default 50) |
| `host_shm` | `true`: a match means the container shares the host's /dev/shm (IPC namespace) |
| `shm` | `true`: a shm allocation failed for want of /dev/shm space (see below) |
| `sigbus` | `true`: the SIGBUS path, a page tmpfs could not back was touched |
| `state_only` | `true` (with `shm`): a /dev/shm state (a full `df` row), not a failed allocation |
| `[size]` | `default`, `floor` (`1g`; none for `dataloader_shm`: the loader model sizes it), \
`need_factor`, `basis`, `runtimes` (get a snippet), `when` |
| `[fix]` | `summary`, `app`, `next`, `[fix.runtimes]` (a sentence per runtime or platform) |
| `[[patterns]]` | the wording variants, below |

`shm`, `sigbus` and `state_only` (causes only) are what a match says of
a run that `measure`, `probe`, `run --watch` or the PyTorch guard watched: with `shm` the run
failed because /dev/shm was too small (outcome `shm-exhausted`, or `sigbus` with `sigbus`);
a `state_only` one (or a `low` confidence one) decides that only when the run's own sampler
saw /dev/shm fill up, and never counts as a failed allocation.

`[size] when = [ids]`: a size is given only when one of those signatures matched too (the
evidence that /dev/shm is the file system in question); without it the fix says what to
check instead.

Each pattern: `name`; `literal` (a case-sensitive string every match contains: the cheap
pre-filter, at least 3 characters, one line); `regex` (Python syntax, searched only in
lines that contain the literal; default: the literal itself); `variant` (which versions
print it); `confidence`, `note`, `runtime` (override the signature's); `units` (capture
group -> `bytes`, `kib`, `df`, `k8s`, `docker`, `size`, `tmpfs`, `gb`, `text`; the groups
`shm_total`, `shm_need`, `shm_avail`, `mem_limit` and `shm_suggested` feed the size choice);
`marker = true` (only remembered, never evidence) and `after = "marker-name"` with
`within = N` (match only N lines or fewer after that marker, with no other marker of the
same signature in between).

Matching is per line, streamed in constant memory; ANSI colours and NUL bytes are removed,
invalid UTF-8 is replaced, and each CR-separated part of a line (progress-bar redraws) is
matched on its own. Catalogue regexes must not nest unbounded repeats (`(a+)+`, the shape
of catastrophic backtracking): the loader refuses them. Samples live in
`signatures/samples/<id>.pos*.log` and `<id>.neg*.log`; a test runs every one of them and
checks that the positive samples exercise every pattern.

## Catalogue
"""


def render_markdown(sigs: Sequence[Signature]) -> str:
    """docs/signatures.md for ``sigs`` (the built-in catalogue), as Markdown text."""
    out = [_FORMAT]
    out.append("| id | kind | role | confidence | remedy | title |")
    out.append("|---|---|---|---|---|---|")
    for s in sorted(sigs, key=lambda s: s.id):
        out.append(
            f"| [`{s.id}`](#{s.id}) | {s.kind} | {s.role} | {s.confidence} | {s.remedy} "
            f"| {_cell(s.title)} |"
        )
    for s in sorted(sigs, key=lambda s: s.id):
        out.append("")
        out.append(f"### {s.id}")
        out.append("")
        out.append(
            f"**{s.title}**. Kind `{s.kind}`"
            + (f" (also {', '.join(s.also)})" if s.also else "")
            + "."
        )
        if s.shm or s.sigbus:
            out.append("")
            out.append(f"For a measured or guarded run: {_run_meaning(s)}.")
        if s.runtime:
            out.append("")
            out.append(
                f"Every match points to the runtime `{s.runtime}` (a marker for explain's runtime "
                "inference, weighted by the pattern's confidence)."
            )
        if s.cause:
            out.append("")
            out.append(s.cause)
        if s.decide:
            out.append("")
            out.append(f"What decides: {s.decide}")
        if s.explained_by:
            out.append("")
            out.append("Explained by: " + ", ".join(f"`{e}`" for e in s.explained_by) + ".")
        out.append("")
        out.append("| pattern | literal | variant | confidence |")
        out.append("|---|---|---|---|")
        for p in s.patterns:
            conf = "marker" if p.marker else (p.confidence or s.confidence)
            lit = p.literal.decode()
            out.append(f"| {p.name} | `{_cell(lit)}` | {_cell(p.variant)} | {conf} |")
        if s.fix is not None:
            out.append("")
            out.append(f"Fix: {s.fix.summary}")
            for rt, text in s.fix.runtimes:
                out.append(f"- {rt}: {_cell(text)}")
            for step in s.fix.app:
                out.append(f"- application: {_cell(step)}")
        if s.size is not None and s.kind in MODELLED_KINDS:
            out.append("")
            out.append(
                "Size: the DataLoader model's for the loader the log shows (what `shmguard plan` "
                "gives for it), else the sizing policy's default with the pointer to "
                f"`shmguard measure`, `plan` and `probe`; why: {s.size.basis}"
                + (f"; only when {' or '.join(s.size.when)} matched too" if s.size.when else "")
                + "."
            )
        elif s.size is not None and s.size.default is not None and s.size.floor is not None:
            out.append("")
            out.append(
                f"Size: default {format_iec(s.size.default)}, at least {format_iec(s.size.floor)}"
                + (
                    f", {s.size.need_factor:g} × a size the log asks for"
                    if s.size.need_factor
                    else ""
                )
                + f"; {s.size.basis}"
                + (f"; snippets only for {', '.join(s.size.runtimes)}" if s.size.runtimes else "")
                + (f"; only when {' or '.join(s.size.when)} matched too" if s.size.when else "")
                + "."
            )
        if s.references:
            out.append("")
            out.append("References: " + "; ".join(s.references) + ".")
    return "\n".join(out) + "\n"


def _run_meaning(s: Signature) -> str:
    """What a match says of a run ``measure``, ``probe`` or the guard watched (its flags)."""
    if not s.shm:
        return "the SIGBUS path"
    if s.sigbus:
        how = "the SIGBUS path"
    elif s.state_only:
        how = "a state, not a failed allocation: only once the run's own sampler saw it fill up"
    elif s.confidence == "low":
        how = "a failed allocation, of low confidence: only once the run's sampler saw it fill up"
    else:
        how = "a failed shared-memory allocation"
    return f"/dev/shm was too small ({how})"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
