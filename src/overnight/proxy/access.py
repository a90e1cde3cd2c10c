"""The night's side of the proxy: started when a CLI agent first needs it, a one-time token
per task attempt, each token's requests held and booked by its own ``TaskMeter``.

The socket lives in a directory of its own made for the night (mode 0700 for the directory
the harness keeps; the socket itself is reached inside the sandbox by a bind of the file, as
the sandbox's own uid). The provider's key stays in this process: the proxy reads it from the
harness's environment when it forwards.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from overnight.core.budget import to_usd
from overnight.models.gateway import ModelGateway
from overnight.proxy.booking import TaskMeter
from overnight.seams import ModelAccess

SOCKET_NAME = "model.sock"


class NightProxy:
    """The metering proxy of one night's process."""

    def __init__(
        self,
        gateway: ModelGateway,
        *,
        model: str,
        task_usd: float | None,
        hosts: Sequence[str] = (),
        network: bool = False,
    ) -> None:
        self.gateway = gateway
        self.model = model
        self.task_usd = task_usd
        self.hosts = tuple(hosts)
        """The hosts the provider may reach for a task (``[sandbox] hosts``)."""
        self.network = network
        self._server: object | None = None
        self._dir: Path | None = None
        self.meters: dict[str, TaskMeter] = {}

    @property
    def socket(self) -> Path:
        if self._dir is None:
            raise RuntimeError("the proxy has not started")
        return self._dir / SOCKET_NAME

    def start(self) -> None:
        from overnight.proxy.server import MeteringProxy, upstreams_from_env

        if self._server is not None:
            return
        self._dir = Path(tempfile.mkdtemp(prefix="overnight-proxy-"))
        # The sandbox's uid must reach the socket through its directory.
        os.chmod(self._dir, 0o711)
        server = MeteringProxy(upstreams_from_env(os.environ), socket_path=self.socket)
        server.start()
        os.chmod(self.socket, 0o666)
        self._server = server

    def access_for(self, task_id: str) -> Callable[[str], ModelAccess]:
        """A grant maker for one attempt at ``task_id``: each call admits a new token."""

        def grant(api: str) -> ModelAccess:
            self.start()
            from overnight.proxy.server import MeteringProxy

            server = self._server
            assert isinstance(server, MeteringProxy)
            token = "ovn-" + secrets.token_urlsafe(24)
            meter = TaskMeter(
                self.gateway,
                task_id=task_id,
                task_usd=self.task_usd,
                hosts=self.hosts,
                network=self.network,
            )
            self.meters[token] = meter
            server.admit(token, meter)
            return ModelAccess(
                socket=self.socket,
                token=token,
                api=api,
                model=self.model,
                revoke=lambda: server.revoke(token),
                refused=lambda: meter.refused,
                calls=lambda: meter.forwarded,
                booked_usd=lambda: to_usd(meter.booked_nanos),
            )

        return grant

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            from overnight.proxy.server import MeteringProxy

            assert isinstance(server, MeteringProxy)
            server.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
