"""The experiment metadata DB: the `ramps` table (CONTRACTS.md section 3) via SQLAlchemy Core.

SQLite by default, PostgreSQL (or anything SQLAlchemy speaks) by URL. Rows keep an
autoincrement id because ties in ramp_ts are broken by load order.

Loading creates the DB and the table; publishing a snapshot reads with `must_exist`, which
opens SQLite read-only and fails when the DB or its `ramps` table is missing (CONTRACTS.md
section 9): a mistyped metadata.url must not publish an empty snapshot.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Engine,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    inspect,
    make_url,
    select,
)
from sqlalchemy import exc as sql_errors

from spark_jobs.config.fields import ConfigError
from spark_jobs.contracts.tables import RAMPS_HEADER
from spark_jobs.experiments.core.periods import RampRow

_metadata = MetaData()

ramps = Table(
    "ramps",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("experiment_hash", String(255), nullable=False),
    Column("experiment_group", String(255), nullable=False),
    Column("ramp_ts", BigInteger, nullable=False),
    Column("allocation_pct", Float, nullable=False),
    Column("is_control", Boolean, nullable=False),
    sqlite_autoincrement=True,
)

_INTEGER = re.compile(r"^[+-]?\d+$")
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}


class MetadataError(ValueError):
    """Metadata that cannot be loaded; the message names the file, line and field."""


class MetadataUnavailable(ConfigError):
    """metadata.url names no database, one that cannot be opened, or one without `ramps`."""


def shown_url(url: str) -> str:
    """The URL as messages show it: the password masked."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except sql_errors.ArgumentError:
        return url


