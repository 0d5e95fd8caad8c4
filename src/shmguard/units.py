"""Sizes: each runtime's own syntax <-> ``int`` bytes, exactly as that runtime parses it.

Every parser returns int bytes (or, for Kubernetes, an exact :class:`fractions.Fraction` through
:func:`parse_k8s_quantity` and int bytes through :func:`k8s_quantity_bytes`) and raises
:class:`SizeError` whose message is the runtime's own error text where one exists.

Sources (see ../shared/research/config_formats.md, sections 0, 4.3, 5, 9):

* Docker, Compose, Podman: ``github.com/docker/go-units`` ``RAMInBytes``. v0.5.0+ (Docker CLI
  >= 23.0, moby, compose-go) scans by hand and calls ``strconv.ParseFloat``; v0.4.0 (Docker CLI
  <= 20.10, Podman 4.x) matches the regex ``^(\\d+(\\.\\d+)*) ?([kKmMgGtTpP])?[iI]?[bB]?$`` and so
  accepts ``2Gi`` which v0.5.0 rejects with ``invalid suffix: 'gi'``. Units are binary:
  ``1gb`` = 1 GiB.
* Kubernetes: ``k8s.io/apimachinery/pkg/api/resource/quantity.go``: binary ``Ki..Ei``, decimal
  ``n u m "" k M G T P E``, exponents ``e<n>``; ``m`` is milli; ``Value()`` rounds up.
* Kernel tmpfs ``size=``: ``memparse`` (base auto-detected by ``simple_strtoull``, suffixes
  ``k m g t p e`` any case) or ``N%`` of RAM; rounded up to whole pages (tmpfs(5),
  ``mm/shmem.c``).
* ECS / Batch ``sharedMemorySize`` and ``tmpfs[].size``: integer MiB (AWS API reference).
* shmguard's own ``shmguard.io/shm-size`` annotation: a Kubernetes quantity or a Docker size
  (:func:`parse_size_annotation`, the one parser ``check`` and the webhook share).
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4
PAGE_SIZE = 4096

#: Docker/containerd/CRI-O default /dev/shm (moby ``config.DefaultShmSize``, containerd CRI
#: ``defaultShmSize``, CRI-O ``DefaultShmSize``): 64 MiB.
DOCKER_DEFAULT_SHM = 64 * MiB
#: Podman default: containers.conf ``shm_size = "65536k"`` parsed with decimal ``FromHumanSize``.
PODMAN_DEFAULT_SHM = 65_536_000

_INT64_MAX = 2**63 - 1

#: Longest text any size or count is read from (characters, after trimming). 8 EiB is 19
#: digits, so 64 leaves room for every real spelling (``0.5Gi``, ``2147483648``, ``2e9``) and
#: keeps a pasted number from ever reaching ``int()``/``float()``/``Fraction()``: Python refuses
#: int strings of more than 4,300 digits with a ValueError, ``float()`` turns ``1e999`` into an
#: infinity that ``int()`` refuses with an OverflowError, and ``10 ** 9999999`` takes seconds.
SIZE_MAX_CHARS = 64
#: Most an exponent (``2e9``) may be before the value is bound to be out of range: the number
#: part is at most :data:`SIZE_MAX_CHARS` digits.
_EXP_MAX = 2 * SIZE_MAX_CHARS
_WHOLE = re.compile(rf"[0-9]{{1,{SIZE_MAX_CHARS}}}", re.ASCII)


def whole_number(text: str) -> int | None:
    """``int(text)`` when ``text`` (spaces around it trimmed) is 1 to :data:`SIZE_MAX_CHARS`
    ASCII digits; None otherwise (``str.isdigit()`` also takes ``²``, which ``int()`` refuses,
    and any length)."""
    t = text.strip()
    return int(t) if _WHOLE.fullmatch(t) else None


def check_size_length(text: str) -> None:
    """Raise :class:`SizeError` when ``text`` is longer than :data:`SIZE_MAX_CHARS`: the one
    length bound every size parser applies before it converts a number."""
    if len(text) > SIZE_MAX_CHARS:
        raise SizeError(
            f"size {shown_size_text(text)} is too long ({len(text)} characters, at most "
            f"{SIZE_MAX_CHARS})"
        )


def round_up(n: int, unit: int) -> int:
    """``n`` rounded up to a whole multiple of ``unit`` (both in bytes, ``unit`` > 0)."""
    return -(-n // unit) * unit


class SizeError(ValueError):
    """A size string that the named syntax rejects. ``str(err)`` is a one-line message."""


# --------------------------------------------------------------------------- go-units (Docker)

_GO_UNITS = {"k": KiB, "m": MiB, "g": GiB, "t": TiB, "p": 1024**5}
# strconv.ParseFloat's decimal syntax (hex floats are irrelevant for sizes and rejected here).
_GO_FLOAT = re.compile(
    r"[+-]?(?:\d+(?:_\d+)*(?:\.(?:\d+(?:_\d+)*)?)?|\.\d+(?:_\d+)*)(?:[eE][+-]?\d+)?",
    re.ASCII,  # Go's strconv and regexp take ASCII digits only; Python's \d takes any
)
_LEGACY_RE = re.compile(r"^(\d+(\.\d+)*) ?([kKmMgGtTpP])?[iI]?[bB]?$", re.ASCII)


def _go_parse_float(num: str) -> float:
    if not _GO_FLOAT.fullmatch(num):
        raise SizeError(f'strconv.ParseFloat: parsing "{num}": invalid syntax')
    value = float(num.replace("_", ""))
    if math.isinf(value):
        raise SizeError(f'strconv.ParseFloat: parsing "{num}": value out of range')
    return value


def _to_int64(value: float, text: str) -> int:
    if value >= 2.0**63:
        raise SizeError(f"size {text!r} overflows int64 (the runtime would store garbage)")
    return int(value)


def parse_docker_size(text: str, *, legacy: bool = False) -> int:
    """Parse a Docker/Compose/Podman byte size (``--shm-size``, ``shm_size``, ``mem_limit``).

    Args:
        text: the value as written, e.g. ``"64m"``, ``"1.5g"``, ``"2GiB"``, ``"1 g"``.
        legacy: parse as go-units <= v0.4.0 (Docker CLI <= 20.10, Podman 4.x) instead of
            v0.5.0+ (Docker CLI >= 23.0, compose-go).

    Returns:
        int bytes, truncated toward zero as ``int64(float64)`` does in Go.

    Raises:
        SizeError: with go-units' own message, e.g. ``invalid suffix: 'gi'``,
            ``invalid size: '-1'``, ``strconv.ParseFloat: parsing "1 ": invalid syntax``;
            shmguard's own "too long" past :data:`SIZE_MAX_CHARS` characters.
    """
    check_size_length(text)
    if legacy:
        m = _LEGACY_RE.match(text)
        if not m:
            raise SizeError(f"invalid size: '{text}'")
        value = _go_parse_float(m.group(1))
        value *= _GO_UNITS.get((m.group(3) or "").lower(), 1)
        return _to_int64(value, text)

    sep = max(text.rfind(c) for c in "0123456789. ")
    if sep == -1:
        raise SizeError(f"invalid size: '{text}'")
    if text[sep] != " ":
        num, sfx = text[: sep + 1], text[sep + 1 :]
    else:
        num, sfx = text[:sep], text[sep + 1 :]
    value = _go_parse_float(num)
    if value < 0:
        raise SizeError(f"invalid size: '{text}'")
    if not sfx:
        return _to_int64(value, text)
    if len(sfx) > 3:
        raise SizeError(f"invalid suffix: '{sfx}'")
    sfx = sfx.lower()
    if sfx[0] == "b":
        if len(sfx) > 1:
            raise SizeError(f"invalid suffix: '{sfx}'")
        return _to_int64(value, text)
    mul = _GO_UNITS.get(sfx[0])
    if mul is None or (len(sfx) == 2 and sfx[1] != "b") or (len(sfx) == 3 and sfx[1:] != "ib"):
        raise SizeError(f"invalid suffix: '{sfx}'")
    return _to_int64(value * mul, text)


def format_docker_size(n: int) -> str:
    """Write int bytes in go-units syntax that parses back to exactly ``n``: ``2g``, ``64m``,
    ``512k`` when evenly divisible (largest unit first), else the bare byte count.

    Raises:
        SizeError: for a negative ``n``.
    """
    if n < 0:
        raise SizeError(f"negative size: {n}")
    for suffix, mul in (("t", TiB), ("g", GiB), ("m", MiB), ("k", KiB)):
        if n and n % mul == 0:
            return f"{n // mul}{suffix}"
    return str(n)


# ----------------------------------------------------------------------- Kubernetes quantity

_K8S_RE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_K8S_REGEX_ERR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_K8S_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_K8S_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


#: Quantity text -> its value, for texts of at most :data:`_MEMO_CHARS` characters (the same
#: ``8Gi`` recurs in every pod of a stream: parsing through Fraction was a tenth of checking a
#: 96k-Pod stream); cleared when it holds :data:`_MEMO_MAX`.
_QUANTITIES: dict[str, Fraction] = {}
_MEMO_CHARS = 64
_MEMO_MAX = 4096


def parse_k8s_quantity(text: str) -> Fraction:
    """Parse a Kubernetes resource quantity exactly (``2Gi``, ``2G``, ``64m`` = 0.064, ``2e9``);
    memoised for short texts (a Fraction is immutable).

    Returns:
        the exact value as a Fraction (memory: bytes; ``m`` is milli, not mega).

    Raises:
        SizeError: with apimachinery's message: the regex error, ``unable to parse quantity's
            suffix`` (``2K``) or ``unable to parse numeric part of quantity``; shmguard's own
            "too long" past :data:`SIZE_MAX_CHARS` characters and "more than 8 EiB" for a
            magnitude above 2^63 - 1 (``100Ei``, ``1e999``): apimachinery caps a quantity
            there, so the value written is not the value applied.

    An exponent below ``-`` :data:`_EXP_MAX` is read as ``-_EXP_MAX``: the value is then
    below 10^-64 either way, and its sign, its zero-ness and :func:`k8s_quantity_bytes` (which
    rounds up) are the same, without computing ``10 ** 9999999``.
    """
    got = _QUANTITIES.get(text)
    if got is None:
        got = _parse_k8s_quantity(text)
        if len(text) <= _MEMO_CHARS:
            if len(_QUANTITIES) >= _MEMO_MAX:
                _QUANTITIES.clear()
            _QUANTITIES[text] = got
    return got


def _parse_k8s_quantity(text: str) -> Fraction:
    """:func:`parse_k8s_quantity`, not memoised."""
    text = text.strip()  # UnmarshalJSON trims spaces around the whole value
    check_size_length(text)
    m = _K8S_RE.match(text)
    if not m:
        raise SizeError(_K8S_REGEX_ERR)
    num, suffix = m.group(1), m.group(2)
    try:
        value = Fraction(num)
    except (ValueError, ZeroDivisionError):
        raise SizeError("unable to parse numeric part of quantity") from None
    if suffix in _K8S_BINARY:
        return _k8s_in_range(value * _K8S_BINARY[suffix])
    if suffix in _K8S_DECIMAL:
        return _k8s_in_range(value * _K8S_DECIMAL[suffix])
    if len(suffix) > 1 and suffix[0] in "eE":
        try:
            exp = int(suffix[1:])  # at most SIZE_MAX_CHARS characters
        except ValueError:
            raise SizeError("unable to parse quantity's suffix") from None
        if value and exp > _EXP_MAX:
            raise SizeError(_K8S_TOO_LARGE)
        return _k8s_in_range(value * Fraction(10) ** max(exp, -_EXP_MAX))
    raise SizeError("unable to parse quantity's suffix")


_K8S_TOO_LARGE = "more than 8 EiB (2^63 - 1 bytes), the most a Kubernetes quantity holds"


def _k8s_in_range(value: Fraction) -> Fraction:
    if abs(value) > _INT64_MAX:
        raise SizeError(_K8S_TOO_LARGE)
    return value


def k8s_quantity_bytes(text: str) -> int:
    """Bytes of a memory quantity as the kubelet uses it: ``Quantity.Value()``, rounded up.

    Raises:
        SizeError: as :func:`parse_k8s_quantity`.
    """
    if type(text) is str:  # (the same few quantities, every container of a big stream)
        return _k8s_bytes(text)
    return math.ceil(parse_k8s_quantity(text))


@functools.lru_cache(maxsize=1024)
def _k8s_bytes(text: str) -> int:
    return math.ceil(parse_k8s_quantity(text))


def format_k8s_quantity(n: int) -> str:
    """Write int bytes as a Kubernetes quantity that means exactly ``n``: the largest binary
    suffix that divides (``2Gi``, ``1536Mi``), else the plain integer; a decimal suffix
    instead only where it is shorter (2,000,000,000 bytes, a ``2G`` the user wrote, is ``2G``,
    not ``1953125Ki``).

    Raises:
        SizeError: for a negative ``n``.
    """
    if type(n) is int:  # (not a bool, whose str differs: the same few sizes, every fix)
        return _format_k8s(n)
    return _format_k8s_quantity(n)


@functools.lru_cache(maxsize=1024)
def _format_k8s(n: int) -> str:
    return _format_k8s_quantity(n)


def _format_k8s_quantity(n: int) -> str:
    if n < 0:
        raise SizeError(f"negative size: {n}")
    best = str(n)
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        mul = _K8S_BINARY[suffix]
        if n and n % mul == 0:
            best = f"{n // mul}{suffix}"
            break
    for suffix in ("P", "T", "G", "M", "k"):  # not E: SHM005 reads an E quantity as a typo
        mul = int(_K8S_DECIMAL[suffix])
        if n and n % mul == 0:
            decimal = f"{n // mul}{suffix}"
            return decimal if len(decimal) < len(best) else best
    return best


# ------------------------------------------------------------------- the size annotation

#: Longest ``shmguard.io/shm-size`` value read: :data:`SIZE_MAX_CHARS`.
SIZE_ANNOTATION_MAX_CHARS = SIZE_MAX_CHARS
#: The accepted forms of ``shmguard.io/shm-size``, said once in each of its errors.
SIZE_ANNOTATION_FORMS = (
    "write a quantity (2Gi, 1500Mi; 2G is 2,000,000,000 bytes), a Docker size (2g = 2gb = "
    "2 GiB) or bytes"
)
#: Kubernetes' sub-unit suffixes (``quantity.go``): a memory size in them is below a byte.
_K8S_SUB_UNIT = {"m": "milli", "u": "micro", "n": "nano"}


def shown_size_text(text: str) -> str:
    """``text`` quoted for a message about it (``'2gi'``), cut to 24 characters so that a
    5,000-digit value stays one readable line: ``'99999999999999999999'... (5000 characters)``."""
    return repr(text) if len(text) <= 24 else repr(text[:20]) + f"... ({len(text)} characters)"


def parse_size_annotation(text: str) -> int:
    """Bytes of a ``shmguard.io/shm-size`` annotation or label: the one parser ``check``
    (``--fix``) and the webhook read it with (through
    :func:`shmguard.estimate.decide.choose_shm`'s ``configured`` slot).

    Accepted, first that parses: a Kubernetes quantity (:func:`parse_k8s_quantity`: ``2Gi``,
    ``1500Mi``, ``2G`` = 2,000,000,000 bytes, ``2e9``, ``1.5k`` = 1500), then a Docker size
    (:func:`parse_docker_size`, go-units v0.5: ``2g`` = ``2gb`` = 2 GiB, ``2K`` = 2 KiB).
    Where both syntaxes know a suffix (``k``, ``m``, ``M``, ``G``...) the quantity's meaning
    wins; a plain number is bytes in both.

    Returns:
        int bytes, 1 to 2^63 - 1.

    Raises:
        SizeError: one line saying what is wrong and the accepted forms (the caller names the
            annotation and the value, :func:`shown_size_text`): empty or longer than
            :data:`SIZE_ANNOTATION_MAX_CHARS`; a Kubernetes ``m``/``u``/``n`` suffix (``1m``
            is 0.001 bytes: milli, not mebi); not a whole number of bytes (``0.5``, ``1.5``);
            zero or negative; above 8 EiB (2^63 - 1 bytes, the int64 every runtime stores,
            ``1e999``); neither syntax.
    """
    t = text.strip()
    if not t:
        raise SizeError(f"empty; {SIZE_ANNOTATION_FORMS}")
    if len(t) > SIZE_ANNOTATION_MAX_CHARS:
        raise SizeError(
            f"too long for a size ({len(t)} characters, at most {SIZE_ANNOTATION_MAX_CHARS}); "
            f"{SIZE_ANNOTATION_FORMS}"
        )
    if not t.isascii():
        raise SizeError(f"use ASCII digits and letters; {SIZE_ANNOTATION_FORMS}")
    value = _k8s_annotation(t)
    if value is None:
        try:
            value = parse_docker_size(t)
        except SizeError:
            raise SizeError(
                f"neither a Kubernetes quantity nor a Docker size; {SIZE_ANNOTATION_FORMS}"
            ) from None
    if value <= 0:
        raise SizeError(f"a size must be greater than 0; {SIZE_ANNOTATION_FORMS}")
    if value > _INT64_MAX:
        raise SizeError(f"more than 8 EiB (2^63 - 1 bytes); {SIZE_ANNOTATION_FORMS}")
    return value


def _k8s_annotation(t: str) -> int | None:
    """Bytes of ``t`` read as a Kubernetes quantity, or None when it is none (for the Docker
    syntax to try). Raises :class:`SizeError` for a quantity that is no size of /dev/shm."""
    m = _K8S_RE.match(t)
    if not m:
        return None
    num, suffix = m.group(1), m.group(2)
    if suffix in _K8S_SUB_UNIT:
        what = _K8S_SUB_UNIT[suffix]
        hint = f"; {num}Mi or {num}mb is {num} MiB" if suffix == "m" else ""
        raise SizeError(
            f"{suffix} is {what} in a Kubernetes quantity, not mebi ({num}{suffix} is {num} "
            f"{what}bytes){hint}; {SIZE_ANNOTATION_FORMS}"
        )
    if len(suffix) > 1 and suffix[0] in "eE" and suffix[1:].lstrip("+-").isdigit():
        exp = int(suffix[1:])  # at most 64 characters: far below int()'s digit limit
        if abs(exp) > _EXP_MAX:
            try:
                zero = Fraction(num) == 0
            except (ValueError, ZeroDivisionError):
                return None
            if zero:
                return 0
            what = "more than 8 EiB (2^63 - 1 bytes)" if exp > 0 else "less than one byte"
            raise SizeError(f"{what}; {SIZE_ANNOTATION_FORMS}")
    try:
        exact = parse_k8s_quantity(t)
    except SizeError as e:
        if str(e) == _K8S_TOO_LARGE:
            raise SizeError(f"more than 8 EiB (2^63 - 1 bytes); {SIZE_ANNOTATION_FORMS}") from None
        return None
    if 0 < exact < 1:
        raise SizeError(f"less than one byte; {SIZE_ANNOTATION_FORMS}")
    if exact.denominator != 1:
        raise SizeError(f"not a whole number of bytes; {SIZE_ANNOTATION_FORMS}")
    return int(exact)


# ----------------------------------------------------------------------------- kernel tmpfs

_MEMPARSE = {"k": 10, "m": 20, "g": 30, "t": 40, "p": 50, "e": 60}
_STRTOULL = re.compile(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def parse_tmpfs_size(text: str, mem_total: int | None = None) -> int:
    """Parse a tmpfs ``size=`` mount option as the kernel does, rounded up to whole pages.

    Args:
        text: ``"8g"``, ``"65536k"``, ``"50%"``, ``"0x1000"`` (base is auto-detected).
        mem_total: RAM in bytes, required for ``%`` values (the kernel uses totalram pages).

    Returns:
        int bytes; 0 means *unlimited* (tmpfs(5)).

    Raises:
        SizeError: ``Bad value for 'size'`` (the kernel's fs_context error) for ``8gb``, ``8Gi``,
            ``8 g`` and the like, or when ``%`` is used without ``mem_total``; "too long"
            past :data:`SIZE_MAX_CHARS` characters.
    """
    check_size_length(text)
    m = _STRTOULL.match(text)
    if not m:
        raise SizeError(f"Bad value for 'size': {text!r}")
    digits = m.group(1)
    if digits[:2].lower() == "0x":
        value = int(digits, 16)
    elif len(digits) > 1 and digits[0] == "0":
        value = int(digits, 8)
    else:
        value = int(digits)
    rest = text[m.end() :]
    if rest[:1].lower() in _MEMPARSE and rest:
        value <<= _MEMPARSE[rest[0].lower()]
        rest = rest[1:]
    if rest == "%":
        if mem_total is None:
            raise SizeError(f"size={text} is relative to RAM, and RAM is unknown")
        pages = mem_total // PAGE_SIZE
        value = (value * PAGE_SIZE * pages) // 100
        rest = ""
    if rest:
        raise SizeError(f"Bad value for 'size': {text!r}")
    return round_up(value, PAGE_SIZE)


# ------------------------------------------------------------------------------- ECS (MiB)


def parse_ecs_mib(value: int | str) -> int:
    """Bytes of an ECS/Batch ``sharedMemorySize`` or ``tmpfs[].size`` (an integer in MiB).

    Raises:
        SizeError: for anything but a non-negative integer (ECS's JSON type is Integer).
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SizeError(f"expected an integer number of MiB, got {value!r}")
    if isinstance(value, str):
        check_size_length(value)
        n = whole_number(value) if value == value.strip() else None
        if n is None:
            raise SizeError(f"expected an integer number of MiB, got {value!r}")
        value = n
    if value < 0:
        raise SizeError(f"expected a non-negative number of MiB, got {value}")
    return value * MiB


def format_ecs_mib(n: int) -> int:
    """MiB for ECS ``sharedMemorySize``/``memory``, rounded up so nothing is lost."""
    return round_up(n, MiB) // MiB


# ------------------------------------------------------------------------- human and flags

_IEC = (("PiB", 2**50), ("TiB", 2**40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB))


def format_iec(n: int) -> str:
    """Human-readable IEC size: ``64 MiB``, ``62.5 MiB``, ``1.5 GiB``, ``512 B``.

    Up to two decimals, trailing zeros dropped; a rounded value is prefixed with ``~``.
    """
    sign = "-" if n < 0 else ""
    a = abs(n)
    for unit, mul in _IEC:
        if a >= mul:
            exact = a % mul == 0
            text = f"{a / mul:.2f}".rstrip("0").rstrip(".")
            approx = "" if exact or Fraction(text) * mul == a else "~"
            return f"{approx}{sign}{text} {unit}"
    return f"{sign}{a} B"


_IEC_FLAG = re.compile(r"^(\d+(?:\.\d+)?) ?([KMGTP])i(?:B)?$", re.IGNORECASE | re.ASCII)
#: A number and a unit word, to say what is wrong with a rejected size flag.
_FLAG_SHAPE = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)? ?([A-Za-z]*)", re.ASCII)
#: Units :func:`parse_size_flag` takes (go-units' and the IEC forms), lower case.
_FLAG_UNITS = {"", "b"} | {f"{u}{tail}" for u in "kmgtp" for tail in ("", "b", "i", "ib")}
#: The accepted forms, said once in every size flag error.
SIZE_FLAG_FORMS = (
    "write one number and an optional unit: 64m, 1.5g, 512Mi, 1Gi or a byte count "
    "(k, m, g, t, p are binary: 1g = 1gb = 1 GiB)"
)


def parse_size_flag(text: str, *, allow_zero: bool = False) -> int:
    """Parse one of shmguard's own size options (``--shm-size``, ``--require``, ``--memory``).

    Accepts Docker's go-units syntax (``64m``, ``1g``, ``1gb`` = 1 GiB, bare bytes) and the
    unambiguous IEC forms (``64Mi``, ``1Gi``, ``64MiB``, ``1 GiB``).

    Raises:
        SizeError: one line in shmguard's own words (not go-units' ``strconv.ParseFloat``
            texts, which belong to a Docker configuration): what is wrong, the accepted forms,
            and "did you mean" where a fix is clear.
    """
    raw = text
    text = text.strip()
    if len(text) > SIZE_MAX_CHARS:
        raise SizeError(f"invalid size {shown_size_text(raw)}: too long; {SIZE_FLAG_FORMS}")
    m = _IEC_FLAG.match(text)
    if m:
        value = int(float(m.group(1)) * _GO_UNITS[m.group(2).lower()])
    else:
        try:
            value = parse_docker_size(text)
        except SizeError:
            hint = _suggest(text)
            extra = f"; did you mean {hint!r}?" if hint and hint != text else ""
            problem = _flag_problem(text)
            what = f": {problem}" if problem else ""
            raise SizeError(f"invalid size {raw!r}{what}; {SIZE_FLAG_FORMS}{extra}") from None
    if value == 0 and not allow_zero:
        raise SizeError(f"invalid size {raw!r}: must be greater than 0")
    return value


def _flag_problem(text: str) -> str | None:
    """What is wrong with a size flag that go-units rejected, in plain words; None when it is
    not the shape of a size at all (the accepted forms say enough)."""
    if not text:
        return "empty"
    if text.startswith("-"):
        return "must not be negative"
    if not text.isascii():
        return "use ASCII digits and letters"
    shape = _FLAG_SHAPE.fullmatch(text)
    if shape is None:
        return None
    if shape.group(1).lower() not in _FLAG_UNITS:
        return f"unknown unit {shape.group(1)!r}"
    return "too large (more than 8 EiB)"


def _suggest(text: str) -> str | None:
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp])", text, re.IGNORECASE | re.ASCII)
    if not m:
        return None
    return f"{m.group(1)}{m.group(2).lower()}"


