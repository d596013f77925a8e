"""The stateful processor of the transformWithState warm-up (streaming/worker_warmup.py), in
a module of its own so that the command importing the runner does not import pandas."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

if TYPE_CHECKING:  # pandas is imported where frames are built: the driver's state-schema
    import pandas as pd  # worker loads this module at every query start, without pandas


class Echo(StatefulProcessor):
    """One row per key and nothing kept: just enough for Spark to start a state worker."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: Any) -> Iterator[pd.DataFrame]:
        import pandas as pd

        yield pd.DataFrame({"k": [int(key[0])]})

    def close(self) -> None:
        pass
