"""The packaged JSON schemas (src/shmguard/schemas) loaded for validation: each command's schema
refers to common.schema.json (and probe's to measure.schema.json) by ``$ref``, so a validator
needs them all; a ``referencing`` Registry holds every schema under its ``$id``.

``validator("plan").validate(doc)`` raises :class:`jsonschema.ValidationError` for a document
that does not fit ``plan.schema.json``."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema

SCHEMAS = resources.files("shmguard") / "schemas"


def schema(name: str) -> dict[str, Any]:
    """``<name>.schema.json`` as data (its ``$ref``\\ s unresolved)."""
    data: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return data


def names() -> list[str]:
    """Every packaged schema's name (``check``, ``common``, ...), sorted."""
    return sorted(
        p.name.removesuffix(".schema.json")
        for p in SCHEMAS.iterdir()
        if p.name.endswith(".schema.json")
    )


@functools.cache
def registry() -> referencing.Registry[Any]:
    """Every packaged schema, under its ``$id``."""
    resources_ = [
        referencing.Resource.from_contents(
            schema(n), default_specification=referencing.jsonschema.DRAFT202012
        )
        for n in names()
    ]
    return referencing.Registry().with_resources((r.id(), r) for r in resources_)


def validator(name: str) -> jsonschema.Draft202012Validator:
    """A validator of ``<name>.schema.json`` that resolves its references to the others."""
    data = schema(name)
    jsonschema.Draft202012Validator.check_schema(data)
    return jsonschema.Draft202012Validator(data, registry=registry())
