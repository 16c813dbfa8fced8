"""Kubernetes quantities: exact parsing, engine units and the canonical text Kubernetes prints.

The expected values follow k8s.io/apimachinery ``pkg/api/resource/quantity.go`` and its
``quantity_test.go`` (tables ``TestQuantityParse``, ``TestQuantityString``, ``TestNewSet``,
``TestMilliNewSet``), read at commit 357557a6: the grammar in the ``Quantity`` doc comment, the
rounding to nano and the binary cap in ``ParseQuantity``, the ceilings in ``MilliValue``/``Value``,
and the format fall-backs in ``CanonicalizeBytes``.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from caldera.quantity import (
    QuantityError,
    format_binary,
    format_decimal,
    format_resource,
    parse_quantity,
    to_engine_units,
)

KI, MI, GI, TI, PI, EI = (1024**p for p in range(1, 7))
NANO = Fraction(1, 10**9)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1n", Fraction(1, 10**9), id="n is nano"),
        pytest.param("1u", Fraction(1, 10**6), id="u is micro"),
        pytest.param("1m", Fraction(1, 1000), id="m is milli"),
        pytest.param("1", Fraction(1), id="no suffix is the plain number"),
        pytest.param("1k", Fraction(10**3), id="lower-case k is kilo"),
        pytest.param("1M", Fraction(10**6), id="M is mega"),
        pytest.param("1G", Fraction(10**9), id="G is giga"),
        pytest.param("1T", Fraction(10**12), id="T is tera"),
        pytest.param("1P", Fraction(10**15), id="P is peta"),
        pytest.param("1E", Fraction(10**18), id="a lone E is exa, not an exponent"),
        pytest.param("1Ki", Fraction(KI), id="Ki is 2^10"),
        pytest.param("1Mi", Fraction(MI), id="Mi is 2^20"),
        pytest.param("1Gi", Fraction(GI), id="Gi is 2^30"),
        pytest.param("1Ti", Fraction(TI), id="Ti is 2^40"),
        pytest.param("1Pi", Fraction(PI), id="Pi is 2^50"),
        pytest.param("1Ei", Fraction(EI), id="Ei is 2^60"),
        pytest.param("7Mi", Fraction(7 * MI), id="a binary suffix multiplies the number"),
        pytest.param("50k", Fraction(50_000), id="a decimal suffix multiplies the number"),
    ],
)
def test_every_suffix_scales_exactly(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1e3", Fraction(1000), id="lower-case e exponent"),
        pytest.param("1E3", Fraction(1000), id="upper-case E followed by digits is an exponent"),
        pytest.param("1e+3", Fraction(1000), id="exponent with an explicit plus sign"),
        pytest.param("1E-3", Fraction(1, 1000), id="negative exponent"),
        pytest.param("1.5e3", Fraction(1500), id="fractional mantissa with exponent"),
        pytest.param("1.3E+6", Fraction(1_300_000), id="fractional mantissa with signed exponent"),
        pytest.param("0.5e-2", Fraction(5, 1000), id="exponent shrinking a fraction"),
        pytest.param("1e0", Fraction(1), id="zero exponent"),
    ],
)
def test_decimal_exponents(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("0.5", Fraction(1, 2), id="leading zero fraction"),
        pytest.param(".5", Fraction(1, 2), id="fraction without a leading digit"),
        pytest.param("1.", Fraction(1), id="trailing dot with no fraction digits"),
        pytest.param("1.G", Fraction(10**9), id="trailing dot before a suffix"),
        pytest.param("1.5Gi", Fraction(1_610_612_736), id="fractional binary quantity"),
        pytest.param("0.5Mi", Fraction(MI // 2), id="half a mebibyte"),
        pytest.param("100.035k", Fraction(100_035), id="fraction times kilo is whole"),
        pytest.param("0.0005k", Fraction(1, 2), id="tiny fraction times kilo"),
        pytest.param("0.1", Fraction(1, 10), id="one tenth is exact, not a float"),
        pytest.param("+1", Fraction(1), id="explicit plus sign"),
        pytest.param("-1", Fraction(-1), id="negative number"),
        pytest.param("-.5Gi", Fraction(-GI // 2), id="negative fraction with binary suffix"),
        pytest.param("007", Fraction(7), id="leading zeros"),
        pytest.param("0", Fraction(0), id="zero"),
        pytest.param("-0", Fraction(0), id="negative zero is zero"),
        pytest.param("0Gi", Fraction(0), id="zero with a suffix"),
    ],
)
def test_fractional_and_signed_forms(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("3.001n", 4 * NANO, id="a value between nanos rounds up to the next nano"),
        pytest.param("0.9n", NANO, id="less than a nano becomes one nano, never zero"),
        pytest.param("0.5e-9", NANO, id="sub-nano through an exponent rounds up"),
        pytest.param("0.00000012345", 124 * NANO, id="extra decimals beyond nano round up"),
        pytest.param(".000000000001Ki", 2 * NANO, id="sub-nano binary fraction rounds up"),
        pytest.param("-0.9n", -NANO, id="negative values round away from zero"),
        pytest.param("1.5n", 2 * NANO, id="half a nano over rounds up"),
        pytest.param("123n", 123 * NANO, id="whole nanos are kept as they are"),
    ],
)
def test_values_finer_than_nano_round_away_from_zero(text: str, expected: Fraction) -> None:
    # ParseQuantity: "rounds non-zero values up to the minimum representable value".
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("9Ei", Fraction(2**63 - 1), id="9Ei is capped at the largest int64"),
        pytest.param("-9Ei", Fraction(-(2**63 - 1)), id="the cap applies to the magnitude"),
        pytest.param("7Ei", Fraction(7 * EI), id="7Ei is below the cap and stays exact"),
        pytest.param("10E", Fraction(10**19), id="decimal suffixes are not capped"),
    ],
)
def test_binary_quantities_are_capped_at_int64(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


def test_decimal_and_binary_giga_differ() -> None:
    assert parse_quantity("1G") == 1_000_000_000
    assert parse_quantity("1Gi") == 1_073_741_824
    assert parse_quantity("1G") != parse_quantity("1Gi")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(2, Fraction(2), id="YAML integer"),
        pytest.param(0.5, Fraction(1, 2), id="YAML float"),
        pytest.param(0.1, Fraction(1, 10), id="YAML float reads as the decimal it was written as"),
        pytest.param(1e-10, NANO, id="tiny YAML float rounds up to a nano like text does"),
        pytest.param(-3, Fraction(-3), id="negative integer"),
    ],
)
def test_numbers_from_yaml(value: float, expected: Fraction) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty string"),
        pytest.param("1x", id="unknown suffix"),
        pytest.param("1K", id="upper-case K is not a suffix"),
        pytest.param("1mi", id="mi is not a suffix"),
        pytest.param("0.1am", id="unknown two-letter suffix"),
        pytest.param("1i", id="a lone i is not a suffix"),
        pytest.param(".5i", id="a lone i after a fraction"),
        pytest.param("1.2.3", id="two decimal points"),
        pytest.param("1.1.M", id="two decimal points before a suffix"),
        pytest.param("1+1.0M", id="sign in the middle"),
        pytest.param("--1", id="double sign"),
        pytest.param("+-1", id="mixed double sign"),
        pytest.param("Mi", id="suffix without a number"),
        pytest.param("e3", id="exponent without a mantissa"),
        pytest.param(".", id="a lone dot"),
        pytest.param("-", id="a lone sign"),
        pytest.param("aoeu", id="letters"),
        pytest.param(" 1", id="leading space"),
        pytest.param("1 ", id="trailing space"),
        pytest.param("1\n", id="trailing newline"),
        pytest.param("1 Gi", id="space before the suffix"),
        pytest.param("1e", id="exponent marker without digits"),
        pytest.param("1e+", id="exponent sign without digits"),
        pytest.param("-3.01e-", id="negative exponent sign without digits"),
        pytest.param("1e1.5", id="fractional exponent"),
        pytest.param("1e3x", id="junk after the exponent"),
        pytest.param("1Gi3", id="digits after a binary suffix"),
        pytest.param("1Kii", id="binary suffix with extra letters"),
        pytest.param("1_000", id="underscore digit separators"),
        pytest.param("\u0661", id="non-ASCII digits"),
        pytest.param("1e101", id="exponent beyond any real quantity"),
    ],
)
def test_invalid_strings_are_rejected(text: str) -> None:
    # "Mi", "." and "-" slip through ParseQuantity's scanner as zero, but the quantity pattern that
    # Kubernetes publishes (and CRD validation enforces) rejects them; Caldera refuses them too.
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(True, id="boolean true"),
        pytest.param(False, id="boolean false"),
        pytest.param(None, id="null"),
        pytest.param(float("nan"), id="not a number"),
        pytest.param(float("inf"), id="infinity"),
        pytest.param([1], id="a list"),
        pytest.param({"cpu": 1}, id="a mapping"),
    ],
)
def test_values_that_are_not_quantities_are_rejected(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]


def test_quantity_error_is_a_value_error_naming_the_input() -> None:
    with pytest.raises(ValueError, match="'12q'"):
        parse_quantity("12q")


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        pytest.param("cpu", "1", 1000.0, id="one core is a thousand millicores"),
        pytest.param("cpu", "0.1", 100.0, id="a tenth of a core is 100m"),
        pytest.param("cpu", "100m", 100.0, id="millicores stay millicores"),
        pytest.param("cpu", "1500m", 1500.0, id="millicores above a core"),
        pytest.param("cpu", "1.0001m", 2.0, id="MilliValue rounds a partial millicore up"),
        pytest.param("cpu", "0.5m", 1.0, id="half a millicore rounds up to one"),
        pytest.param("cpu", "1n", 1.0, id="one nanocore still needs a millicore"),
        pytest.param("cpu", "250u", 1.0, id="microcores round up to a millicore"),
        pytest.param("cpu", "1e-3", 1.0, id="exponent form of a millicore"),
        pytest.param("cpu", "0", 0.0, id="zero cpu"),
        pytest.param("cpu", 2, 2000.0, id="integer cpu from YAML"),
        pytest.param("cpu", 0.25, 250.0, id="float cpu from YAML"),
        pytest.param("memory", "1Gi", float(GI), id="memory in bytes"),
        pytest.param("memory", "1G", 1e9, id="decimal gigabyte in bytes"),
        pytest.param("memory", "1.5Gi", 1_610_612_736.0, id="fractional gibibytes are whole bytes"),
        pytest.param("memory", "100m", 1.0, id="Value rounds a fraction of a byte up"),
        pytest.param("memory", "1.5", 2.0, id="one and a half bytes round up"),
        pytest.param("memory", "0.5Ki", 512.0, id="half a kibibyte"),
        pytest.param("ephemeral-storage", "10Gi", 10.0 * GI, id="ephemeral storage in bytes"),
        pytest.param("hugepages-2Mi", "4Mi", 4.0 * MI, id="huge pages in bytes"),
        pytest.param("nvidia.com/gpu", "2", 2.0, id="extended resources are counts"),
        pytest.param("nvidia.com/gpu", "500m", 1.0, id="a fractional count rounds up"),
        pytest.param("pods", "110", 110.0, id="pod slots are counts"),
    ],
)
def test_engine_units(resource: str, text: str | float, expected: float) -> None:
    value = to_engine_units(resource, text)
    assert isinstance(value, float)
    assert value == expected


@pytest.mark.parametrize(
    ("resource", "text"),
    [
        pytest.param("cpu", "-1", id="negative cpu"),
        pytest.param("cpu", "-1m", id="negative millicores"),
        pytest.param("memory", "-1Gi", id="negative memory"),
        pytest.param("nvidia.com/gpu", -1, id="negative integer count"),
        pytest.param("memory", "-1n", id="even a tiny negative amount"),
    ],
)
def test_engine_units_reject_negative_quantities(resource: str, text: str | float) -> None:
    with pytest.raises(QuantityError, match="negative"):
        to_engine_units(resource, text)


def test_engine_units_reject_invalid_text() -> None:
    with pytest.raises(QuantityError):
        to_engine_units("cpu", "1 core")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(Fraction(3, 2), "1500m", id="one and a half is 1500m"),
        pytest.param(2, "2", id="whole numbers have no suffix"),
        pytest.param(Fraction(1, 10), "100m", id="a tenth is 100m"),
        pytest.param(Fraction(1, 1000), "1m", id="one milli"),
        pytest.param(Fraction(27, 25), "1080m", id="1.08 is 1080m"),
        pytest.param(Fraction(1_234_567, 1000), "1234567m", id="the suffix stays milli"),
        pytest.param(1000, "1k", id="a thousand is 1k"),
        pytest.param(12_000, "12k", id="twelve thousand is 12k"),
        pytest.param(1200, "1200", id="1200 has no exact kilo form"),
        pytest.param(1_234_000, "1234k", id="the largest exact suffix is used"),
        pytest.param(300 * 10**6, "300M", id="three hundred mega"),
        pytest.param(10**9, "1G", id="one giga"),
        pytest.param(10**12, "1T", id="one tera"),
        pytest.param(10**18, "1E", id="one exa"),
        pytest.param(15 * 10**20, "1500E", id="exa with a larger mantissa"),
        pytest.param(10**21, "1e21", id="beyond exa Kubernetes writes an exponent"),
        pytest.param(10**22, "10e21", id="the exponent stays a multiple of three"),
        pytest.param(Fraction(1, 10**6), "1u", id="one micro"),
        pytest.param(Fraction(80, 10**6), "80u", id="eighty micro"),
        pytest.param(Fraction(1, 10**9), "1n", id="one nano"),
        pytest.param(Fraction(1080, 10**9), "1080n", id="nanos that are not whole micros"),
        pytest.param(Fraction(3, 2 * 10**9), "2n", id="finer than nano rounds up"),
        pytest.param(0, "0", id="zero has no suffix"),
        pytest.param(Fraction(-3, 2), "-1500m", id="negative values keep their sign"),
        pytest.param(0.1, "100m", id="a float is read as the decimal it prints as"),
        pytest.param(2.5, "2500m", id="a float with a fraction"),
    ],
)
def test_format_decimal_is_the_canonical_decimal_si_form(
    value: Fraction | float, expected: str
) -> None:
    assert format_decimal(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(GI, "1Gi", id="one gibibyte"),
        pytest.param(1536 * MI, "1536Mi", id="1.5Gi is printed as 1536Mi"),
        pytest.param(300 * MI, "300Mi", id="three hundred mebibytes"),
        pytest.param(6 * KI, "6Ki", id="six kibibytes"),
        pytest.param(1001 * GI, "1001Gi", id="not a whole tebibyte"),
        pytest.param(TI, "1Ti", id="one tebibyte"),
        pytest.param(PI, "1Pi", id="one pebibyte"),
        pytest.param(EI, "1Ei", id="one exbibyte"),
        pytest.param(1024 * EI, "1024Ei", id="no suffix beyond Ei"),
        pytest.param(KI, "1Ki", id="exactly 1024 is 1Ki"),
        pytest.param(1025, "1025", id="a whole number without a factor 1024 is plain"),
        pytest.param(1_500_000_000, "1500000000", id="decimal gigabytes are plain bytes"),
        pytest.param(10**9, "1000000000", id="one decimal gigabyte is plain bytes"),
        pytest.param(2560, "2560", id="two and a half kibibytes are plain bytes"),
        pytest.param(1023, "1023", id="below 1024 is printed in decimal"),
        pytest.param(1000, "1k", id="below 1024 uses decimal suffixes"),
        pytest.param(5, "5", id="small byte counts"),
        pytest.param(Fraction(1, 2), "500m", id="a fraction below one is decimal milli"),
        pytest.param(Fraction(1_234_567, 1000), "1234567m", id="a fraction above 1024 is decimal"),
        pytest.param(0, "0", id="zero"),
        pytest.param(-2 * KI, "-2Ki", id="negative whole kibibytes"),
        pytest.param(-KI, "-1Ki", id="minus 1024 is -1Ki"),
        pytest.param(-1000, "-1k", id="negative values above -1024 are decimal"),
        pytest.param(1536.0 * MI, "1536Mi", id="a whole float"),
    ],
)
def test_format_binary_is_the_canonical_binary_si_form(
    value: Fraction | float, expected: str
) -> None:
    assert format_binary(value) == expected


@pytest.mark.parametrize(
    ("resource", "engine_value", "expected"),
    [
        pytest.param("cpu", 1500.0, "1500m", id="cpu millicores"),
        pytest.param("cpu", 2000.0, "2", id="whole cores"),
        pytest.param("cpu", 100.0, "100m", id="a tenth of a core"),
        pytest.param("cpu", 64_000.0, "64", id="many cores"),
        pytest.param("cpu", 0.0, "0", id="no cpu"),
        pytest.param("memory", float(GI), "1Gi", id="memory in binary units"),
        pytest.param("memory", 1_610_612_736.0, "1536Mi", id="memory that is not whole Gi"),
        pytest.param("memory", 1.5e9, "1500000000", id="memory with no factor 1024"),
        pytest.param("memory", 512.0, "512", id="memory below 1024"),
        pytest.param("memory", 1000.0, "1k", id="memory below 1024 uses decimal suffixes"),
        pytest.param("ephemeral-storage", 10.0 * GI, "10Gi", id="ephemeral storage is binary"),
        pytest.param("hugepages-2Mi", 2.0 * MI, "2Mi", id="huge pages are binary"),
        pytest.param("nvidia.com/gpu", 2.0, "2", id="extended resources are decimal"),
        pytest.param("nvidia.com/gpu", 12_000.0, "12k", id="large counts use decimal suffixes"),
        pytest.param("pods", 110.0, "110", id="pod slots"),
        pytest.param("pods", 1024.0, "1024", id="counts never use binary suffixes"),
    ],
)
def test_format_resource(resource: str, engine_value: float, expected: str) -> None:
    assert format_resource(resource, engine_value) == expected


@pytest.mark.parametrize(
    ("resource", "text"),
    [
        pytest.param("cpu", "1500m", id="millicores"),
        pytest.param("cpu", "2", id="whole cores"),
        pytest.param("cpu", "100m", id="a tenth of a core"),
        pytest.param("memory", "1536Mi", id="mebibytes"),
        pytest.param("memory", "1Gi", id="gibibytes"),
        pytest.param("memory", "1500000000", id="plain bytes"),
        pytest.param("memory", "512", id="bytes below 1024"),
        pytest.param("nvidia.com/gpu", "8", id="a count"),
    ],
)
def test_canonical_text_survives_a_round_trip_through_engine_units(
    resource: str, text: str
) -> None:
    assert format_resource(resource, to_engine_units(resource, text)) == text


@pytest.mark.parametrize(
    ("resource", "text", "canonical"),
    [
        pytest.param("memory", "1024Mi", "1Gi", id="1024Mi is printed as 1Gi"),
        pytest.param("memory", "1.5Gi", "1536Mi", id="1.5Gi is printed as 1536Mi"),
        pytest.param("cpu", "1.5", "1500m", id="1.5 cores are printed as 1500m"),
        pytest.param("cpu", "1000m", "1", id="1000m is printed as 1"),
        pytest.param("cpu", "0.5e0", "500m", id="an exponent form of cpu is canonicalised"),
    ],
)
def test_non_canonical_text_comes_back_canonical(resource: str, text: str, canonical: str) -> None:
    assert format_resource(resource, to_engine_units(resource, text)) == canonical
