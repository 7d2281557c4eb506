"""Tests of ``gnplace.units``: quantities with units as cluster files write them."""

from __future__ import annotations

import math

import pytest

from gnplace.units import counted, format_bytes, format_seconds, parse_bytes, parse_flops, parse_rate, parse_seconds


@pytest.mark.parametrize(
    "text, expected",
    [
        (12, 12.0),
        (1e9, 1e9),
        ("512", 512.0),
        ("512 B", 512.0),
        ("512B", 512.0),
        ("2 KiB", 2048.0),
        ("12 GiB", 12 * 2.0**30),
        ("1 MiB", 2.0**20),
        ("1 TiB", 2.0**40),
        ("1.5GB", 1.5e9),
        ("16 GB", 16e9),
        ("3 kB", 3e3),
        ("3 KB", 3e3),
        ("4.1 MB", 4.1e6),
        ("2 TB", 2e12),
        ("1 PB", 1e15),
        (" 7 MB ", 7e6),
        ("1e3 KB", 1e6),
        (".5 GB", 5e8),
        ("-1 GiB", -(2.0**30)),
        ("+2 KiB", 2048.0),  # a sign either way, as Python's float reads it
        ("16  GiB", 16 * 2.0**30),  # any space between number and unit
        ("3\tMB", 3e6),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (0.5, 0.5),
        ("2", 2.0),
        ("2 s", 2.0),
        ("1 ms", 1e-3),
        ("1ms", 1e-3),
        ("25 us", 25e-6),
        ("5.7us", 5.7e-6),
        ("10 us", 10e-6),
        ("3 ns", 3e-9),
        ("2.5e-5", 2.5e-5),
    ],
)
def test_parse_seconds(text, expected):
    assert parse_seconds(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (1e9, 1e9),
        ("7.6 GB/s", 7.6e9),
        ("16 GB/s", 16e9),
        ("128 Gbit/s", 16e9),
        ("8 Mbps", 1e6),
        ("100 B/s", 100.0),
        ("1 GiB/s", 2.0**30),
        ("12e9", 12e9),
    ],
)
def test_parse_rate(text, expected):
    assert parse_rate(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (2.8e12, 2.8e12),
        ("2.8 TFLOP/s", 2.8e12),
        ("289 GFLOPS", 289e9),
        ("289GFLOPS", 289e9),
        ("15.7 TFLOPS", 15.7e12),
        ("5 FLOP/s", 5.0),
        ("1e6", 1e6),
    ],
)
def test_parse_flops(text, expected):
    assert parse_flops(text) == expected


@pytest.mark.parametrize("tenths", range(1, 400, 7))
def test_decimal_quantities_are_exact(tenths):
    # "x.y <prefix>unit" is the float nearest x.y * 10**k, as if the user wrote "x.ye<k>"
    x = repr(tenths / 10)
    assert parse_bytes(f"{x} MB") == float(f"{x}e6")
    assert parse_bytes(f"{x} GB") == float(f"{x}e9")
    assert parse_rate(f"{x} GB/s") == float(f"{x}e9")
    assert parse_flops(f"{x} TFLOP/s") == float(f"{x}e12")
    assert parse_seconds(f"{x} us") == float(f"{x}e-6")
    assert parse_seconds(f"{x} ms") == float(f"{x}e-3")
    assert parse_seconds(f"{x} ns") == float(f"{x}e-9")


@pytest.mark.parametrize(
    "parse, value, match",
    [
        (parse_bytes, "12 GB/s", r"unknown unit 'GB/s'"),
        (parse_bytes, "12 XB", r"unknown unit 'XB'"),
        (parse_bytes, "12 kiB", r"unknown unit 'kiB'"),
        (parse_bytes, "12 b", r"unknown unit 'b'"),
        (parse_bytes, "lots", r"expected a size such as 16e9 or '16 GiB', got 'lots'"),
        (parse_bytes, "12 G iB", r"got '12 G iB'"),
        (parse_bytes, "", r"got ''"),
        (parse_bytes, None, r"got None"),
        (parse_bytes, True, r"got True"),
        (parse_bytes, [12], r"got \[12\]"),
        (parse_bytes, math.nan, r"expected a size, got nan"),
        (parse_bytes, math.inf, r"expected a size, got inf"),
        (parse_bytes, "inf", r"got 'inf'"),
        (parse_bytes, "nan GB", r"got 'nan GB'"),
        (parse_bytes, "1e400 B", r"expected a size, got '1e400 B'"),
        (parse_bytes, "1e99999999999999999999 KB", r"got '1e99999999999999999999 KB'"),
        (parse_seconds, "25 µs", r"expected a duration such as 2\.5e-5 or '25 us', got '25 µs'"),
        (parse_seconds, "2 min", r"unknown unit 'min'"),
        (parse_seconds, "2 GB", r"unknown unit 'GB'"),
        (parse_seconds, math.inf, r"expected a duration, got inf"),
        (parse_rate, "16 GB", r"unknown unit 'GB'"),
        (parse_rate, "16 Gb/s", r"unknown unit 'Gb/s'"),
        (parse_rate, False, r"got False"),
        (parse_flops, "2.8 TFLOP", r"unknown unit 'TFLOP'"),
        (parse_flops, "2.8 T", r"unknown unit 'T'"),
        (parse_flops, "fast", r"expected a compute rate such as 2\.8e12 or '2\.8 TFLOP/s', got 'fast'"),
    ],
)
def test_bad_quantities(parse, value, match):
    with pytest.raises(ValueError, match=match):
        parse(value)


