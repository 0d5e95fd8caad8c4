"""The configuration: discovery, parsing, one-line errors, selection and severities."""

from __future__ import annotations

from pathlib import Path

import pytest

from shmguard.config import ANNOTATIONS, LABELS, Config, ConfigError, load_config
from shmguard.model import FailOn, Severity
from shmguard.units import GiB

FULL = """
[tool.shmguard]
select = ["ENV", "SHM"]
ignore = ["ENV006"]
fail-on = "warning"
[tool.shmguard.severity]
ENV001 = "error"
[tool.shmguard.severity.ml]
ENV010 = "error"
[tool.shmguard.per-file-ignores]
"deploy/legacy/*.yaml" = ["SHM"]
[tool.shmguard.sizes]
default-shm-size = "2g"
headroom = 0.5
memory-margin = "512Mi"
[tool.shmguard.explain]
signatures = ["sigs"]
"""


def test_no_file_gives_the_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path) == Config()


def test_pyproject_table_is_found_from_a_subdirectory(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(FULL)
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    c = load_config(sub)
    assert c.path == tmp_path / "pyproject.toml"
    assert c.select == ("ENV", "SHM") and c.ignore == ("ENV006",)
    assert c.fail_on is FailOn.WARNING
    assert c.severity == {"ENV001": Severity.ERROR}
    assert c.workload_severity == {"ml": {"ENV010": Severity.ERROR}}
    assert (c.policy.default_shm_size, c.policy.headroom) == (2 * GiB, 0.5)
    assert c.policy.memory_margin == 512 * 2**20
    assert c.signatures == (tmp_path / "sigs",)


def test_pyproject_without_our_table_is_skipped_and_dot_file_wins(tmp_path: Path) -> None:
    (tmp_path / ".shmguard.toml").write_text('ignore = ["ENV001"]\n')
    sub = tmp_path / "proj"
    sub.mkdir()
    (sub / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    assert load_config(sub).ignore == ("ENV001",)
    (sub / "pyproject.toml").write_text(FULL)
    (sub / ".shmguard.toml").write_text('ignore = ["ENV002"]\n')
    assert load_config(sub).ignore == ("ENV002",)


def test_selection_ignore_and_per_file_ignores(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(FULL)
    c = load_config(tmp_path)
    assert c.enabled("ENV001") and c.enabled("SHM003")
    assert not c.enabled("ENV006")
    assert not c.enabled("XYZ001")  # not selected
    legacy = tmp_path / "deploy" / "legacy" / "job.yaml"
    assert not c.enabled("SHM003", str(legacy))
    assert c.enabled("ENV001", str(legacy))
    assert c.enabled("SHM003", str(tmp_path / "deploy" / "job.yaml"))


def test_exclusions_are_plain_data(tmp_path: Path) -> None:
    assert Config().exclude is None  # not set: check uses ruff's default list
    (tmp_path / ".shmguard.toml").write_text(
        'exclude = []\nextend-exclude = ["vendor", "charts/*/tests"]\nforce-exclude = true\n'
    )
    c = load_config(tmp_path)
    assert (c.exclude, c.extend_exclude, c.force_exclude) == (
        (),
        ("vendor", "charts/*/tests"),
        True,
    )


def test_workload_severity_wins_over_the_code_severity() -> None:
    c = Config(
        severity={"ENV001": Severity.ERROR},
        workload_severity={"container": {"ENV001": Severity.INFO}},
    )
    assert c.severity_for("ENV001", "container") is Severity.INFO
    assert c.severity_for("ENV001", "ml") is Severity.ERROR
    assert c.severity_for("ENV001", None) is Severity.ERROR
    assert c.severity_for("ENV002", "ml") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tool.shmguard]\nselct = []\n", "tool.shmguard.selct: unknown key"),
        ("[tool.shmguard.severity]\nENV001 = 'fatal'\n", "severity.ENV001: expected one of"),
        ("[tool.shmguard.severity.gpu]\nENV001 = 'error'\n", "severity.gpu: unknown workload"),
        ("[tool.shmguard]\nignore = ['env001']\n", "'env001' is not a rule code"),
        ("[tool.shmguard]\nfail-on = 'always'\n", "fail-on: expected one of"),
        ("[tool.shmguard.sizes]\ndefault-shm-size = 'two gigs'\n", "sizes.default-shm-size:"),
        ("[tool.shmguard.sizes]\nheadroom = -1\n", "sizes.headroom: must be a fraction"),
        ("[tool.shmguard.sizes]\nheadroom = 1e308\n", "sizes.headroom: must be a fraction"),
        ("[tool.shmguard.sizes]\nheadroom = nan\n", "sizes.headroom: must be a fraction"),
        ("[tool.shmguard.sizes]\ndefault-shm-size = true\n", "must be a size such as"),
        ("[tool.shmguard.sizes]\ndefault-shm-size = 1.5\n", "must be a size such as"),
        ("[tool.shmguard.sizes]\ndefault-shm-size = '32k'\n", "from 1 MiB to 1 PiB"),
        ("[tool.shmguard.sizes]\ndefault-shm-size = '64m'\n", "more than 64 MiB"),
        ("[tool.shmguard]\nselect = ['EVN']\n", "'EVN' is not a rule code"),
        ("[tool.shmguard.severity]\nENV01 = 'error'\n", "set per rule code"),
        ("[tool.shmguard.explain]\nfoo = 1\n", "explain.foo: unknown key"),
        ("tool = 1\n", "tool: must be a table"),
        ("[tool]\nshmguard = 1\n", "tool.shmguard: must be a table"),
        # deeper than any recursion limit a library in the process may set (cel-python: 2500)
        ("x = " + "[" * 6000 + "]" * 6000 + "\n", "nested too deeply"),
        ("[tool.shmguard.sizes]\nheadroom = '25%'\n", "sizes.headroom: must be a number"),
        ("[tool.shmguard\n", "not valid TOML"),
        ("[tool.shmguard]\nexclude = 'vendor'\n", "exclude: must be a list of glob patterns"),
        ("[tool.shmguard]\nextend-exclude = [1]\n", "extend-exclude: must be a list of glob"),
        ("[tool.shmguard]\nforce-exclude = 'yes'\n", "force-exclude: must be true or false"),
    ],
)
def test_bad_files_give_one_line_errors_naming_file_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(str(tmp_path / "pyproject.toml"))
    assert message in line


