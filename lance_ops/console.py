"""Terminal output of the ``lance-ops`` commands: rich consoles, progress bars and tables when rich
is installed (it comes with the extras), plain text otherwise."""

import contextlib
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def _rich() -> types.ModuleType | None:
    """The ``rich`` package when it is installed (it comes with the extras), else None."""
    try:
        import rich.box
        import rich.console
        import rich.progress
        import rich.table
        import rich.text
    except ImportError:
        return None
    return rich


class PlainConsole:
    """What the CLI needs of a rich Console, as plain text (no rich installed)."""

    is_terminal = False

    def __init__(self, stream: Any) -> None:
        self.file = stream

    def print(self, obj: Any = "") -> None:
        self.file.write(f"{obj}\n")
        self.file.flush()


def console_for(stream: Any) -> Any:
    """A rich Console on ``stream``: colours and live bars on a terminal; plain text otherwise
    (wide enough that tables are never wrapped, so the output can be parsed and diffed).  Without
    rich, a :class:`PlainConsole`."""
    rich = _rich()
    if rich is None:
        return PlainConsole(stream)
    tty = hasattr(stream, "isatty") and stream.isatty()
    return rich.console.Console(file=stream, force_terminal=tty, width=None if tty else 250, highlight=False,
                                emoji=False, markup=False, no_color=not tty, soft_wrap=not tty)


@contextlib.contextmanager
def progress(label: str, total: int | None = None, *, stream: Any = None) -> Iterator[Callable[[int], None]]:
    """A progress bar on ``stream`` (stderr): determinate with ``total``, else a spinner with the
    elapsed time.  Off a terminal it degrades to plain lines, at most one a second plus the last.
    Yields ``advance(n)``; the bar finishes when the block ends."""
    console = console_for(stream or sys.stderr)
    if console.is_terminal:
        rp = _rich().progress  # type: ignore[union-attr]  # a terminal console is a rich one
        columns: list[Any] = [rp.SpinnerColumn(), rp.TextColumn("{task.description}")]
        if total is not None:
            columns += [rp.BarColumn(), rp.MofNCompleteColumn()]
        columns.append(rp.TimeElapsedColumn())
        with rp.Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task(label, total=total)
            yield lambda n=1: bar.advance(task, n)
            bar.update(task, completed=total if total is not None else 0)
        return
    t0 = time.perf_counter()
    state = {"done": 0, "last": t0}

    def line() -> str:
        done = f" {state['done']}/{total}" if total is not None else ""
        return f"{label}{done} {time.perf_counter() - t0:.1f}s"

    def advance(n: int = 1) -> None:
        state["done"] += n
        now = time.perf_counter()
        if now - state["last"] >= 1.0:
            state["last"] = now
            console.print(line())

    yield advance
    if total is not None:
        state["done"] = total
    console.print(line() + " done")

def track(items: Sequence[Any], label: str) -> Iterator[Any]:
    """Iterate ``items`` with a progress bar on stderr."""
    with progress(label, len(items)) as advance:
        for item in items:
            yield item
            advance(1)


def render_table(rows: list[dict[str, Any]], columns: Sequence[str] | None = None, *, title: str | None = None) -> Any:
    """A rich Table of ``rows`` (numbers right-aligned), or a "(none)" line; plain text without rich."""
    rich = _rich()
    if rich is None:
        return plain_table(rows, columns, title=title)
    if not rows:
        return rich.text.Text("(none)")
    cols = list(columns or rows[0].keys())
    table = rich.table.Table(box=rich.box.SIMPLE_HEAD, title=title, title_justify="left", show_edge=False,
                             pad_edge=False)
    for c in cols:
        numeric = all(_is_num(r.get(c)) for r in rows)
        table.add_column(c, justify="right" if numeric else "left", no_wrap=True)
    for r in rows:
        table.add_row(*(_cell(r.get(c, "")) for c in cols))
    return table


def plain_table(rows: list[dict[str, Any]], columns: Sequence[str] | None = None, *,
                title: str | None = None) -> str:
    """``rows`` as aligned plain text: title, header, a rule, one line per row (as rich lays it out)."""
    if not rows:
        return "(none)"
    cols = list(columns or rows[0].keys())
    cells = [[_cell(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(line[i]) for line in cells)) for i, c in enumerate(cols)]
    right = [all(_is_num(r.get(c)) for r in rows) for c in cols]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if rj else v.ljust(w) for v, w, rj in zip(values, widths, right, strict=True))

    out = ([title] if title else []) + [line(cols), "  ".join("-" * w for w in widths)]
    return "\n".join(out + [line(c) for c in cells])


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return str(n)
