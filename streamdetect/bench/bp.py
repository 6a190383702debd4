"""The BP benchmark of Dou & Coulondre 2012, section 4 and Table 3.

Adult records joined to seeded generated identities (Faker: NationalId, Givenname consistent with
Adult's sex, Birthday consistent with Adult's age in the 1994 census, Gender, Zipcode, Company, CCType,
Password) plus Health Condition drawn uniformly from the paper's eight values. Written as Parquet: the
table and the six views of Table 3, with a topology whose identifiers are NationalId and Givenname and
whose sensitive attributes are Health Condition and Password.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from pathlib import Path

import polars as pl
import yaml
from faker import Faker

from streamdetect.bench.adult import ADULT_ROWS, adult
from streamdetect.errors import TopologyError
from streamdetect.model.predicates import parse_predicate, to_polars

HEALTH_CONDITIONS = ("HIV", "Cancer", "Phthisis", "Hepatitis", "Obesity", "Asthma", "Flu", "Indigestion")
ATTRIBUTES = (
    "NationalId",
    "Givenname",
    "Birthday",
    "Gender",
    "Zipcode",
    "Education",
    "Company",
    "CCType",
    "Password",
    "Health Condition",
)
VIEWS = {
    "v1": ["NationalId", "Birthday", "Gender"],
    "v2": ["Givenname", "Zipcode", "Education"],
    "v3": ["Zipcode", "Company", "CCType"],
    "v4": ["Gender", "CCType", "Password"],
    "v5": ["Birthday", "Zipcode", "Health Condition"],
    "v6": ["Givenname", "CCType", "Birthday"],
}
#: The selection of ``bp-selection.yaml``'s v5 (the k-anonymity cell patterns' benchmark): a tuple outside it
#: has Health Condition HIV and a Zipcode up to '5', so v5's Zipcode bounds what such a tuple can hold.
V5_SELECTION = "\"Health Condition\" != 'HIV' OR Zipcode > '5'"
_CENSUS = dt.date(1994, 7, 1)
_COMPANIES = 20_000


def generate_bp(
    rows: int = ADULT_ROWS, seed: int = 0, adult_source: str = "auto", progress: Callable[[int], None] | None = None
) -> tuple[pl.DataFrame, str]:
    """The BP table (``rows`` rows) and which Adult source fed it (``real`` or ``synthetic``)."""
    records, source = adult(rows, seed, adult_source)
    fake = Faker("en_US")
    fake.seed_instance(seed)
    rng = random.Random(seed)
    companies = [fake.company() for _ in range(_COMPANIES)]
    national_ids: set[str] = set()
    columns: dict[str, list[object]] = {name: [] for name in ATTRIBUTES}
    for i, (age, sex, education) in enumerate(records.select("age", "sex", "education").iter_rows()):
        male = sex == "Male"
        national_id = fake.ssn()
        while national_id in national_ids:
            national_id = fake.ssn()
        national_ids.add(national_id)
        birth_year_end = _CENSUS - dt.timedelta(days=round(365.25 * age))
        columns["NationalId"].append(national_id)
        columns["Givenname"].append(fake.first_name_male() if male else fake.first_name_female())
        columns["Birthday"].append(birth_year_end - dt.timedelta(days=rng.randrange(365)))
        columns["Gender"].append("male" if male else "female")
        columns["Zipcode"].append(fake.zipcode())
        columns["Education"].append(education)
        columns["Company"].append(rng.choice(companies))
        columns["CCType"].append(fake.credit_card_provider())
        columns["Password"].append(fake.password(length=rng.randint(8, 12)))
        columns["Health Condition"].append(HEALTH_CONDITIONS[rng.randrange(len(HEALTH_CONDITIONS))])
        if progress is not None and i % 5000 == 4999:
            progress(i + 1)
    table = pl.DataFrame(columns, schema={name: (pl.Date if name == "Birthday" else pl.String) for name in ATTRIBUTES})
    return table, source


def write_bp(table: pl.DataFrame, out_dir: Path, name: str = "bp") -> Path:
    """Write the table, its six views (Parquet) and ``bp.yaml``, and ``bp-selection.yaml`` (v5 given
    :data:`V5_SELECTION`, its rows in ``v5-selected.parquet``); return ``bp.yaml``'s path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table.write_parquet(out_dir / "bp.parquet")
    for view, attributes in VIEWS.items():
        table.select(attributes).write_parquet(out_dir / f"{view}.parquet")
    released: list[dict[str, object]] = [
        {"name": view, "attributes": attributes, "source": f"{view}.parquet"} for view, attributes in VIEWS.items()
    ]
    topology = {
        "name": name,
        "table": {
            "name": "BP",
            "attributes": {a: ("date" if a == "Birthday" else "str") for a in ATTRIBUTES},
            "identifiers": ["NationalId", "Givenname"],
            "sensitive": ["Health Condition", "Password"],
            "quasi_identifiers": ["Birthday", "Gender", "Zipcode"],
            "source": "bp.parquet",
        },
        "views": released,
        "checks": {"linkage": {"k": 2}},
        # For `anonymize` and `bench anonymize`: dates and ZIP codes masked from the right.
        "generalization": {"Birthday": "mask", "Zipcode": "mask"},
    }
    path = out_dir / "bp.yaml"
    header = (
        "# The BP benchmark of Dou & Coulondre 2012 (section 4, Table 3), "
        "written by `streamdetect bench generate bp`.\n"
    )
    path.write_text(header + yaml.safe_dump(topology, sort_keys=False))
    # The same release with v5 published only where V5_SELECTION holds (k-anonymity's selection method).
    selected = table.select(VIEWS["v5"]).filter(to_polars(parse_predicate(V5_SELECTION), table.schema))
    selected.write_parquet(out_dir / "v5-selected.parquet")
    views = [dict(view) for view in released]
    views[list(VIEWS).index("v5")].update(where=V5_SELECTION, source="v5-selected.parquet")
    with_selection = {**topology, "name": f"{name}-selection", "views": views, "checks": {"k-anonymity": {"k": 2}}}
    (out_dir / "bp-selection.yaml").write_text(
        header.replace("Table 3)", "Table 3) with a selection on v5") + yaml.safe_dump(with_selection, sort_keys=False)
    )
    return path


