"""The machine as a sandboxed command sees it: an allowlist, not the root with holes in it.

What is there, read-only: ``/usr`` and the ``/bin``, ``/sbin`` and ``/lib*`` beside it (as
the machine has them: directories, or links into ``/usr``); the parts of ``/etc`` that
programs read to start, resolve names, check certificates and tell the time (``ETC``); a
``passwd`` and ``group`` of its own; the toolchains on ``PATH`` and the Python prefixes (see
``plan_layout``); the spec's ``readable`` paths. Everything else (``/var``, ``/srv``,
``/home``, ``/root``, ``/opt``, ``/mnt``, ``/boot``, ``/sys``, ``/run``, the rest of ``/etc``
with ``shadow`` and ``ssh``) does not exist inside.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

#: The sandbox's own home directory (inside its private /tmp).
SANDBOX_HOME = "/tmp/home"
SANDBOX_TMP = "/tmp"

#: The system's own directories, shown as the machine has them.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

#: What of ``/etc`` programs read (relative to ``/etc``; a ``*`` matches within one name).
#: Deliberately not: ``shadow``, ``gshadow``, ``ssh``, ``ssl/private``, ``sudoers``,
#: ``environment``, and the machine's ``passwd`` and ``group`` (the sandbox has its own).
ETC = (
    # the dynamic loader
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    # names, hosts and the resolver
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "resolv.conf",
    "gai.conf",
    "protocols",
    "services",
    # certificates
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/ca-trust",
    "crypto-policies",
    # time, locale, types
    "localtime",
    "timezone",
    "locale.alias",
    "locale.conf",
    "mime.types",
    "magic",
    # what the system is
    "os-release",
    "lsb-release",
    "debian_version",
    # interpreters and terminals
    "python3*",
    "pip.conf",
    "terminfo",
    "inputrc",
    "fonts",
)


def system_entries(root: str = "/") -> list[tuple[Path, str | None]]:
    """The system directories that exist: ``(path, link target)``, the target None for a
    directory."""
    out: list[tuple[Path, str | None]] = []
    for name in SYSTEM:
        path = Path(root) / name.lstrip("/")
        if path.is_symlink():
            out.append((Path(name), os.readlink(path)))
        elif path.is_dir():
            out.append((Path(name), None))
    return out


def etc_entries(etc: str = "/etc") -> list[tuple[Path, Path]]:
    """``(source, destination)`` of each ``ETC`` entry the machine has: the source with its
    links resolved (``/etc/resolv.conf`` may point into ``/run``), the destination under
    ``/etc``."""
    out: list[tuple[Path, Path]] = []
    for pattern in ETC:
        for found in sorted(glob.glob(os.path.join(etc, pattern))):
            real = Path(os.path.realpath(found))
            if real.exists():
                out.append((real, Path("/etc") / os.path.relpath(found, etc)))
    return out
