"""HTML reports rendered on a worker thread while the next notebook runs.

Rendering a report (nbconvert) takes the runner's process 0.4–1 s per notebook, and several seconds for the
first one (templates); the kernel of the next notebook computes meanwhile on the other core. One worker renders
the reports one at a time, in order; :meth:`BackgroundRenders.settle` waits for them and marks a report whose
HTML failed as failed, as the runner did when it rendered in line. A run killed before that leaves executed
notebooks without HTML: resuming the run renders them (the runner's skip path).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from ragnb.runs.files import set_aside


def render_into(report: dict, out_ipynb: Path, html: Path, assets_root: Path | None, error_text: Callable) -> bool:
    """Render ``out_ipynb`` to ``html``; on failure mark ``report`` failed with the reason (and set its metrics JSON
    aside: a failed notebook is never done). True when it worked."""
    from ragnb.runs.pages import notebook_to_html

    try:
        notebook_to_html(out_ipynb, html, assets_root=assets_root)
    except Exception as exc:
        report["error"] = (report["error"] + "\n" if report["error"] else "") + f"HTML rendering failed: {error_text(exc)}"
        report["status"] = "failed"
        set_aside(out_ipynb.with_name(f"{report['stem']}.metrics.json"))  # so that a resume runs it again
        return False
    return True


class BackgroundRenders:
    """One worker thread rendering reports in submission order."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragnb-html")
        self._pending: list[tuple[dict, str, Future]] = []

    def submit(self, report: dict, name: str, out_ipynb: Path, html: Path, assets_root: Path | None,
               error_text: Callable) -> None:
        self._pending.append((report, name, self._pool.submit(render_into, report, out_ipynb, html, assets_root,
                                                              error_text)))

    def settle(self, log: Callable[[str], None]) -> bool:
        """Wait for every submitted report; log the ones whose HTML failed. True when any report changed."""
        pending, self._pending = self._pending, []
        changed = False
        for report, name, future in pending:
            if not future.result():
                log(f"[{name}] FAILED: {report['error']}")
                changed = True
        return changed

    def close(self, log: Callable[[str], None]) -> None:
        self.settle(log)
        self._pool.shutdown(wait=True)
