"""The ``tensorboard`` writer: one scalar per statistic, ``{tag}/{name}/{op}`` at the training step, written
with the ``tensorboard`` package's own event writer into the rank folder (no torch, no TensorFlow).
Rows of micro-steps after the first are tagged ``{tag}/{name}.micro{m}/{op}``."""

from __future__ import annotations

import time

from probe_core.api import ConfigError
from probe_monitor.records import Row
from probe_monitor.writers import WriterContext


def scalar_tag(row: Row, op: str) -> str:
    micro = f".micro{row.micro_step}" if row.micro_step else ""
    return f"{row.tag}/{row.name}{micro}/{op}"


class TensorBoardWriter:
    def __init__(self, context: WriterContext) -> None:
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            raise ConfigError(f'{context.config.source}: key "format": "tensorboard" needs the tensorboard package; '
                              "pip install tensorboard (or probe-monitor[tensorboard])") from None
        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        self.writer = EventFileWriter(str(context.directory))

    def write_step(self, step: int, rows: list[Row]) -> None:
        values = [self._summary.Value(tag=scalar_tag(row, op), simple_value=value)
                  for row in rows if not row.missing for op, value in row.stats.items()]
        self.writer.add_event(self._event(wall_time=time.time(), step=step, summary=self._summary(value=values)))

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()
