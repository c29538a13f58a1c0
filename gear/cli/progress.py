"""A progress bar for long operations (``gear traces analyze``, ``gear demo --report``).

It shows the current stage by name and how many of the known stages are done, on stderr, and stays
silent when stderr is not a terminal or when the command prints ``--json``: scripts and logs get only
the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ("stage_progress",)


@contextmanager
def stage_progress(
    stages: Sequence[str], *, quiet: bool = False, console: Console | None = None
) -> Iterator[Callable[[str], None]]:
    """Yield ``say(stage)``: each call moves the bar to ``stage`` (one of ``stages``, in order).

    Silent (``say`` does nothing) when ``quiet`` or when the console is not a terminal. A stage not in
    ``stages`` only changes the text.
    """
    console = console or Console(stderr=True)
    if quiet or not console.is_terminal:
        yield lambda _stage: None
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description:<32}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(stages[0], total=len(stages) - 1)

        def say(stage: str) -> None:
            if stage in stages:
                progress.update(task, description=stage, completed=stages.index(stage))
            else:
                progress.update(task, description=stage)

        yield say