def _sqlite_file(url: str) -> Path | None:
    """The file of an on-disk SQLite URL (None for other databases and in-memory ones)."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    if database.startswith("file:"):  # a URI filename: its path ends at the query
        database = database[len("file:"):].split("?", 1)[0]
    return Path(database).expanduser()


@contextmanager
def _existing(url: str) -> Iterator[Engine]:
    """An engine on a database that exists, never creating it (SQLite opens read-only)."""
    try:
        file = _sqlite_file(url)
    except sql_errors.ArgumentError as exc:
        raise MetadataUnavailable(f"metadata.url {url!r} is not a database URL: {exc}") from None
    if file is not None and not file.is_file():
        raise MetadataUnavailable(
            f"metadata.url {shown_url(url)} names a database that does not exist ({file}); "
            "check metadata.url, or load ramps first with `tideline metadata load FILE.csv`"
        )
    if file is not None:
        url = f"sqlite:///file:{file}?mode=ro&uri=true"
    try:
        engine = create_engine(url)
    except (sql_errors.ArgumentError, sql_errors.NoSuchModuleError, ImportError) as exc:
        raise MetadataUnavailable(
            f"metadata.url {shown_url(url)} cannot be used: {_first_line(exc)}"
        ) from None
    try:
        yield engine
    finally:
        engine.dispose()


def _first_line(exc: BaseException) -> str:
    origin = getattr(exc, "orig", None) or exc
    lines = str(origin).strip().splitlines()
    return lines[0] if lines else type(origin).__name__


@contextmanager
def _engine(url: str) -> Iterator[Engine]:
    """A short-lived engine: CLI commands and publishers touch the DB rarely."""
    parsed = make_url(url)
    database = parsed.database or ""
    on_disk = database not in ("", ":memory:") and not database.startswith("file:")
    if parsed.get_backend_name() == "sqlite" and on_disk:
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


def init_db(url: str) -> None:
    """Create the `ramps` table if it is missing (safe to call every time)."""
    with _engine(url) as engine:
        _metadata.create_all(engine, checkfirst=True)


def _check_row(row: RampRow) -> None:
    if not row.experiment_hash or not row.experiment_group:
        raise MetadataError("experiment_hash and experiment_group must not be empty")
    if not 0 <= row.allocation_pct <= 100:
        raise MetadataError(f"allocation_pct must be within [0, 100], got {row.allocation_pct}")


def add_ramps(url: str, rows: Iterable[RampRow]) -> int:
    """Append rows in the given order (that order breaks ramp_ts ties); returns the count."""
    batch = list(rows)
    for row in batch:
        _check_row(row)
    with _engine(url) as engine:
        _metadata.create_all(engine, checkfirst=True)
        if batch:
            with engine.begin() as conn:
                conn.execute(
                    ramps.insert(),
                    [
                        {
                            "experiment_hash": r.experiment_hash,
                            "experiment_group": r.experiment_group,
                            "ramp_ts": int(r.ramp_ts),
                            "allocation_pct": float(r.allocation_pct),
                            "is_control": bool(r.is_control),
                        }
                        for r in batch
                    ],
                )
    return len(batch)


def read_ramps(url: str, *, must_exist: bool = False) -> list[RampRow]:
    """Every row in load order; an empty list when the table does not exist yet, or with
    `must_exist` MetadataUnavailable when the database or its `ramps` table is missing."""
    if not must_exist:
        with _engine(url) as engine:
            return _read_rows(engine) if inspect(engine).has_table(ramps.name) else []
    with _existing(url) as engine:
        try:
            if not inspect(engine).has_table(ramps.name):
                raise MetadataUnavailable(
                    f"metadata.url {shown_url(url)} has no `ramps` table; check metadata.url, "
                    "or load ramps with `tideline metadata load FILE.csv`"
                )
            return _read_rows(engine)
        except sql_errors.DBAPIError as exc:  # no such database, refused, no access...
            raise MetadataUnavailable(
                f"cannot read the metadata DB at metadata.url {shown_url(url)}: {_first_line(exc)}"
            ) from None


def _read_rows(engine: Engine) -> list[RampRow]:
    query = select(
        ramps.c.experiment_hash,
        ramps.c.experiment_group,
        ramps.c.ramp_ts,
        ramps.c.allocation_pct,
        ramps.c.is_control,
    ).order_by(ramps.c.id)
    with engine.connect() as conn:
        return [
            RampRow(h, g, int(ts), float(pct), bool(ctl))
            for h, g, ts, pct, ctl in conn.execute(query)
        ]


def _parse_field(name: str, text: str) -> str | int | float | bool:
    value = text.strip()
    if name in ("experiment_hash", "experiment_group"):
        if not value:
            raise ValueError("must not be empty")
        return value
    if name == "ramp_ts":
        if not _INTEGER.match(value):
            raise ValueError(f"not an integer (epoch ms): {text!r}")
        return int(value)
    if name == "allocation_pct":
        try:
            pct = float(value)
        except ValueError:
            raise ValueError(f"not a number: {text!r}") from None
        if not math.isfinite(pct) or not 0 <= pct <= 100:
            raise ValueError(f"must be within [0, 100], got {text!r}")
        return pct
    if name == "is_control":
        flag = _BOOLEANS.get(value.lower())
        if flag is None:
            raise ValueError(f"must be true, false, 1 or 0, got {text!r}")
        return flag
    raise AssertionError(name)


def parse_csv(path: str | Path) -> list[RampRow]:
    """Parse and validate the whole file; the first bad row raises MetadataError."""
    file = Path(path)
    try:
        handle = file.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise MetadataError(f"{file}: cannot open: {exc.strerror or exc}") from exc
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != RAMPS_HEADER:
            raise MetadataError(
                f"{file}:1: header must be {','.join(RAMPS_HEADER)}, got "
                f"{','.join(header) if header else 'an empty file'}"
            )
        rows: list[RampRow] = []
        for record in reader:
            line = reader.line_num
            if not record or all(not cell.strip() for cell in record):
                continue
            if len(record) > len(RAMPS_HEADER):
                raise MetadataError(
                    f"{file}:{line}: {len(record)} fields, expected {len(RAMPS_HEADER)}"
                )
            values = []
            for index, name in enumerate(RAMPS_HEADER):
                if index >= len(record):
                    raise MetadataError(f"{file}:{line}: field {name}: missing")
                try:
                    values.append(_parse_field(name, record[index]))
                except ValueError as exc:
                    raise MetadataError(f"{file}:{line}: field {name}: {exc}") from None
            rows.append(RampRow(*values))  # type: ignore[arg-type]
    return rows


def load_csv(url: str, path: str | Path) -> int:
    """Load a ramps CSV (header RAMPS_HEADER) all or nothing; returns the number of rows."""
    return add_ramps(url, parse_csv(path))
