"""Parse quantities with units, as people write them in cluster files.

Numbers are SI throughout gnplace (bytes, seconds, FLOP/s, bytes/s); these helpers let a YAML file
say ``12 GiB``, ``7.6 GB/s``, ``128 Gbit/s``, ``25 us`` or ``2.8 TFLOP/s`` instead.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation, localcontext

__all__ = [
    "parse_bytes", "parse_seconds", "parse_rate", "parse_flops", "format_bytes", "format_seconds", "format_flops",
    "format_rate", "seconds_unit", "counted",
]

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}


def _split(value: object, what: str) -> tuple[Decimal, str]:
    # numbers are kept as exact decimals until the one final rounding to float, so that
    # "25 us" is exactly 25e-6 and "4.1 MB" exactly 4.1e6 (4.1 * 1e6 and 25 * 1e-6 are not)
    if isinstance(value, bool):
        raise ValueError(f"expected {what}, got {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(value), ""
    if not isinstance(value, str):
        raise ValueError(f"expected {what}, got {value!r}")
    match = re.fullmatch(_NUMBER + r"\s*([A-Za-z/]*)", value.strip())
    if match is None:
        raise ValueError(f"expected {what}, got {value!r}")
    try:
        return Decimal(match.group(1)), match.group(2)
    except InvalidOperation:  # an exponent beyond any float
        raise ValueError(f"expected {what}, got {value!r}") from None


def _times(number: Decimal, *factors: float | Decimal) -> float:
    """``number`` times ``factors``, computed exactly and rounded to float once."""
    if not number.is_finite() or abs(number.adjusted()) > 1000:  # nan, inf, 0 or inf as a float anyway
        result = float(number)
        for factor in factors:
            result *= float(factor)
        return result
    with localcontext() as ctx:
        ctx.prec = 80
        for factor in factors:
            number = number * Decimal(factor)
        return float(number)


def _scaled(
    number: Decimal, unit: str, bases: dict[str, float], what: str, raw: object, *, binary: bool = True
) -> float:
    # binary prefixes (KiB, Gibit/s) are for bytes and bits only: no one counts FLOP in powers of two
    for base, factor in sorted(bases.items(), key=lambda kv: -len(kv[0])):
        if unit.endswith(base):
            prefix = unit[: len(unit) - len(base)]
            if binary and prefix in _BINARY:
                return _times(number, _BINARY[prefix], factor)
            if prefix in _PREFIX:
                return _times(number, _PREFIX[prefix], factor)
    raise ValueError(f"expected {what}, got {raw!r} (unknown unit {unit!r})")


def _finite(x: float, what: str, raw: object) -> float:
    if not math.isfinite(x):
        raise ValueError(f"expected {what}, got {raw!r}")
    return x


def parse_bytes(value: object) -> float:
    """Parse a size in bytes: a number, or a string such as ``"12 GiB"`` or ``"512MB"``.

    Examples:
        >>> parse_bytes("2 KiB"), parse_bytes(1e9), parse_bytes("1.5GB")
        (2048.0, 1000000000.0, 1500000000.0)
    """
    number, unit = _split(value, "a size such as 16e9 or '16 GiB'")
    if unit in ("", "B"):
        return _finite(_times(number), "a size", value)
    return _finite(_scaled(number, unit, {"B": 1.0}, "a size such as '16 GiB'", value), "a size", value)


def parse_seconds(value: object) -> float:
    """Parse a duration in seconds: a number, or ``"25 us"``, ``"5.7us"``, ``"1 ms"``, ``"2 s"``.

    Examples:
        >>> parse_seconds("25 us"), parse_seconds("1ms"), parse_seconds(0.5)
        (2.5e-05, 0.001, 0.5)
    """
    number, unit = _split(value, "a duration such as 2.5e-5 or '25 us'")
    scale = {"": "1", "s": "1", "ms": "1e-3", "us": "1e-6", "ns": "1e-9"}
    if unit not in scale:
        raise ValueError(f"expected a duration such as '25 us', got {value!r} (unknown unit {unit!r})")
    return _finite(_times(number, Decimal(scale[unit])), "a duration", value)


def parse_rate(value: object) -> float:
    """Parse a bandwidth in bytes per second: ``"7.6 GB/s"``, ``"128 Gbit/s"`` or a number.

    Examples:
        >>> parse_rate("128 Gbit/s"), parse_rate("7.6 GB/s"), parse_rate(1e9)
        (16000000000.0, 7600000000.0, 1000000000.0)
    """
    number, unit = _split(value, "a bandwidth such as 16e9 or '16 GB/s'")
    if unit in ("", "B/s"):
        return _finite(_times(number), "a bandwidth", value)
    bases = {"B/s": 1.0, "bit/s": 0.125, "bps": 0.125}
    return _finite(_scaled(number, unit, bases, "a bandwidth such as '16 GB/s'", value), "a bandwidth", value)


def parse_flops(value: object) -> float:
    """Parse a compute rate in FLOP/s: ``"2.8 TFLOP/s"``, ``"289 GFLOPS"`` or a number.

    Examples:
        >>> parse_flops("2.8 TFLOP/s"), parse_flops("289GFLOPS")
        (2800000000000.0, 289000000000.0)
    """
    number, unit = _split(value, "a compute rate such as 2.8e12 or '2.8 TFLOP/s'")
    if unit in ("", "FLOP/s", "FLOPS"):
        return _finite(_times(number), "a compute rate", value)
    bases = {"FLOP/s": 1.0, "FLOPS": 1.0}
    scaled = _scaled(number, unit, bases, "a compute rate such as '2.8 TFLOP/s'", value, binary=False)
    return _finite(scaled, "a compute rate", value)


def format_bytes(value: float) -> str:
    """Bytes in the largest binary unit that keeps the number at least 1, e.g. ``"1.50 GiB"``.

    A size under 1 KiB is shown in bytes (``"12 B"``), so that no size prints as zero of a larger unit.

    Examples:
        >>> format_bytes(1536), format_bytes(3 * 2**30), format_bytes(12)
        ('1.50 KiB', '3.00 GiB', '12 B')
    """
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def format_seconds(value: float) -> str:
    """Seconds in the largest of s, ms, us and ns that keeps the number at least 1, e.g. ``"17.580 ms"``.

    Zero is ``"0 s"``; a duration under 1 ns is shown in ns (``"0.500 ns"``), so that no duration over
    0.5 ps prints as zero. ``us`` is written as cluster files write it (:func:`parse_seconds` reads it).

    Examples:
        >>> format_seconds(0.017580), format_seconds(2.5), format_seconds(1e-9), format_seconds(0.0)
        ('17.580 ms', '2.500 s', '1.000 ns', '0 s')
    """
    if value == 0:
        return "0 s"
    if not math.isfinite(value):  # NaN compares below every unit: it printed as "nan ns"
        return f"{value} s"
    unit = seconds_unit(value)
    return f"{value / _SECOND_SIZES[unit]:.3f} {unit}"


#: Seconds in each unit :func:`format_seconds` writes, the largest first.
_SECOND_SIZES = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def seconds_unit(value: float) -> str:
    """The unit :func:`format_seconds` writes ``value`` seconds in: s, ms, us or ns (s for zero and a non-number).

    Examples:
        >>> seconds_unit(0.0175), seconds_unit(15e-6), seconds_unit(21_428.0), seconds_unit(5e-10), seconds_unit(0)
        ('ms', 'us', 's', 'ns', 's')
    """
    if value == 0 or not math.isfinite(value):
        return "s"
    return next((unit for unit, size in _SECOND_SIZES.items() if abs(value) >= size), "ns")


def format_rate(value: float) -> str:
    """A bandwidth in bytes per second in the largest SI unit (kB/s to TB/s) that keeps it at least 1: ``"12.00 GB/s"``.

    Written as cluster files write it (:func:`parse_rate` reads it back).

    A rate under 1 kB/s is shown in B/s, so that no measured link prints as ``0.00 GB/s``; a value that is no finite
    number as it is.

    Examples:
        >>> format_rate(12e9), format_rate(1.5e6), format_rate(800), format_rate(0)
        ('12.00 GB/s', '1.50 MB/s', '800 B/s', '0 B/s')
    """
    return _format_si(value, "B/s", 2, "TGMk")


def format_flops(value: float) -> str:
    """A FLOP count in the largest SI unit (k, M, G, T, P) that keeps the number at least 1, e.g. ``"1.360 MFLOP"``.

    A count under 1,000 is shown whole (``"512 FLOP"``), so that no count prints as zero of a larger unit
    (a small model's updates showed as ``0.000 GFLOP``); a value that is no finite number as it is.

    Examples:
        >>> format_flops(1_360_032), format_flops(4.626e9), format_flops(512), format_flops(0)
        ('1.360 MFLOP', '4.626 GFLOP', '512 FLOP', '0 FLOP')
    """
    return _format_si(value, "FLOP", 3, "PTGMk")


def _format_si(value: float, unit: str, decimals: int, prefixes: str) -> str:
    """``value`` of ``unit`` scaled by the largest of ``prefixes`` (SI, :data:`_PREFIX`) that keeps it at least 1.

    With ``decimals`` decimals; under 1,000 whole and unscaled, and a value that is no finite number as it is.
    """
    if not math.isfinite(value):
        return f"{value} {unit}"
    for prefix in prefixes:
        if abs(value) >= _PREFIX[prefix]:
            return f"{value / _PREFIX[prefix]:.{decimals}f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, the noun plural (``plural``, default: ``noun`` + s) unless the count is one.

    For messages and summaries: "1 op", not "1 ops".

    Examples:
        >>> counted(1, "op"), counted(0, "group"), counted(17, "group"), counted(1, "entry", "entries")
        ('1 op', '0 groups', '17 groups', '1 entry')
    """
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
