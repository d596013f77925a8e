"""Is a day ready to validate? Only once the streaming job has closed its last window.

The daily DAG waits on this before recomputing: validating at midnight would compare the
batch with windows the streaming job has not written yet (its watermark trails event time
by `experiments.lateness`, and traffic may trail the clock). A day after which no data
arrived at all (history that stops, a day before the data begins) is ready as it is.
"""

from __future__ import annotations

import datetime

from spark_jobs.experiments.validation.inputs import latest_raw_ts, streaming_watermark_ms
from spark_jobs.settings import Settings
from spark_jobs.streaming.days import day_bounds_ms, iso_ms


def day_closed(settings: Settings, day: datetime.date) -> tuple[bool, str]:
    """(ready, why): ready when the metrics job's watermark reached the day's end, or when
    no accepted event is as late as the day's start (nothing for the job to close)."""
    after_ms, until_ms = day_bounds_ms(day)
    watermark = streaming_watermark_ms(settings)
    if watermark is not None and watermark >= until_ms:
        return True, f"streaming watermark {iso_ms(watermark)} is past the day's end"
    latest = latest_raw_ts(settings)
    if latest is None or latest < after_ms:
        return True, f"no event on or after {day.isoformat()} (latest: {iso_ms(latest)})"
    return False, (
        f"streaming watermark {iso_ms(watermark)} has not reached the end of "
        f"{day.isoformat()} (latest event {iso_ms(latest)})"
    )