def test_annotation_and_label_names_are_defined_once_under_our_prefix() -> None:
    names = [*ANNOTATIONS.values(), *LABELS.values()]
    # one name per meaning on each kind of key (shmguard.io/inject is both: a namespace label
    # and a pod annotation, the two the webhook reads)
    for mapping in (ANNOTATIONS, LABELS):
        assert len(set(mapping.values())) == len(mapping)
    assert all(n.startswith("shmguard.io/") for n in names)
    assert ANNOTATIONS["shm-size"] == "shmguard.io/shm-size"
    doc = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    assert all(f"`{n}`" in doc for n in names)


CHECK = (
    '[tool.shmguard]\ntarget = "compose=v1"\n\n[[tool.shmguard.checks]]\ncode = "USR001"\n'
    'name = "ml-shm-below-2g"\ntemplate = "min-shm-size"\nmessage = "need 2g"\n'
    'params = { size = "2g" }\n'
)


def test_user_checks_are_read_by_the_lint_layer_through_the_public_loader(tmp_path: Path) -> None:
    """config.py knows no rule: ``[[checks]]`` become rules through the reader the public
    ``shmguard.load_config`` (shmguard.lint.settings) passes; without one they are refused."""
    import shmguard
    from shmguard.lint.settings import load_config as public_load_config

    (tmp_path / "pyproject.toml").write_text(CHECK)
    assert shmguard.load_config is public_load_config
    conf = shmguard.load_config(tmp_path)
    assert [(r.code, r.name) for r in conf.checks] == [("USR001", "ml-shm-below-2g")]
    assert conf.target == "compose=v1"
    with pytest.raises(ConfigError, match=r"tool\.shmguard\.checks: user-defined checks are read"):
        load_config(tmp_path)
    # a name of a built-in rule is refused by the reader (it has the registries)
    builtin = "ml-workload-without-shm-size"  # SHM001's name
    (tmp_path / "pyproject.toml").write_text(CHECK.replace("ml-shm-below-2g", builtin))
    with pytest.raises(ConfigError, match=rf"checks\[0\] \(USR001\)\.name: {builtin} is already"):
        shmguard.load_config(tmp_path)
