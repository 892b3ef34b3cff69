"""The kernel manager the runner gives papermill.

Three settings differ from jupyter_client's default manager:

* Unix-domain sockets (ZeroMQ ``ipc``) where the system has them, in a short directory of the kernel's own: with
  TCP, jupyter_client picks five free loopback ports, closes them, and the kernel binds them a moment later — while
  the runner starts the next notebook's kernel, another connection's ephemeral port can take one in between and the
  kernel dies with "Address already in use" (a notebook then fails after a 60 s wait for a kernel that is gone).
  A socket path cannot be taken by anyone else. Windows, or a temp folder whose path is too long for a socket,
  keeps TCP;

* CurveZMQ transport encryption when the kernel declares support (ipykernel does): the kernel then does not log
  "Kernel is running over TCP without encryption" into the terminal of every ``ragnb run``, and code and outputs
  do not cross the loopback interface in plain text;
* ``RAGNB_PLOTLYJS=external`` in the kernel's environment: :func:`ragnb.reports.report.show` then leaves plotly.js
  out of the executed notebook (figures keep only their JSON); the HTML export loads one shared copy per outputs
  folder (:func:`ragnb.runs.pages.notebook_to_html`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import zmq
from jupyter_client.manager import AsyncKernelManager

from ragnb.reports.report import PLOTLYJS_ENV


# A Unix socket path holds at most 104 bytes on macOS (108 on Linux); the kernel appends "-<n>" to the prefix.
_MAX_SOCKET_PREFIX = 96


class RunKernelManager(AsyncKernelManager):
    """An ``AsyncKernelManager`` over Unix sockets (where available), with transport encryption (when available)
    and the runner's kernel environment."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ragnb_clients: list[Any] = []  # clients opened on this kernel: closed when the runner shuts it down
        self.ragnb_socket_dir: str | None = None
        if zmq.has("curve"):  # "auto": encrypt when the kernelspec declares support, else run as before
            self.transport_encryption = "auto"
        self._ragnb_wants_sockets = "ip" not in kwargs and "transport" not in kwargs

    def _use_unix_sockets(self) -> None:
        # Made when the kernel starts, so a manager that never starts one leaves no folder behind.
        if not self._ragnb_wants_sockets or self.ragnb_socket_dir is not None or self.has_kernel:
            return
        if os.name != "posix" or not zmq.has("ipc"):
            return
        folder = tempfile.mkdtemp(prefix="ragnb-k")
        prefix = os.path.join(folder, "k")
        if len(prefix.encode()) > _MAX_SOCKET_PREFIX:
            os.rmdir(folder)
            return
        self.ragnb_socket_dir = folder
        self.transport = "ipc"
        self.ip = prefix

    async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]
        kw["env"] = kernel_env(kw.get("env"))
        self._use_unix_sockets()
        await super().start_kernel(**kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and self.ragnb_socket_dir is not None:
            shutil.rmtree(self.ragnb_socket_dir, ignore_errors=True)
            self.ragnb_socket_dir = None

    # AsyncKernelManager binds this name to its base's function, which would skip the override above.
    cleanup_resources = _async_cleanup_resources

    def client(self, **kwargs: Any) -> Any:
        kc = super().client(**kwargs)
        self.ragnb_clients.append(kc)
        return kc


def kernel_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a runner's kernel starts with: ``env`` (default: this process's) and the runner's
    settings."""
    return {**(env or os.environ), PLOTLYJS_ENV: "external"}
