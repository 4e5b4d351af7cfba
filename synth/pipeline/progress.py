"""Progress of a run: rich bars on a terminal, plain lines otherwise.

The pipeline only calls `stage(name, total)`, `count(stage, done=, total=)`,
`started(stage)`, `finished(stage, ok)` and `note(text)`; how it is shown is
decided here. The usage source must not need anything the run closes at its
end (the display refreshes once more when it closes).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StageCount:
    total: int = 0
    done: int = 0
    failed: int = 0
    in_flight: int = 0


@dataclass
class Progress:
    """Counts per stage plus a usage source; subclasses decide how to show them."""

    usage: Callable[[], dict[str, Any]] = lambda: {}
    stages: dict[str, StageCount] = field(default_factory=dict)
    started_at: float = field(default_factory=time.monotonic)

    def stage(self, name: str, total: int) -> None:
        self.stages.setdefault(name, StageCount()).total = total
        self.refresh()

    def count(self, stage: str, *, done: int, total: int) -> None:
        """Set a stage's counts outright (a stage that reports a result, not items one by one)."""
        c = self.stages.setdefault(stage, StageCount())
        c.done, c.total = done, total
        self.refresh(event=(stage, True))

    def started(self, stage: str) -> None:
        self.stages.setdefault(stage, StageCount()).in_flight += 1
        self.refresh()

    def finished(self, stage: str, ok: bool) -> None:
        count = self.stages.setdefault(stage, StageCount())
        count.in_flight = max(0, count.in_flight - 1)
        if ok:
            count.done += 1
        else:
            count.failed += 1
        self.refresh(event=(stage, ok))

    def note(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def refresh(self, event: tuple[str, bool] | None = None) -> None:
        pass

    def usage_line(self) -> str:
        u = self.usage() or {}
        elapsed = time.monotonic() - self.started_at
        invalid = f", {u['invalid']} invalid" if u.get("invalid") else ""
        return (f"calls {u.get('calls', 0)} ({u.get('cached', 0)} cached{invalid})  "
                f"tokens {u.get('prompt_tokens', 0) + u.get('completion_tokens', 0):,}  "
                f"${u.get('cost', 0.0):.4f}  {elapsed:,.0f}s")

    def close(self) -> None:
        pass

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LineProgress(Progress):
    """One line per finished item: for logs, CI and pipes. While nothing finishes (a stage of many
    model calls), a line every `every` seconds says the run is alive and what it has spent."""

    every: float = 10.0

    def refresh(self, event: tuple[str, bool] | None = None) -> None:
        if event is None:
            return
        stage, ok = event
        c = self.stages[stage]
        self._print(f"[{stage}] {c.done + c.failed}/{c.total} done={c.done} failed={c.failed} "
                    f"in_flight={c.in_flight} | {self.usage_line()}")

    def _print(self, line: str) -> None:
        self._last = time.monotonic()
        print(line, file=sys.stderr, flush=True)

    def _beat(self) -> None:
        while not self._stop.wait(1.0):
            if time.monotonic() - self._last >= self.every:
                running = " ".join(f"{name} {c.done + c.failed}/{c.total or '?'}" for name, c in self.stages.items())
                self._print(f"[running] {running or 'starting'} | {self.usage_line()}")

    def __enter__(self) -> "LineProgress":
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="synth-progress", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
            self._thread.join(timeout=2)


@dataclass
class RichProgress(Progress):  # @dataclass again: only then does __init__ call __post_init__
    """A bar per stage with done / failed / in flight, and the model usage on a line below."""

    def __post_init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bars, TextColumn
        from rich.text import Text

        class WithFooter(Bars):
            def get_renderables(inner):  # noqa: N805 - the bars, then the usage line
                yield inner.make_tasks_table(inner.tasks)
                yield Text(f"model     {self.usage_line()}")

        self.console = Console(stderr=True)
        # Fits 80 columns: name, a short bar, done/total, then failed / running.
        self.bars = WithFooter(TextColumn("{task.description:<9}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                               TextColumn("{task.fields[detail]}"), console=self.console, transient=False)
        self.ids: dict[str, Any] = {}
        self.bars.start()

    def note(self, text: str) -> None:
        self.console.print(text)

    def refresh(self, event: tuple[str, bool] | None = None) -> None:
        for name, c in self.stages.items():
            if name not in self.ids:
                self.ids[name] = self.bars.add_task(name, total=c.total or None, detail="")
            self.bars.update(self.ids[name], total=c.total or None, completed=c.done + c.failed,
                             detail=f"failed {c.failed}  running {c.in_flight}")
        self.bars.refresh()

    def close(self) -> None:
        self.refresh()
        self.bars.stop()


def make_progress(*, plain: bool | None = None) -> Progress:
    """Rich bars on a terminal, plain lines when stderr is not one (or plain=True).

    The pipeline that drives it sets `usage` to its own source of totals."""
    if plain is None:
        plain = not sys.stderr.isatty()
    return LineProgress() if plain else RichProgress()
