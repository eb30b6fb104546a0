"""The progress line of ``csa fuzz``: property, examples checked, examples per second; drawn with ``rich`` while
a property runs, only when standard output is a terminal (nothing at all otherwise)."""

from __future__ import annotations

import sys
import time
from typing import IO, Any


class PropertyProgress:
    """``start(label)``, ``tick()`` per example, ``stop()``; a no-op where ``stream`` is not a terminal."""

    def __init__(self, stream: IO[str] | None = None, *, force: bool | None = None) -> None:
        stream = stream or sys.stdout
        self.enabled = stream.isatty() if force is None else force
        self.stream = stream
        self._progress: Any = None
        self._task: Any = None
        self._done = 0
        self._start = 0.0

    def start(self, label: str, planned: int) -> None:
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        console = Console(file=self.stream, force_terminal=True)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TextColumn("{task.completed} of ~{task.total} examples"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            refresh_per_second=4,
        )
        self._progress.start()
        self._task = self._progress.add_task(label, total=planned, rate="")
        self._done, self._start = 0, time.perf_counter()

    def tick(self) -> None:
        if self._progress is None:
            return
        self._done += 1
        elapsed = time.perf_counter() - self._start
        rate = f"{self._done / elapsed:.1f} examples/s" if elapsed > 0 else ""
        self._progress.update(self._task, completed=self._done, rate=rate)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
