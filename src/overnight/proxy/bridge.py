"""The sandbox's end of the metering proxy: a TCP port on the sandbox's loopback whose every
connection is carried byte for byte to the proxy's unix socket, bound into the sandbox.

Run inside the sandbox, by path, with the system's ``python3`` (the standard library only)::

    python3 bridge.py --listen 127.0.0.1:PORT --socket /path/proxy.sock -- cmd args...

It listens first, then runs the command (with ``OVERNIGHT_BRIDGE_PORT`` set to the port, which
``PORT`` 0 lets the system choose), passes it the signals it is sent, and exits when the
command exits, with its exit code (128 + the signal's number when a signal ended it). Without a
command it carries connections until it is terminated.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading

CHUNK = 65536


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends, then end ``dst``'s half; on a reset, end
    both connections so that the other direction stops too."""
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _carry(client: socket.socket, path: str) -> None:
    proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proxy.connect(path)
    except OSError as exc:
        sys.stderr.write(f"bridge: cannot reach {path}: {exc}\n")
        proxy.close()
        client.close()
        return
    back = threading.Thread(target=_pump, args=(proxy, client), daemon=True)
    back.start()
    _pump(client, proxy)
    back.join()
    proxy.close()
    client.close()


def _accept(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        with contextlib.suppress(OSError):
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_carry, args=(client, path), daemon=True).start()


def listen(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host or "127.0.0.1", int(port)))
    listener.listen(128)
    return listener


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, command = args[:at], args[at + 1 :]
    parser = argparse.ArgumentParser(
        prog="bridge.py", description="Carry TCP connections to a unix socket."
    )
    parser.add_argument("--listen", required=True, help="HOST:PORT to listen on (PORT 0: any)")
    parser.add_argument("--socket", required=True, help="the proxy's unix socket")
    options = parser.parse_args(args)
    try:
        listener = listen(options.listen)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"bridge: cannot listen on {options.listen}: {exc}\n")
        return 70
    port = listener.getsockname()[1]
    threading.Thread(target=_accept, args=(listener, options.socket), daemon=True).start()
    if not command:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        threading.Event().wait()
    env = dict(os.environ, OVERNIGHT_BRIDGE_PORT=str(port))
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        sys.stderr.write(f"bridge: cannot run {command[0]}: {exc}\n")
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    code = child.wait()
    listener.close()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