# --------------------------------------------------------------------------- durations

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_TOKEN = re.compile(r"([\d.]+)([^\d.]*)", re.ASCII)
_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+", re.ASCII)
DURATION_FORMS = "write e.g. 30s, 2m, 1m30s, 1.5h or a number of seconds"


class DurationError(ValueError):
    """A duration string shmguard does not accept. ``str(err)`` is a one-line message."""


def parse_duration(text: str) -> float:
    """Parse one of shmguard's duration options (``--trial-time``) into seconds (> 0).

    Accepts a bare number of seconds (``90``, ``2.5``, as the seconds options take) or Go's
    ``time.ParseDuration`` form, which Docker's ``--health-interval`` and Compose's
    ``healthcheck.interval`` use: a sequence of decimal numbers each with a unit, ``300ms``,
    ``30s``, ``2m``, ``1m30s``, ``1.5h`` (pkg.go.dev/time#ParseDuration; shmguard leaves out
    ``ns``/``us`` and signs, which no run time needs).

    Raises:
        DurationError: empty, negative, zero, not finite, an unknown unit, or not a duration.
    """
    raw = text
    text = text.strip()
    if not text:
        raise DurationError(f"invalid duration {raw!r}: empty; {DURATION_FORMS}")
    if text.startswith("-"):
        raise DurationError(f"invalid duration {raw!r}: must not be negative; {DURATION_FORMS}")
    try:
        seconds = float(text)
    except ValueError:
        seconds = _go_duration(raw, text)
    if not math.isfinite(seconds):
        raise DurationError(f"invalid duration {raw!r}: must be finite; {DURATION_FORMS}")
    if seconds <= 0:
        raise DurationError(f"invalid duration {raw!r}: must be greater than 0")
    return seconds


def _go_duration(raw: str, text: str) -> float:
    total, pos = 0.0, 0
    for m in _DURATION_TOKEN.finditer(text):
        num, unit = m.groups()
        if m.start() != pos or not _NUMBER.fullmatch(num):
            break
        if not unit:
            raise DurationError(
                f"invalid duration {raw!r}: no unit after {num!r}; {DURATION_FORMS}"
            )
        if unit != unit.strip() or " " in unit:
            raise DurationError(f"invalid duration {raw!r}: no spaces; {DURATION_FORMS}")
        if unit not in _DURATION_UNITS:
            raise DurationError(
                f"invalid duration {raw!r}: unknown unit {unit!r}; {DURATION_FORMS}"
            )
        total += float(num) * _DURATION_UNITS[unit]
        pos = m.end()
    if pos != len(text) or pos == 0:
        raise DurationError(f"invalid duration {raw!r}; {DURATION_FORMS}")
    return total
