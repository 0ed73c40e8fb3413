"""Progress bars for long commands: a tqdm bar per stage, driven by the library's progress callbacks."""

from __future__ import annotations

import sys
from typing import Any


class StageBars:
    """A ``progress(stage, done, total)`` callback that shows one tqdm bar per stage (stderr).

    Use as a context manager so the bars are closed even when a stage fails.
    """

    def __init__(self, enabled: bool = True, unit: str = "seq", units: dict[str, str] | None = None) -> None:
        self.enabled = enabled
        self.unit = unit
        self.units = dict(units or {})  # a stage's own unit (default: ``unit``)
        self._bars: dict[str, Any] = {}
        self._done: dict[str, int] = {}

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        bar = self._bars.get(stage)
        if bar is None:
            from tqdm import tqdm

            for other in self._bars.values():  # stages run one after the other
                other.close()
            unit = self.units.get(stage, self.unit)
            bar = self._bars[stage] = tqdm(total=total, desc=stage, leave=False, unit=unit, dynamic_ncols=True)
            self._done[stage] = 0
        bar.update(done - self._done[stage])
        self._done[stage] = done

    def step(self, stage: str, total: int | None = None):
        """An increment callback (``n`` more items done) for the same bars."""
        done = [0]

        def update(n: int = 1) -> None:
            done[0] += n
            self(stage, done[0], total)

        return update

    def print_out(self, text: str) -> None:
        """Write ``text`` to stdout with the bars cleared first and drawn again after it (tqdm's
        ``external_write_mode``): on a terminal, where stdout and the bars (stderr) share the screen, a line of
        output never starts at the end of a bar's text."""
        from tqdm import tqdm

        if sys.stdout is None:  # no stdout at all (closed with >&-, pythonw): as print, nothing to write to
            return
        with tqdm.external_write_mode(file=sys.stdout):
            sys.stdout.write(text)  # as given: a token's escape codes kept (the CLI escapes what stdout cannot encode)
            sys.stdout.flush()

    def close(self) -> None:
        """Close the bars. On a terminal tqdm clears the bar's line; elsewhere (a log file, a pipe) the last
        bar's text stays, so the line is ended: what is printed next (an error, a warning) starts a line."""
        shown = bool(self._bars)
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
        if shown:
            stream = sys.stderr
            isatty = getattr(stream, "isatty", None)
            if not (callable(isatty) and isatty()):
                stream.write("\n")
                stream.flush()

    def __enter__(self) -> StageBars:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
