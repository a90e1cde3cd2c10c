#!/usr/bin/env python3
"""A CLI agent of the smallest kind, for ``kind = "command"``: it asks its model (OpenAI Chat
Completions at ``OPENAI_BASE_URL``, with ``OPENAI_API_KEY``) once for each step, with the
prompt from its argument or its standard input, and carries out what the answer says: a
JSON object ``{"write": {"path": ..., "text": ...}}`` writes a file, ``{"exit": N}`` exits with
that code after printing a few lines, anything else is its final message.

``--stubborn``: after the model refuses a call, it keeps going (for ten minutes).
``--show-env``: it prints its environment first."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request


def ask(prompt: str, model: str) -> str:
    body = {"model": model, "max_tokens": 512, "messages": [{"role": "user", "content": prompt}]}
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
        },
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        data = json.load(answer)
    return str(data["choices"][0]["message"]["content"] or "")


def main(argv: list[str]) -> int:
    stubborn = "--stubborn" in argv
    if "--show-env" in argv:
        for name, value in sorted(os.environ.items()):
            print(f"ENV {name}={value}", flush=True)
    words = [w for w in argv if w not in ("--stubborn", "--show-env")]
    model = words[0] if words else "toy-model"
    prompt = words[1] if len(words) > 1 else sys.stdin.read()
    print(f"toy agent: {len(prompt)} characters of prompt, model {model}", flush=True)
    for _step in range(5):
        try:
            said = ask(prompt, model)
        except urllib.error.HTTPError as exc:
            print(f"toy agent: the model refused: {exc.code} {exc.read()[:200]!r}", flush=True)
            if stubborn:
                time.sleep(600)
            return 2
        try:
            order = json.loads(said)
        except ValueError:
            print(said, flush=True)
            return 0
        if "write" in order:
            with open(order["write"]["path"], "w") as handle:
                handle.write(order["write"]["text"])
            print(f"toy agent: wrote {order['write']['path']}", flush=True)
            prompt = "done"
        elif "exit" in order:
            for n in range(3):
                print(f"toy agent: failing, line {n}", flush=True)
            return int(order["exit"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
