"""The declaration language of tables: what it refuses, and that its forms agree with Delta
(the Arrow schema written by delta-rs reads back as the declared Spark schema)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.contracts.schema import INT, LONG, STRING, TIMESTAMP, Column, Struct, Table

EVENTS = Table(
    "events",
    (Column("id", LONG, nullable=False), Column("kind", STRING), Column("at", TIMESTAMP)),
    primary_key=("id",),
)


def test_an_unknown_type_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown type 'bigint'.*long"):
        Column("id", "bigint")


def test_duplicate_columns_and_bad_primary_keys_are_refused():
    with pytest.raises(ValueError, match="duplicate"):
        Table("t", (Column("a", LONG), Column("a", STRING)))
    with pytest.raises(ValueError, match="not declared"):
        Table("t", (Column("a", LONG, nullable=False),), primary_key=("b",))
    with pytest.raises(ValueError, match="must not be nullable"):
        Table("t", (Column("a", LONG),), primary_key=("a",))


def test_select_and_drop_keep_the_key_only_when_whole():
    assert EVENTS.select("kind", "id").column_names == ("kind", "id")
    assert EVENTS.select("kind", "id").primary_key == ("id",)
    assert EVENTS.drop("id").primary_key == ()
    assert EVENTS.drop("at").column_names == ("id", "kind")
    with pytest.raises(KeyError, match="no column 'nope'"):
        EVENTS.drop("nope")
    with pytest.raises(KeyError, match="no column 'nope'"):
        EVENTS.select("nope")


def test_renamed_keeps_the_shape():
    copy = EVENTS.renamed("events_copy")
    assert copy.name == "events_copy"
    assert copy.columns == EVENTS.columns and copy.primary_key == EVENTS.primary_key


def test_with_struct_fills_a_configured_struct_only():
    table = Table("t", (Column("id", LONG), Column("labels", Struct())))
    filled = table.with_struct("labels", [Column("like", INT, nullable=False)])
    assert str(filled.arrow_schema().field("labels").type) == "struct<like: int32 not null>"
    with pytest.raises(ValueError, match="not a struct"):
        table.with_struct("id", [])


def test_importing_the_contracts_loads_neither_spark_nor_arrow():
    """The catalog, the CLI and the DAG files read the contracts."""
    code = ("import sys, spark_jobs.contracts.tables, spark_jobs.catalog;"
            "print(sorted(m for m in ('pyspark', 'pyarrow') if m in sys.modules))")
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env, cwd=root).stdout
    assert out.strip() == "[]"


@pytest.mark.integration
def test_delta_reads_back_the_declared_spark_schema(tmp_path):
    """delta-rs writes the Arrow form; Delta's schema (Spark's StructType JSON) must be the
    declared Spark form, nullability included."""
    from deltalake import write_deltalake

    from spark_jobs.contracts.tables import (
        ALERTS,
        DEAD_LETTERS,
        EXPERIMENT_METRICS,
        FRAUD_ALERTS,
        ORPHAN_ENGAGEMENTS,
        RAW_ACTIVATIONS,
        RAW_EVENTS,
        VALIDATION_RESULTS,
        training_samples,
    )
    from spark_jobs.streaming.lake.delta import load_table, spark_schema

    tables = [EXPERIMENT_METRICS, DEAD_LETTERS, RAW_EVENTS, RAW_ACTIVATIONS, ALERTS,
              VALIDATION_RESULTS, FRAUD_ALERTS, ORPHAN_ENGAGEMENTS,
              training_samples(("like", "share"))]
    for table in tables:
        uri = str(tmp_path / table.name)
        write_deltalake(uri, table.arrow_schema().empty_table())
        assert spark_schema(load_table(uri)) == table.spark_schema(), table.name


@pytest.mark.spark
def test_spark_parses_the_ddl_into_the_declared_schema(spark):
    """Names that are SQL keywords (case, check, offset, limit) parse because they are quoted."""
    from spark_jobs.contracts.tables import (
        ALERTS,
        DEAD_LETTERS,
        FRAUD_ALERTS,
        VALIDATION_RESULTS,
        training_samples,
    )

    for table in (ALERTS, DEAD_LETTERS, FRAUD_ALERTS, VALIDATION_RESULTS,
                  training_samples(("like", "share"))):
        parsed = spark.createDataFrame([], table.ddl(not_null=True)).schema
        assert parsed == table.spark_schema(), table.name


@pytest.mark.spark
def test_the_ddl_serves_as_an_apply_in_pandas_return_type(spark):
    """As the recomputation uses it (quoted names included)."""
    import pandas as pd

    from spark_jobs.contracts.tables import VALIDATION_RESULTS

    table = VALIDATION_RESULTS.select("case", "check", "evaluated")

    def rows(_: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame([["c", "k", 3]], columns=["case", "check", "evaluated"])

    out = spark.createDataFrame([(1,)], "g long").groupBy("g").applyInPandas(rows, table.ddl())
    assert [tuple(r) for r in out.collect()] == [("c", "k", 3)]
    assert [(f.name, f.dataType) for f in out.schema] == [
        (f.name, f.dataType) for f in table.spark_schema()]
