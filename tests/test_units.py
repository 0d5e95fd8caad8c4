"""shmguard.units against the tables measured in ../shared/research/config_formats.md."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shmguard import units
from shmguard.units import (
    SIZE_ANNOTATION_FORMS,
    DurationError,
    GiB,
    KiB,
    MiB,
    SizeError,
    format_docker_size,
    format_ecs_mib,
    format_iec,
    format_k8s_quantity,
    k8s_quantity_bytes,
    parse_docker_size,
    parse_duration,
    parse_ecs_mib,
    parse_k8s_quantity,
    parse_size_annotation,
    parse_size_flag,
    parse_tmpfs_size,
)

# docker CLI 28.2.2 `--shm-size=X` (config_formats.md section 0, [run]).
DOCKER_OK = {
    "0": 0,
    "64m": 64 * MiB,
    "64M": 64 * MiB,
    "64MB": 64 * MiB,
    "64mb": 64 * MiB,
    "64MiB": 64 * MiB,
    "64mib": 64 * MiB,
    "1g": GiB,
    "1G": GiB,
    "1gb": GiB,
    "1GB": GiB,
    "1GiB": GiB,
    "1.5g": 1610612736,
    "1.5G": 1610612736,
    "2e9": 2_000_000_000,
    "1e3m": 1000 * MiB,
    "1 g": GiB,
    "1t": 1024**4,
    "1p": 1024**5,
    "1k": 1024,
    "1kB": 1024,
    "100": 100,
    "1b": 1,
    "1B": 1,
    ".5g": GiB // 2,
    "5.": 5,
    "1_000": 1000,
    "16GiB": 16 * GiB,
    "1tb": 1024**4,
    "32.3": 32,
    "0.3MB": 314572,
}

DOCKER_ERR = {
    "1  g": 'strconv.ParseFloat: parsing "1 ": invalid syntax',
    "1gig": "invalid suffix: 'gig'",
    "2Gi": "invalid suffix: 'gi'",
    "1Ti": "invalid suffix: 'ti'",
    "1e": "invalid suffix: 'e'",
    "-1": "invalid size: '-1'",
    "": "invalid size: ''",
    "abc": "invalid size: 'abc'",
    " 8g": 'strconv.ParseFloat: parsing " 8": invalid syntax',
    "8g ": 'strconv.ParseFloat: parsing "8g": invalid syntax',
    "0x10": 'strconv.ParseFloat: parsing "0x10": invalid syntax',
}


@pytest.mark.parametrize(("text", "expected"), DOCKER_OK.items())
def test_docker_accepts_like_go_units_v050(text: str, expected: int) -> None:
    assert parse_docker_size(text) == expected


@pytest.mark.parametrize(("text", "message"), DOCKER_ERR.items())
def test_docker_rejects_with_go_units_message(text: str, message: str) -> None:
    with pytest.raises(SizeError) as err:
        parse_docker_size(text)
    assert str(err.value) == message


@pytest.mark.parametrize("text", ["1e30", "10000000000000000000"])
def test_docker_values_overflowing_int64_are_refused(text: str) -> None:
    with pytest.raises(SizeError, match="overflows int64"):
        parse_docker_size(text)


def test_legacy_go_units_accepts_kubernetes_suffixes() -> None:
    # Podman 4.3.1 and Docker <= 20.10 (go-units v0.4.0): `--shm-size=2Gi` -> 2147483648.
    assert parse_docker_size("2Gi", legacy=True) == 2 * GiB
    assert parse_docker_size("2GiB", legacy=True) == 2 * GiB
    assert parse_docker_size("64m", legacy=True) == 64 * MiB
    for text in ("2e9", ".5g", "1_000", "5."):
        with pytest.raises(SizeError, match="invalid size"):
            parse_docker_size(text, legacy=True)


# kubectl v1.32.4 (config_formats.md section 4.3, [run]).
K8S_OK = {
    "2Gi": 2 * GiB,
    "2G": 2_000_000_000,
    "1.5Gi": 1536 * MiB,
    "1.5G": 1_500_000_000,
    ".5Gi": 512 * MiB,
    "0.5Gi": 512 * MiB,
    "2e9": 2_000_000_000,
    "2E": 2 * 10**18,
    "2k": 2000,
    "2Ki": 2048,
    "1000m": 1,
    "3.3333Gi": 3579103622,  # 3579103621939200u rounded up by Value()
}


@pytest.mark.parametrize(("text", "expected"), K8S_OK.items())
def test_k8s_quantity_bytes(text: str, expected: int) -> None:
    assert k8s_quantity_bytes(text) == expected


def test_k8s_lowercase_m_is_milli() -> None:
    assert parse_k8s_quantity("64m") == Fraction(64, 1000)
    assert k8s_quantity_bytes("64m") == 1  # tmpfs size=1 -> one page


@pytest.mark.parametrize(
    "text", ["2g", "2GB", "2gi", "2KB", "2 Gi", "2Gib", "1e3Mi", "1_000", "0x10"]
)
def test_k8s_rejects_docker_style_with_regex_error(text: str) -> None:
    with pytest.raises(SizeError, match="quantities must match the regular expression"):
        parse_k8s_quantity(text)


def test_k8s_rejects_uppercase_k_with_suffix_error() -> None:
    with pytest.raises(SizeError, match="unable to parse quantity's suffix"):
        parse_k8s_quantity("2K")


def test_k8s_2g_is_not_2gi() -> None:
    assert k8s_quantity_bytes("2G") < k8s_quantity_bytes("2Gi")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8g", 8 * GiB),
        ("65536k", 64 * MiB),
        ("1", 4096),  # rounded up to a page
        ("0", 0),  # unlimited
        ("0x1000", 4096),
        ("010", 4096),  # octal 8 bytes, one page
        ("50%", 12 * GiB),
    ],
)
def test_tmpfs_size(text: str, expected: int) -> None:
    assert parse_tmpfs_size(text, mem_total=24 * GiB) == expected


@pytest.mark.parametrize("text", ["8gb", "8Gi", "8 g", "", "g"])
def test_tmpfs_rejects_non_kernel_syntax(text: str) -> None:
    with pytest.raises(SizeError, match="Bad value for 'size'"):
        parse_tmpfs_size(text, mem_total=GiB)


def test_tmpfs_percent_needs_ram() -> None:
    with pytest.raises(SizeError, match="RAM is unknown"):
        parse_tmpfs_size("50%")


def test_ecs_mib() -> None:
    assert parse_ecs_mib(2048) == 2 * GiB
    assert parse_ecs_mib("64") == 64 * MiB
    assert format_ecs_mib(2 * GiB) == 2048
    assert format_ecs_mib(GiB + 1) == 1025  # rounded up, nothing lost
    for bad in ("2g", -1, True, 1.5):
        with pytest.raises(SizeError):
            parse_ecs_mib(bad)  # type: ignore[arg-type]


def test_runtime_defaults() -> None:
    assert units.DOCKER_DEFAULT_SHM == 67108864
    assert units.PODMAN_DEFAULT_SHM == 65536000


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (64 * MiB, "64 MiB"),
        (65536000, "62.5 MiB"),
        (1610612736, "1.5 GiB"),
        (123456789, "~117.74 MiB"),
        (100, "100 B"),
        (0, "0 B"),
    ],
)
def test_format_iec(n: int, text: str) -> None:
    assert format_iec(n) == text


@pytest.mark.parametrize(
    ("n", "docker", "k8s"),
    [
        (2 * GiB, "2g", "2Gi"),
        (1536 * MiB, "1536m", "1536Mi"),
        (65536000, "64000k", "65536k"),
        (2_000_000_000, "1953125k", "2G"),
        (1000, "1000", "1k"),
        (10**18, "976562500000000k", "1000P"),
        (0, "0", "0"),
    ],
)
def test_formatters(n: int, docker: str, k8s: str) -> None:
    assert format_docker_size(n) == docker
    assert format_k8s_quantity(n) == k8s


@given(st.integers(min_value=0, max_value=2**50))
def test_docker_round_trip(n: int) -> None:
    assert parse_docker_size(format_docker_size(n)) == n


@given(st.integers(min_value=0, max_value=2**62))
def test_k8s_round_trip(n: int) -> None:
    assert k8s_quantity_bytes(format_k8s_quantity(n)) == n


@given(st.integers(min_value=1, max_value=2**40).map(lambda n: n * 4096))
def test_tmpfs_round_trip_page_multiples(n: int) -> None:
    assert parse_tmpfs_size(format_docker_size(n)) == n


@pytest.mark.parametrize(
    ("text", "expected"),
    [("64Mi", 64 * MiB), ("1Gi", GiB), ("64 MiB", 64 * MiB), ("1gb", GiB), ("512m", 512 * MiB)],
)
def test_size_flag_accepts_docker_and_iec(text: str, expected: int) -> None:
    assert parse_size_flag(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("0", "must be greater than 0"),
        ("-1", "invalid size '-1'"),
        ("64 MB MB", "did you mean '64m'"),
        ("1gig", "did you mean '1g'"),
        ("lots", "write one number and an optional unit: 64m, 1.5g, 512Mi, 1Gi or a byte count"),
        ("64mbb", "invalid size '64mbb': unknown unit 'mbb'"),
        ("1.5.5g", "invalid size '1.5.5g'; write one number"),
        ("1e30", "invalid size '1e30': too large (more than 8 EiB)"),
        ("", "invalid size '': empty"),
        # Python's \d and float() take fullwidth digits; Go's strconv does not, nor do we
        ("\uff11g", "invalid size '\uff11g': use ASCII digits and letters"),
        ("\uff11Gi", "invalid size '\uff11Gi': use ASCII digits and letters"),
    ],
)
def test_size_flag_errors_are_one_line(text: str, fragment: str) -> None:
    with pytest.raises(SizeError) as err:
        parse_size_flag(text)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_docker_size_refuses_non_ascii_digits_like_go() -> None:
    with pytest.raises(SizeError, match=r"strconv.ParseFloat: parsing .*: invalid syntax"):
        parse_docker_size("\uff164m")


@pytest.mark.parametrize("text", ["1 g g", "64 MB MB", "1.5.5g", "1e999m", "0x40m", "-1", "abc"])
def test_size_flag_errors_are_ours_not_go_units(text: str) -> None:
    # `--memory 1.5.5g` answered `strconv.ParseFloat: parsing "1.5.5": invalid syntax`: right
    # for a Docker configuration (parse_docker_size keeps it), wrong for our own flags.
    with pytest.raises(SizeError) as err:
        parse_size_flag(text)
    message = str(err.value)
    assert "strconv" not in message and "invalid size: " not in message
    assert message.startswith(f"invalid size {text!r}")
    assert message.count("1g = 1gb = 1 GiB") == 1
    with pytest.raises(SizeError, match=r"strconv\.ParseFloat|invalid size: "):
        parse_docker_size(text)


@pytest.mark.parametrize(
    ("n", "unit", "expected"),
    [(0, 4096, 0), (1, 4096, 4096), (4096, 4096, 4096), (4097, MiB, MiB), (GiB + 1, GiB, 2 * GiB)],
)
def test_round_up(n: int, unit: int, expected: int) -> None:
    assert units.round_up(n, unit) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("2m", 120.0),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        (".5s", 0.5),
        ("90", 90.0),
        ("2.5", 2.5),
        (" 10s ", 10.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "invalid duration '': empty"),
        ("-5s", "invalid duration '-5s': must not be negative"),
        ("0", "invalid duration '0': must be greater than 0"),
        ("0s", "invalid duration '0s': must be greater than 0"),
        ("inf", "invalid duration 'inf': must be finite"),
        ("nan", "invalid duration 'nan': must be finite"),
        ("2d", "invalid duration '2d': unknown unit 'd'"),
        ("5sec", "invalid duration '5sec': unknown unit 'sec'"),
        ("1m30", "invalid duration '1m30': no unit after '30'"),
        ("1m 30s", "invalid duration '1m 30s': no spaces"),
        ("soon", "invalid duration 'soon'; write e.g. 30s, 2m, 1m30s, 1.5h or a number"),
        ("1..2s", "invalid duration '1..2s'; write e.g."),
    ],
)
def test_parse_duration_rejects(text: str, message: str) -> None:
    with pytest.raises(DurationError) as err:
        parse_duration(text)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


# shmguard.io/shm-size: one parser for check --fix and the webhook (issue 19, reproduction 2).
ANNOTATION_OK = {
    "2Gi": 2 * GiB,
    "1500Mi": 1500 * MiB,
    "2G": 2_000_000_000,  # Kubernetes' decimal giga, not 2 GiB
    "2e9": 2_000_000_000,
    "1E": 10**18,
    "2g": 2 * GiB,  # go-units: Docker sizes are binary
    "2gb": 2 * GiB,
    "2GB": 2 * GiB,
    "2GiB": 2 * GiB,
    "1.5g": 1536 * MiB,
    "64mb": 64 * MiB,
    "2K": 2 * KiB,  # no Kubernetes suffix (that is k); go-units' binary kilo
    "2147483648": 2 * GiB,
    " 2Gi ": 2 * GiB,
    "1.5k": 1500,
    "9223372036854775807": 2**63 - 1,
    "7Ei": 7 * 2**60,
}
ANNOTATION_BAD = {
    "1m": "m is milli in a Kubernetes quantity, not mebi (1m is 1 millibytes); 1Mi or 1mb is 1 MiB",
    "64m": "64 millibytes",
    "1u": "microbytes",
    "0.5": "less than one byte",
    "1.5": "not a whole number of bytes",
    "0.1Ki": "not a whole number of bytes",
    "1e-999": "less than one byte",
    "0": "must be greater than 0",
    "0Gi": "must be greater than 0",
    "0e999": "must be greater than 0",
    "-1Gi": "must be greater than 0",
    "1e999": "more than 8 EiB",
    "1e999999999": "more than 8 EiB",
    "8Ei": "more than 8 EiB",
    "9223372036854775808": "more than 8 EiB",
    "9" * 5000: "too long for a size (5000 characters, at most 64)",  # past int()s 4,300 digits
    "1" + "0" * 64: "too long for a size",
    "2gi": "neither a Kubernetes quantity nor a Docker size",
    "lots": "neither a Kubernetes quantity nor a Docker size",
    "": "empty",
    "２Gi": "ASCII",
}


@pytest.mark.parametrize(("text", "expected"), sorted(ANNOTATION_OK.items()))
def test_size_annotation_reads_quantities_and_docker_sizes(text: str, expected: int) -> None:
    assert parse_size_annotation(text) == expected


@pytest.mark.parametrize(("text", "message"), sorted(ANNOTATION_BAD.items()))
def test_size_annotation_rejects_with_a_size_error(text: str, message: str) -> None:
    with pytest.raises(SizeError) as err:
        parse_size_annotation(text)
    assert message in str(err.value)
    assert str(err.value).endswith(SIZE_ANNOTATION_FORMS)
    assert len(str(err.value)) < 250  # one line, never the 5,000 digits


@given(st.integers(min_value=1, max_value=2**63 - 1))
def test_size_annotation_reads_every_quantity_shmguard_writes(n: int) -> None:
    assert parse_size_annotation(format_k8s_quantity(n)) == n


@given(st.integers(min_value=1, max_value=2**33 - 1))
def test_size_annotation_reads_docker_gigabytes_as_binary(n: int) -> None:
    # Where the two syntaxes share a suffix (k, m, M, G...) the quantity wins (2G, 64m are
    # Kubernetes'); g, t, p are Docker's alone.
    assert parse_size_annotation(format_docker_size(n * GiB)) == n * GiB
