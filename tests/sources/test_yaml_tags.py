"""The loader's fast tag resolution (yamlload.LOADER) gives exactly PyYAML's tags."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shmguard.sources import yamlload

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"

FORMS = """\
a: yes
b: No
c: on
d: OFF
e: 012
f: 0x1F
g: 1_000
h: 1.5e9
i: .inf
j: -.NaN
k: ~
l: null
m:
n: 2001-12-14t21:59:43.10-05:00
o: 2002-12-14
p: '80'
q: "true"
r: !!str 80
s: !!int "7"
t: =
u: 1:20
v: 190:20:30.15
w: |
  block 1
x: >-
  folded true
y: [1, "2", three, 4.0, true, {z: null}]
<<: {base: 1}
? [complex, key]
: 0b101
"""


def _tags(text: str, loader: type) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    seen: set[int] = set()

    def walk(n: yaml.Node) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        out.append(
            (n.tag, str(n.value) if isinstance(n, yaml.ScalarNode) else "", n.start_mark.index)
        )
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                walk(k)
                walk(v)
        elif isinstance(n, yaml.SequenceNode):
            for v in n.value:
                walk(v)

    docs = list(yaml.compose_all(text, Loader=loader))  # kept alive: ``seen`` holds ids
    for doc in docs:
        if doc is not None:
            walk(doc)
    return out


def test_tags_of_every_scalar_form_match_pyyaml() -> None:
    assert yamlload.LOADER is yamlload._Loader  # no path resolver registered
    ref = _tags(FORMS, yaml.SafeLoader)
    assert ("tag:yaml.org,2002:bool", "yes", 3) in ref
    for _ in range(2):  # the second time from the memo
        assert _tags(FORMS, yamlload.LOADER) == ref


@pytest.mark.skipif(
    not CORPUS.is_dir(), reason="../shared/corpus (next to the repository) is absent"
)
def test_tags_over_the_corpus_match_pyyaml() -> None:
    files = sorted(p for k in ("compose", "k8s") for p in (CORPUS / k).rglob("*") if p.is_file())
    n = 0
    for p in files[::5]:
        text = p.read_text("utf-8", "replace")
        try:
            ref = _tags(text, yaml.CSafeLoader)
        except yaml.YAMLError as e:
            try:
                _tags(text, yamlload.LOADER)
            except yaml.YAMLError as e2:
                assert str(e2) == str(e)
            else:
                raise AssertionError(f"{p}: no error") from None
            continue
        assert _tags(text, yamlload.LOADER) == ref, p
        n += len(ref)
    assert n > 10_000
