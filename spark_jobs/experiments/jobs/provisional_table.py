"""experiment_metrics_provisional on the lake: the live totals of experiment_metrics' open
windows (core/provisional.py), written by the metrics sink before its marker table.

Issue 17 asks for provisional rows "in their own table or clearly flagged"; this table is the
lead's reading of it: one row per (experiment, group, period, event type), upserted with the
whole set of open groups by every batch that changes one, so the rows one commit wrote are a
complete picture. Each commit carries its lineage's metadata (jobs/lineage.py), so a restart
resumes from the rows of its own lineage's newest commit, as experiment_metrics does.

Exactly once: the sink writes this table before the marker table (experiment_metrics), so a
crash between the two replays a batch this table already holds. Its transaction version for
the app id, read once at resume, says which: such a batch is not folded into the totals again.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.contracts.tables import PROVISIONAL_METRICS
from spark_jobs.experiments.core.provisional import ProvisionalRow, ProvisionalTotals
from spark_jobs.experiments.core.user_metrics import Delta
from spark_jobs.experiments.jobs.lineage import COMMIT_APP, COMMIT_STAMP, lineage_info
from spark_jobs.experiments.settings import ExperimentSettings
from spark_jobs.streaming.lake.delta import (
    OpenTables,
    commit_metadata,
    merge_once,
    read_arrow,
    transaction_version,
)

PROVISIONAL_KEY = PROVISIONAL_METRICS.primary_key
PROVISIONAL_SCHEMA = PROVISIONAL_METRICS.arrow_schema()
_COMPUTED = [name for name in PROVISIONAL_SCHEMA.names if name not in ("watermark", "updated_at")]


def provisional_table(rows: list[ProvisionalRow], watermark_ms: int, updated_at: datetime
                      ) -> pa.Table:
    """The rows of one commit, all with the batch's watermark and one stamp."""
    columns = {name: [getattr(r, name) for r in rows] for name in _COMPUTED}
    columns["watermark"] = [watermark_ms] * len(rows)
    columns["updated_at"] = [updated_at] * len(rows)
    return pa.Table.from_pydict(columns, schema=PROVISIONAL_SCHEMA)


def read_provisional_rows(table_uri: str, app_id: str) -> list[ProvisionalRow]:
    """The rows the lineage's newest commit wrote; none for a lineage that never wrote."""
    info = commit_metadata(table_uri, COMMIT_APP, app_id)
    if info is None:
        return []
    rows = read_arrow(table_uri, columns=list(PROVISIONAL_SCHEMA.names))
    stamps = rows["updated_at"].cast(pa.int64())
    mine = rows.filter(pc.equal(stamps, int(info[COMMIT_STAMP]))).select(_COMPUTED)
    return [ProvisionalRow(**row) for row in mine.to_pylist()]


class LiveTable:
    """The provisional table of one lineage: totals resumed at the first batch, then each
    batch's provisional deltas folded in and every open group upserted once."""

    def __init__(self, table_uri: str, app_id: str, experiments: ExperimentSettings,
                 log_retention_ms: int | None = None) -> None:
        self.table_uri = table_uri
        self.app_id = app_id
        self.experiments = experiments
        self.totals: ProvisionalTotals | None = None
        self.done: int | None = None  # the last batch the table held at resume
        self.tables = OpenTables(log_retention_ms)  # kept open between batches, a short log

    def _resume(self) -> ProvisionalTotals:
        experiments = self.experiments
        self.done = transaction_version(self.table_uri, self.app_id)
        return ProvisionalTotals.resume(
            experiments.period_ms, experiments.window_ms, experiments.critical_event_types,
            read_provisional_rows(self.table_uri, self.app_id),
        )

    def commit(self, deltas: list[Delta], watermark_ms: int, batch_id: int) -> bool:
        """Fold in and write one batch; False when it wrote nothing (no delta, or a batch
        the table already holds)."""
        if self.totals is None:
            self.totals = self._resume()
        fold = self.done is None or batch_id > self.done
        rows = self.totals.apply(deltas, watermark_ms, fold)
        if not rows:
            return False
        now = datetime.now(UTC)
        return merge_once(self.table_uri, provisional_table(rows, watermark_ms, now),
                          PROVISIONAL_KEY, self.app_id, batch_id, lineage_info(self.app_id, now),
                          tables=self.tables)
