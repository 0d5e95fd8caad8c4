"""The edit that adds a ``docker run`` flag to a GitHub Actions job or service container
(:class:`~shmguard.sources.ci.CiContainer`): appended to its ``options`` (after the last word,
inside the quotes, on the last line of a block scalar), or ``options: <flag>`` added to the
mapping in its own style; an image given as a string becomes
``{image: <it>, options: <flag>}``."""

from __future__ import annotations

from shmguard.fix.yamledit import Style, add_entry
from shmguard.model.finding import Edit
from shmguard.sources.ci import CiContainer
from shmguard.sources.yamlnode import YMap, YScalar


def add_option(c: CiContainer, flag: str) -> Edit | None:
    """The edit giving ``c`` the ``docker create`` option ``flag`` (``--shm-size=1g``); None
    where the text cannot be placed (a value through an alias, an escaped string)."""
    node = c.node
    if node.shared:
        return None
    opts = c.options
    if opts is not None:
        if opts.shared:
            return None
        data = opts.src.data
        quoted = opts.style in ("single", "double")  # else plain or block: after the last word
        at = opts.end - 1 if quoted else len(data[: opts.end].rstrip())
        sep = "" if not opts.value.strip() else " "
        return Edit(at, at, sep + flag)
    if isinstance(node, YMap):
        return add_entry(node, "options", flag, Style())
    if isinstance(node, YScalar) and node.style == "plain":
        return Edit(node.start, node.end, f"{{image: {node.raw}, options: {flag}}}")
    return None