def test_results_are_floats():
    for value in (parse_bytes(12), parse_bytes("1 KiB"), parse_seconds(1), parse_rate("1 GB/s"), parse_flops(10)):
        assert type(value) is float


def test_every_decimal_prefix_has_its_binary_one_for_bytes():
    """"1 PB" was read and "1 PiB" refused as an unknown unit."""
    assert parse_bytes("1 PiB") == 2.0**50
    assert parse_bytes("0.5PiB") == 2.0**49
    assert parse_rate("2 PiB/s") == 2.0**51


@pytest.mark.parametrize("text", ["2 TiFLOP/s", "1 GiFLOPS", "3 KiFLOP/s"])
def test_a_compute_rate_with_a_binary_prefix_is_refused(text):
    """"2 TiFLOP/s" was read as 2 * 2**40 FLOP/s, 10% above 2 TFLOP/s: no one counts FLOP in powers of two."""
    with pytest.raises(ValueError, match=r"unknown unit"):
        parse_flops(text)


@pytest.mark.parametrize(
    ("num_bytes", "text"),
    [(0, "0 B"), (1, "1 B"), (1023, "1023 B"), (1024, "1.00 KiB"), (1.5 * 2**20, "1.50 MiB"), (2**40, "1.00 TiB")],
)
def test_format_bytes_never_shows_a_size_as_zero_of_a_larger_unit(num_bytes, text):
    assert format_bytes(num_bytes) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "0 s"), (1e-9, "1.000 ns"), (2.5e-6, "2.500 us"), (0.0123456, "12.346 ms"), (1.0, "1.000 s"),
     (-0.001, "-1.000 ms"), (5e-13, "0.001 ns")],
)
def test_format_seconds_picks_the_unit_that_shows_the_value(seconds, text):
    assert format_seconds(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [(math.nan, "nan s"), (math.inf, "inf s"), (-math.inf, "-inf s")])
def test_format_seconds_shows_a_value_that_is_no_number_in_seconds(seconds, text):
    """NaN is not >= any unit's size: it fell through to nanoseconds, "nan ns"."""
    assert format_seconds(seconds) == text


@pytest.mark.parametrize("seconds", [1e-9, 3.2e-7, 2.5e-6, 0.0123456, 1.0, 42.0])
def test_format_seconds_reads_back_with_parse_seconds(seconds):
    assert parse_seconds(format_seconds(seconds)) == pytest.approx(seconds, rel=1e-3)


@pytest.mark.parametrize("text, expected", [("70.3e-17 us", 7.03e-22), ("91.5e23 us", 9.15e18),
                                            ("60.6e30 ms", 6.06e28)])
def test_a_number_with_its_own_exponent_is_exact_too(text, expected):
    """Exponents up to 1000 are scaled exactly before the one rounding: 70.3e-17 * 1e-6 in floats is 7.0299...e-22."""
    assert parse_seconds(text) == expected


@pytest.mark.parametrize(
    ("flops", "text"),
    [(0, "0 FLOP"), (512, "512 FLOP"), (1000, "1.000 kFLOP"), (214_628, "214.628 kFLOP"), (1_360_032, "1.360 MFLOP"),
     (4.626e9, "4.626 GFLOP"), (2.5e12, "2.500 TFLOP"), (3e15, "3.000 PFLOP"), (math.nan, "nan FLOP")],
)
def test_format_flops_never_shows_a_count_as_zero_of_a_larger_unit(flops, text):
    """gnplace inspect and import printed every FLOP count in GFLOP: a small model's updates as 0.000 GFLOP."""
    from gnplace.units import format_flops

    assert format_flops(flops) == text


@pytest.mark.parametrize(("rate", "text"), [(0, "0 B/s"), (800, "800 B/s"), (1e6, "1.00 MB/s"), (1.5e6, "1.50 MB/s"),
                                            (12e9, "12.00 GB/s"), (2e12, "2.00 TB/s"), (math.inf, "inf B/s")])
def test_format_rate_never_shows_a_link_as_zero_of_a_larger_unit(rate, text):
    """gnplace profile printed every link's bandwidth in GB/s: a 1 MB/s link as 0.00 GB/s."""
    from gnplace.units import format_rate, parse_rate

    assert format_rate(rate) == text
    if 0 < rate < math.inf:
        assert parse_rate(text) == pytest.approx(rate, rel=5e-3)  # as a cluster file writes it


@pytest.mark.parametrize("seconds", [0.0, math.nan, math.inf, -math.inf])
def test_seconds_unit_is_seconds_for_zero_and_a_value_that_is_no_number(seconds):
    """As :func:`format_seconds` writes them ("0 s", "nan s"): NaN is not >= any unit's size, and fell to ns."""
    from gnplace.units import seconds_unit

    assert seconds_unit(seconds) == "s"


@pytest.mark.parametrize("count, expected", [(0, "0 entries"), (1, "1 entry"), (2, "2 entries")])
def test_counted_takes_an_irregular_plural(count, expected):
    """Messages said "1 entries" and "1 torch devices given"; a count of one takes the singular."""
    assert counted(count, "entry", "entries") == expected
    assert counted(count, "op") == expected.replace("entries", "ops").replace("entry", "op")
