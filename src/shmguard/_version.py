"""The package version, in a leaf module: the root, the CLI, the renderers and the exporters
import it from here, so none of them imports the package root. pyproject.toml's ``version``
is the same string, kept by hand."""

from __future__ import annotations

__version__ = "0.1.0"
