"""Bytes kept in Spark state as ASCII text (base64), not as a binary column.

The JVM hands a state value to Python by pickling its row with Pyrolite, which writes a
`byte[]` as a latin-1 string built one character at a time in a StringBuilder, then encodes
it to UTF-8 (two bytes for each byte above 127). With training_samples' bucket blobs (50 MB
read per full batch) that was 31 % of the JVM's samples under JFR. An ASCII string it copies
in one piece, both ways, for a third more bytes stored.
"""

from __future__ import annotations

from binascii import a2b_base64, b2a_base64

from pyspark.sql.types import StringType, StructField, StructType

TEXT_BLOB_SCHEMA = StructType([StructField("blob", StringType(), True)])


def to_state_text(data: bytes) -> str:
    """`data` as the ASCII text a state column keeps."""
    return b2a_base64(data, newline=False).decode("ascii")


def from_state_text(text: str | bytes) -> bytes:
    """The bytes `to_state_text` was given (`text` may arrive as str or ASCII bytes)."""
    return a2b_base64(text)
