"""Reading recorded API traffic in the four storage formats of ``../shared/cassettes``.

- vcrpy YAML with the raw body in ``response.body.string`` (JSON or SSE text);
- vcrpy YAML whose body was recorded gzip-compressed and stored as ``!!binary``;
- pydantic-ai's YAML, where JSON bodies are stored parsed under ``parsed_body``;
- the anthropic SDK's inline-snapshot JSON list of ``{request, response}``.

Each becomes a list of ``Interaction``s holding what went over the wire.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO.parent / "shared" / "cassettes"


def cassette_dir() -> Path:
    """The cassette folder: ``$OVERNIGHT_CASSETTES`` or ``<repo>/../shared/cassettes``. When it
    is absent the calling test is skipped, except under ``CI=true``, where that is a failure."""
    folder = Path(os.environ.get("OVERNIGHT_CASSETTES") or DEFAULT_DIR)
    if not folder.is_dir():
        reason = (
            f"recorded cassettes not found at {folder} "
            "(set OVERNIGHT_CASSETTES to the folder holding them)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return folder


def yaml_module() -> Any:
    try:
        import yaml
    except ImportError:
        reason = "PyYAML is needed to read the vcr cassettes"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return yaml


@dataclass
class Interaction:
    method: str
    url: str
    request: dict[str, Any] | None
    """The recorded request body, parsed (None when absent or not JSON)."""
    status: int
    headers: dict[str, str]
    body: bytes
    """The response body as the client reads it (decompressed)."""
    wire_encoding: str | None = None
    """``gzip`` when the recording kept the compressed bytes (served compressed again)."""
    wire_body: bytes = b""
    notes: list[str] = field(default_factory=list)

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def path(self) -> str:
        return urlsplit(self.url).path

    @property
    def is_sse(self) -> bool:
        return "text/event-stream" in self.headers.get("content-type", "")

    def json(self) -> Any:
        return json.loads(self.body)


def _flat_headers(raw: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (raw or {}).items():
        if isinstance(value, list):
            value = value[0] if value else ""
        out[str(key).lower()] = str(value)
    return out


def _request_body(raw: object) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, str) and raw:
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _from_snapshot(path: Path) -> list[Interaction]:
    out = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        req, resp = item["request"], item["response"]
        body = resp["body"]
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        out.append(
            Interaction(
                method=req["method"],
                url=req["url"],
                request=_request_body(req.get("body")),
                status=int(resp["status_code"]),
                headers=_flat_headers(resp.get("headers", {})),
                body=data,
                wire_body=data,
            )
        )
    return out


def _from_vcr(path: Path) -> list[Interaction]:
    yaml = yaml_module()
    doc = yaml.load(
        path.read_text(encoding="utf-8"),
        Loader=getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader,
    )
    out = []
    for item in doc["interactions"]:
        req, resp = item["request"], item["response"]
        headers = _flat_headers(resp.get("headers", {}))
        encoding = None
        if "parsed_body" in resp:
            body = json.dumps(resp["parsed_body"]).encode()
            wire = body
        else:
            raw = resp["body"]["string"]
            if isinstance(raw, bytes):
                wire = raw
                if headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(raw)
                    encoding = "gzip"
                else:
                    body = raw
            else:
                body = wire = raw.encode("utf-8")
        request = req.get("parsed_body", req.get("body"))
        out.append(
            Interaction(
                method=req["method"],
                url=req["uri"],
                request=_request_body(request),
                status=int(resp["status"]["code"]),
                headers=headers,
                body=body,
                wire_encoding=encoding,
                wire_body=wire,
            )
        )
    return out


def load(path: Path) -> list[Interaction]:
    if path.suffix == ".json":
        return _from_snapshot(path)
    return _from_vcr(path)


def all_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*/*") if p.suffix in (".yaml", ".yml", ".json"))
