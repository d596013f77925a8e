"""with_event_time on real Spark: which rows are `future`, and an event time read from the
JSON text parsed once per row (it was inlined into every use: 15 parses per row)."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.contracts.records import MAX_TIME_MS
from spark_jobs.streaming.event_time import FUTURE_COLUMN, with_event_time

SKEW_MS = 60_000
KAFKA_MS = 1_000_000


def _timed(frame: DataFrame) -> DataFrame:
    ts = F.get_json_object(F.col("text"), "$.ts").try_cast("long")
    return with_event_time(frame, ts, 5_000, max_clock_skew_ms=SKEW_MS)


def _texts(spark: SparkSession, texts: list[str]) -> DataFrame:
    return spark.createDataFrame([(t, KAFKA_MS) for t in texts],
                                 "text string, kafka_timestamp long")


def test_future_rows_by_their_distance_ahead_of_kafka_time(spark):
    texts = [
        f'{{"ts": {KAFKA_MS}}}',                        # on time
        f'{{"ts": {KAFKA_MS + SKEW_MS}}}',              # exactly the allowed skew
        f'{{"ts": {KAFKA_MS + SKEW_MS + 1}}}',          # one ms too far ahead
        '{"ts": -5}',                                  # before 1970: no time, not future
        f'{{"ts": {MAX_TIME_MS + 1}}}',                 # beyond what Spark represents
        '{"ts": "soon"}',                              # not a number
        '{"other": 1}',                                # no ts at all
    ]
    rows = _timed(_texts(spark, texts)).collect()
    assert [row.text for row in rows] == texts  # no row filtered, none added
    assert [row[FUTURE_COLUMN] for row in rows] == [None, None, SKEW_MS + 1, None, None, None,
                                                   None]
    assert set(rows[0].asDict()) == {"text", "kafka_timestamp", FUTURE_COLUMN}


def test_an_event_time_expression_is_evaluated_once_per_row(spark):
    stream = spark.readStream.format("rate").load().select(
        F.format_string('{"ts": %d}', F.col("value")).alias("text"),
        F.col("value").alias("kafka_timestamp"))
    timed = _timed(stream)
    physical = timed._sc._jvm.PythonSQLUtils.explainString(timed._jdf.queryExecution(),
                                                            "simple")
    assert physical.count("get_json_object") == 1, physical


def test_an_input_column_of_the_helper_names_is_refused(spark):
    frame = _texts(spark, ['{"ts": 1}']).withColumnRenamed("text", "_event_time_ms")
    with pytest.raises(ValueError, match="_event_time_ms"):
        with_event_time(frame, "kafka_timestamp", 5_000, max_clock_skew_ms=SKEW_MS)
