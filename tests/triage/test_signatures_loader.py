"""Signature files are validated on load; every problem is one line naming the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from shmguard.triage.loader import SignatureError, load_catalogue, load_file

GOOD = """
id = "my-failure"
title = "My failure"
kind = "my_kind"
confidence = "high"
remedy = "investigate"
cause = "Because."
references = ["https://example.org/1"]

[[patterns]]
name = "main"
literal = "my special failure"
regex = 'my special failure (?P<code>\\d+)'

[fix]
summary = "Do the thing."
"""


def _write(tmp_path: Path, text: str, name: str = "sig.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_good_file_loads(tmp_path: Path) -> None:
    sig = load_file(_write(tmp_path, GOOD))
    assert sig.id == "my-failure" and sig.role == "cause" and sig.confidence == "high"
    assert sig.patterns[0].literal == b"my special failure"
    assert sig.patterns[0].regex.search("x my special failure 12 y")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.replace('id = "my-failure"', 'id = "My Failure"'),
            "sig.toml: id: 'My Failure' is not a kebab-case id",
        ),
        (lambda t: t.replace('title = "My failure"\n', ""), "sig.toml: title: missing (required)"),
        (
            lambda t: t.replace('confidence = "high"', 'confidence = "certain"'),
            "sig.toml: confidence: 'certain' is not one of low, medium, high",
        ),
        (
            lambda t: t.replace(
                "regex = 'my special failure (?P<code>\\d+)'", "regex = 'my (special'"
            ),
            "sig.toml: patterns[0].regex: invalid regular expression: "
            "missing ), unterminated subpattern at position 3",
        ),
        (
            lambda t: t.replace('literal = "my special failure"', 'literal = "my"'),
            "sig.toml: patterns[0].literal: must be at least 3 characters (pre-filter)",
        ),
        (lambda t: t + '\ncolour = "red"\n', "sig.toml: colour: unknown field; allowed:"),
        (
            lambda t: t.replace('remedy = "investigate"', 'remedy = "shm-size"'),
            "sig.toml: size: required when remedy = 'shm-size'",
        ),
        (
            lambda t: t.replace('[fix]\nsummary = "Do the thing."\n', ""),
            "sig.toml: fix: required for role = 'cause'",
        ),
        (
            lambda t: t.replace('name = "main"', 'name = "main"\nafter = "nope"\nwithin = 3'),
            "sig.toml: patterns[0].after: 'nope' is not a marker pattern here",
        ),
        (
            lambda t: t.replace('name = "main"', 'name = "main"\nunits = { size = "bytes" }'),
            "sig.toml: patterns[0].units.size: no capture group of that name in the regex",
        ),
        (
            lambda t: t.replace('name = "main"', 'name = "main"\nunits = { code = "parsecs" }'),
            "sig.toml: patterns[0].units.code: unknown unit 'parsecs'",
        ),
        (lambda t: t.replace("[[patterns]]", "[[patternz]]"), "sig.toml: patternz: unknown field"),
        (
            lambda t: t.replace('title = "My failure"', "title = [1, 2]"),
            "sig.toml: title: must be a non-empty string, got list",
        ),
        (
            lambda t: t.replace('kind = "my_kind"', 'kind = "my_kind"\nexplained_by = "x"'),
            "sig.toml: explained_by: must be a list of non-empty strings",
        ),
        (
            lambda t: t.replace('kind = "my_kind"', 'kind = "my_kind"\npriority = 500'),
            "sig.toml: priority: must be an integer from 0 to 100",
        ),
        (
            lambda t: t + '\n[size]\ndefault = "2Gi"\nfloor = "1g"\nbasis = "x"\n',
            "sig.toml: size.default: invalid suffix: 'gi'",
        ),
        (
            lambda t: t + '\n[size]\ndefault = "2g"\nfloor = "1g"\nbasis = "x"\nwhen = ["No"]\n',
            "sig.toml: size.when: 'No' is not valid here",
        ),
        (
            lambda t: (
                t.replace('kind = "my_kind"', 'kind = "dataloader_shm"')
                + '\n[size]\ndefault = "8g"\nfloor = "1g"\nbasis = "x"\n'
            ),
            "sig.toml: size.default: not used for a dataloader_shm failure",
        ),
        (
            lambda t: (
                t.replace('kind = "my_kind"', 'kind = "dataloader_shm"')
                + '\n[size]\nfloor = "1g"\nbasis = "x"\n'
            ),
            "sig.toml: size.floor: not used for a dataloader_shm failure",
        ),
        (lambda t: "id = [", "sig.toml: TOML syntax error:"),
    ],
)
def test_errors_name_file_and_field(tmp_path: Path, edit: object, message: str) -> None:
    assert callable(edit)
    p = _write(tmp_path, edit(GOOD))
    with pytest.raises(SignatureError) as err:
        load_file(p)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(str(tmp_path / message.split(":", 1)[0])), text
    assert message.split(":", 1)[1].strip() in text, text


def test_a_modelled_kind_has_no_size_of_its_own(tmp_path: Path) -> None:
    # A DataLoader failure is sized by the loader model or the policy's default: its file
    # gives only the reason, and the built-in ones carry no 8g that code would ignore.
    text = GOOD.replace('kind = "my_kind"', 'kind = "dataloader_shm"')
    sig = load_file(_write(tmp_path, text + '\n[size]\nbasis = "the model decides"\n'))
    assert sig.size is not None and sig.size.default is None and sig.size.floor is None
    for s in load_catalogue():
        if s.kind == "dataloader_shm" and s.size is not None:
            assert s.size.default is None, s.id
        elif s.size is not None:
            assert s.size.default is not None and s.size.floor is not None, s.id


def test_not_utf8(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_bytes(b'id = "\xff"\n')
    with pytest.raises(SignatureError, match=r"bad\.toml: not UTF-8 text \(byte 6\)"):
        load_file(p)


def test_user_dir_duplicate_and_unknown_references(tmp_path: Path) -> None:
    d = tmp_path / "sigs"
    d.mkdir()
    _write(d, GOOD.replace('id = "my-failure"', 'id = "fd-limit"'), "dup.toml")
    with pytest.raises(
        SignatureError, match=r"dup\.toml: id: 'fd-limit' is already defined in .*fd-limit\.toml"
    ):
        load_catalogue([d])
    (d / "dup.toml").write_text(
        GOOD.replace('kind = "my_kind"', 'kind = "my_kind"\nexplained_by = ["no-such-sig"]')
    )
    with pytest.raises(
        SignatureError, match=r"dup\.toml: explained_by: unknown signature id 'no-such-sig'"
    ):
        load_catalogue([d])
    sized = '\n[size]\ndefault = "2g"\nfloor = "1g"\nbasis = "x"\nwhen = ["no-such-sig"]\n'
    (d / "dup.toml").write_text(GOOD + sized)
    with pytest.raises(
        SignatureError, match=r"dup\.toml: size\.when: unknown signature id 'no-such-sig'"
    ):
        load_catalogue([d])
    (d / "dup.toml").write_text(GOOD + sized.replace("no-such-sig", "shm-full-df"))
    sig = next(s for s in load_catalogue([d]) if s.id == "my-failure")
    assert sig.size is not None and sig.size.when == ("shm-full-df",)


def test_user_dir_must_exist_and_hold_files(tmp_path: Path) -> None:
    with pytest.raises(SignatureError, match="not a directory of signature files"):
        load_catalogue([tmp_path / "missing"])
    with pytest.raises(SignatureError, match=r"no \*\.toml signature files"):
        load_catalogue([tmp_path])


def test_user_signature_extends_the_catalogue(tmp_path: Path) -> None:
    _write(tmp_path, GOOD)
    sigs = load_catalogue([tmp_path])
    assert sigs[-1].id == "my-failure" and len(sigs) > 30
