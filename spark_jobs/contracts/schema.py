"""A table's shape declared once; its Arrow, Spark and DDL schemas are derived from it.

Tables are written from Arrow (delta-rs) and read by Spark, so the same shape was written as
a pyarrow schema, a StructType, a DDL string and column tuples, and a column added to one
form and not the others broke a cast at run time. A `Table` is the one declaration.

Imports neither Spark nor pyarrow at module level: the catalog, the CLI and the DAG files
read the contracts, and each derivation imports its library only when called.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType, StructField, StructType

# Column types, named as in Spark DDL; timestamps are microseconds in UTC (Spark
# TimestampType; a timestamp without a time zone would become Delta timestamp_ntz).
STRING = "string"
LONG = "long"
INT = "int"
BOOLEAN = "boolean"
DOUBLE = "double"
DATE = "date"
TIMESTAMP = "timestamp"
BINARY = "binary"
_SPARK_TYPES = {
    STRING: "StringType", LONG: "LongType", INT: "IntegerType", BOOLEAN: "BooleanType",
    DOUBLE: "DoubleType", DATE: "DateType", TIMESTAMP: "TimestampType", BINARY: "BinaryType",
}


@dataclass(frozen=True)
class Struct:
    """A struct type; `columns=None` means its fields come from configuration and must be
    filled in with `Table.with_struct` before any schema is derived."""

    columns: tuple[Column, ...] | None = None


ColumnType = str | Struct


def _quoted(name: str) -> str:
    """A DDL identifier: always quoted, since `case`, `check`, `offset`... are keywords."""
    return "`" + name.replace("`", "``") + "`"


def _resolved(struct: Struct) -> tuple[Column, ...]:
    if struct.columns is None:
        raise ValueError("a struct whose fields come from configuration was not filled in "
                         "(Table.with_struct)")
    return struct.columns


def _arrow_type(kind: ColumnType) -> pa.DataType:
    import pyarrow as pa

    if isinstance(kind, Struct):
        return pa.struct([c.arrow_field() for c in _resolved(kind)])
    return {
        STRING: pa.string(), LONG: pa.int64(), INT: pa.int32(), BOOLEAN: pa.bool_(),
        DOUBLE: pa.float64(), DATE: pa.date32(), TIMESTAMP: pa.timestamp("us", tz="UTC"),
        BINARY: pa.binary(),
    }[kind]


def _spark_type(kind: ColumnType) -> DataType:
    from pyspark.sql import types

    if isinstance(kind, Struct):
        return types.StructType([c.spark_field() for c in _resolved(kind)])
    return getattr(types, _SPARK_TYPES[kind])()


def _ddl_type(kind: ColumnType, not_null: bool) -> str:
    if isinstance(kind, Struct):
        fields = ", ".join(c.ddl(not_null, separator=": ") for c in _resolved(kind))
        return f"struct<{fields}>"
    return kind


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.type, Struct) and self.type not in _SPARK_TYPES:
            raise ValueError(f"column {self.name!r}: unknown type {self.type!r} "
                             f"(known: {', '.join(_SPARK_TYPES)}, or a Struct)")

    def arrow_field(self) -> pa.Field:
        import pyarrow as pa

        return pa.field(self.name, _arrow_type(self.type), nullable=self.nullable)

    def spark_field(self) -> StructField:
        from pyspark.sql.types import StructField

        return StructField(self.name, _spark_type(self.type), self.nullable)

    def ddl(self, not_null: bool = False, separator: str = " ") -> str:
        text = f"{_quoted(self.name)}{separator}{_ddl_type(self.type, not_null)}"
        return text + " NOT NULL" if not_null and not self.nullable else text


@dataclass(frozen=True)
class Table:
    """A Delta table: its name (the directory under lake.root), columns in order and the
    primary key its upserts use (empty for append-only tables)."""

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = self.column_names
        if len(set(names)) != len(names):
            raise ValueError(f"table {self.name}: duplicate column names in {names}")
        for key in self.primary_key:
            if key not in names:
                raise ValueError(f"table {self.name}: primary key column {key!r} is not declared")
            if self.column(key).nullable:
                raise ValueError(f"table {self.name}: primary key column {key!r} must not be "
                                 f"nullable (null never matches in a MERGE)")

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.name} has no column {name!r}")

    def arrow_schema(self) -> pa.Schema:
        """The schema delta-rs writes (and that Arrow rows are cast to before a write)."""
        import pyarrow as pa

        return pa.schema([c.arrow_field() for c in self.columns])

    def spark_schema(self) -> StructType:
        from pyspark.sql.types import StructType

        return StructType([c.spark_field() for c in self.columns])

    def ddl(self, not_null: bool = False) -> str:
        """Spark DDL (`applyInPandas` return types; `not_null=True` for a CREATE TABLE)."""
        return ", ".join(c.ddl(not_null) for c in self.columns)

    def select(self, *names: str) -> Table:
        """The same table narrowed to some columns, in the order given (a reader's view)."""
        return self._with_columns(tuple(self.column(n) for n in names))

    def drop(self, *names: str) -> Table:
        for name in names:
            self.column(name)  # an unknown name is an error, not a no-op
        return self._with_columns(tuple(c for c in self.columns if c.name not in names))

    def renamed(self, name: str) -> Table:
        """Another table with the same shape (e.g. a batch recomputation of a streaming one)."""
        return replace(self, name=name)

    def with_struct(self, name: str, columns: Iterable[Column]) -> Table:
        """The table with the struct column `name` given its (configured) fields."""
        if not isinstance(self.column(name).type, Struct):
            raise ValueError(f"table {self.name}: column {name!r} is not a struct")
        fields = Struct(tuple(columns))
        return replace(self, columns=tuple(
            replace(c, type=fields) if c.name == name else c for c in self.columns))

    def _with_columns(self, columns: tuple[Column, ...]) -> Table:
        names = {c.name for c in columns}
        key = self.primary_key if all(k in names for k in self.primary_key) else ()
        return replace(self, columns=columns, primary_key=key)
