"""Batches of fraud's driver mode kept in the checkpoint until their outputs are committed.

The driver sink evaluates and delivers batch N in the background, while Spark commits N and
reads and plans N+1 (the engines and the JVM then work at the same time: BENCHMARKS.md,
2026-11-29). Once Spark has committed N it never hands N over again, so N's input must be
durable before the sink returns: one Arrow IPC file per batch, `<checkpoint>/inputs-ahead/
<batch>`, written under a temporary name and renamed, and removed once the batch's outputs
are committed. A restarted sink delivers every batch still there, in order, before its first
new one; a batch Spark had not committed yet is handed over again and written again.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc

from spark_jobs.fraud.jobs.engine_state_files import checkpoint_folder

FOLDER = "inputs-ahead"


class InputsAhead:
    """The written-ahead inputs of one query's batches."""

    def __init__(self, checkpoint: str) -> None:
        self.filesystem, self.folder = checkpoint_folder(checkpoint, FOLDER)
        self.filesystem.create_dir(self.folder, recursive=True)

    def write(self, batch_id: int, table: pa.Table) -> None:
        """Keep the batch's input until remove(batch_id)."""
        temporary = f"{self.folder}/.{batch_id}.tmp"
        with self.filesystem.open_output_stream(temporary) as out, \
                ipc.new_file(out, table.schema) as writer:
            writer.write_table(table)
        self.filesystem.move(temporary, f"{self.folder}/{batch_id}")

    def read(self, batch_id: int) -> pa.Table:
        with self.filesystem.open_input_file(f"{self.folder}/{batch_id}") as source:
            return ipc.open_file(source).read_all()

    def remove(self, batch_id: int) -> None:
        """The batch's outputs are committed: its input is no longer needed."""
        self.filesystem.delete_file(f"{self.folder}/{batch_id}")

    def waiting(self, before: int) -> list[int]:
        """The batches kept whose outputs may not be committed yet, below `before`, in order."""
        selector = pafs.FileSelector(self.folder, allow_not_found=True)
        names = [info.base_name for info in self.filesystem.get_file_info(selector)]
        return sorted(int(name) for name in names if name.isdigit() and int(name) < before)
