"""The kernel manager the runner gives papermill.

Two settings differ from jupyter_client's default manager:

* CurveZMQ transport encryption when the kernel declares support (ipykernel does): the kernel then does not log
  "Kernel is running over TCP without encryption" into the terminal of every ``ragnb run``, and code and outputs
  do not cross the loopback interface in plain text;
* ``RAGNB_PLOTLYJS=external`` in the kernel's environment: :func:`ragnb.reports.report.show` then leaves plotly.js
  out of the executed notebook (figures keep only their JSON); the HTML export loads one shared copy per outputs
  folder (:func:`ragnb.runs.pages.notebook_to_html`).
"""

from __future__ import annotations

import os
from typing import Any

import zmq
from jupyter_client.manager import AsyncKernelManager

from ragnb.reports.report import PLOTLYJS_ENV


class RunKernelManager(AsyncKernelManager):
    """An ``AsyncKernelManager`` with transport encryption (when available) and the runner's kernel environment."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ragnb_clients: list[Any] = []  # clients opened on this kernel: closed when the runner shuts it down
        if zmq.has("curve"):  # "auto": encrypt when the kernelspec declares support, else run as before
            self.transport_encryption = "auto"

    async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]
        kw["env"] = kernel_env(kw.get("env"))
        await super().start_kernel(**kw)

    def client(self, **kwargs: Any) -> Any:
        kc = super().client(**kwargs)
        self.ragnb_clients.append(kc)
        return kc


def kernel_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a runner's kernel starts with: ``env`` (default: this process's) and the runner's
    settings."""
    return {**(env or os.environ), PLOTLYJS_ENV: "external"}
