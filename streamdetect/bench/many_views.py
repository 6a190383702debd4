"""A long publication history: one seeded table released as many small views.

A monitor of publication feeds accumulates views, one per release and recipient. This generator draws
such a history: a table of ``rows`` rows over fifteen attributes of varied domain sizes (an identifier
``Person``, a sensitive ``Diagnosis``, a near-key ``Visit`` and twelve others from two to a few hundred
values), then ``views`` views of two or three attributes: the first holds the identifier with the
near-key, the second the sensitive attribute with the same near-key (the Dou & Coulondre pattern: joined
on the near-key they tie people to diagnoses), the rest random attributes of the table. The closure of
such views grows with the number of connected subsets of them, which is what ``bench many-views`` times.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import yaml

IDENTIFIER = "Person"
SENSITIVE = "Diagnosis"
NEAR_KEY = "Visit"
#: The other attributes and their domain sizes (a size of 0: as many values as rows, drawn with repeats).
DOMAINS = {
    SENSITIVE: 12,
    NEAR_KEY: 0,
    "Sex": 2,
    "Smoker": 2,
    "Ward": 3,
    "Shift": 4,
    "Insurer": 6,
    "Region": 9,
    "AgeBand": 15,
    "Doctor": 40,
    "Drug": 80,
    "Postcode": 150,
    "Employer": 300,
    "Street": 600,
}


def generate_table(rows: int, seed: int = 0) -> pl.DataFrame:
    """``rows`` rows: a unique ``Person`` and the attributes of :data:`DOMAINS`, uniformly drawn."""
    rng = random.Random(seed)
    columns: dict[str, list[str]] = {IDENTIFIER: [f"p{i:06d}" for i in range(rows)]}
    for attribute, size in DOMAINS.items():
        domain = size or rows
        columns[attribute] = [f"{attribute[:3].lower()}{rng.randrange(domain)}" for _ in range(rows)]
    return pl.DataFrame(columns)


def draw_views(views: int, seed: int = 0) -> dict[str, list[str]]:
    """``views`` view schemas: (Person, Visit), (Visit, Diagnosis), then random sets of two or three
    attributes, each drawn once (a history does not release the same schema twice)."""
    if views < 2:
        raise ValueError("a history needs at least two views")
    rng = random.Random(seed + 1)
    attributes = [IDENTIFIER, *DOMAINS]
    drawn: dict[str, list[str]] = {"v1": [IDENTIFIER, NEAR_KEY], "v2": [NEAR_KEY, SENSITIVE]}
    seen = {frozenset(schema) for schema in drawn.values()}
    while len(drawn) < views:
        schema = rng.sample(attributes, rng.choice((2, 3)))
        if frozenset(schema) in seen:
            continue
        seen.add(frozenset(schema))
        drawn[f"v{len(drawn) + 1}"] = [a for a in attributes if a in schema]
    return drawn


def write_many_views(out_dir: Path, views: int, rows: int, seed: int = 0, k: int = 2) -> Path:
    """Write the table, the views (Parquet) and ``many-views.yaml``; return the topology's path."""
    table = generate_table(rows, seed)
    schemas = draw_views(views, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    table.write_parquet(out_dir / "table.parquet")
    for name, attributes in schemas.items():
        table.select(attributes).write_parquet(out_dir / f"{name}.parquet")
    topology = {
        "name": f"many-views-{views}",
        "table": {
            "name": "history",
            "attributes": dict.fromkeys(table.columns, "str"),
            "identifiers": [IDENTIFIER],
            "sensitive": [SENSITIVE],
            "source": "table.parquet",
        },
        "views": [
            {"name": name, "attributes": attributes, "source": f"{name}.parquet"}
            for name, attributes in schemas.items()
        ],
        "checks": {"linkage": {"k": k}},
    }
    path = out_dir / "many-views.yaml"
    header = (
        f"# A publication history of {views} views over {rows:,} rows (seed {seed}), "
        "written by `streamdetect bench generate many-views`.\n"
    )
    path.write_text(header + yaml.safe_dump(topology, sort_keys=False))
    return path