#: The table ``bench generate bp --database`` writes (a name of its own: it replaces only its own table).
DATABASE_TABLE = "streamdetect_bp"


def write_bp_database(table: pl.DataFrame, uri: str, out_dir: Path) -> Path:
    """BP's table in the PostgreSQL database ``uri`` (replacing :data:`DATABASE_TABLE` there) and
    ``bp-database.yaml``: the topology of ``bp.yaml`` with the table read in place and the six views as SQL
    run on it (docs/topology.md, "PostgreSQL sources"). The password comes from PGPASSWORD or .pgpass."""
    import io  # noqa: PLC0415

    import psycopg  # noqa: PLC0415 (loaded only to write the database)

    from streamdetect.io.postgres import check_uri  # noqa: PLC0415

    problem = check_uri(uri)
    if problem is not None:
        raise TopologyError(problem, key="--database")
    columns = ", ".join(f'"{a}" {"date" if a == "Birthday" else "text"}' for a in ATTRIBUTES)
    rows = io.BytesIO()
    # Strings quoted, nulls not: in PostgreSQL's CSV an unquoted empty field is null, a quoted one is ''.
    table.select(ATTRIBUTES).write_csv(rows, include_header=False, quote_style="non_numeric", null_value="")
    try:
        with psycopg.connect(uri, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS {DATABASE_TABLE}")
            connection.execute(f"CREATE TABLE {DATABASE_TABLE} ({columns})")
            with connection.cursor().copy(f"COPY {DATABASE_TABLE} FROM STDIN WITH (FORMAT csv)") as copy:
                copy.write(rows.getvalue())
    except psycopg.Error as exc:
        raise TopologyError(f"cannot write BP to {uri}: {str(exc).strip().splitlines()[0]}") from None
    document = yaml.safe_load((out_dir / "bp.yaml").read_text())
    document["name"] = f"{document['name']}-database"
    document["table"].update(name=DATABASE_TABLE, source=uri)
    for view in document["views"]:
        projected = ", ".join(f'"{a}"' for a in view.pop("attributes"))
        view.pop("source")
        view["sql"] = f"SELECT {projected} FROM {DATABASE_TABLE}"
    path = out_dir / "bp-database.yaml"
    header = "# bp.yaml with its table in PostgreSQL and its views as SQL run there (`bench generate bp --database`).\n"
    path.write_text(header + yaml.safe_dump(document, sort_keys=False))
    return path
