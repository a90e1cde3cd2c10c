"""Read-only checks of the billing night, against the service's ``GET /state``.

    python3 scripts/check.py charge|refund|email|note|closed|all

Exit 0: done. Exit 1: not done yet. Exit 3: a state a person must look at (a second refund
or email went out, or a refund of the wrong amount): the harness parks the task. Exit 4: the
service could not be asked (not done, as far as anyone can tell from here).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

ORDER, TICKET, AMOUNT = "4471", "88231", 2400
CUSTOMER, TEMPLATE = "dana.whitfield@example.com", "refund_issued"

DONE, NOT_DONE, NEEDS_A_PERSON, NO_SERVICE = 0, 1, 3, 4


def state() -> dict:
    url = os.environ.get("BILLING_URL", "").rstrip("/")
    if not url:
        print("BILLING_URL is not set")
        sys.exit(NO_SERVICE)
    try:
        with urllib.request.urlopen(url + "/state", timeout=10) as response:
            return json.loads(response.read())
    except OSError as exc:
        print(f"the billing service did not answer: {exc}")
        sys.exit(NO_SERVICE)


def once(found: list, what: str) -> int:
    if not found:
        print(f"no {what} yet")
        return NOT_DONE
    if len(found) > 1:
        print(f"{len(found)} {what}s: a duplicate went out; a person must reconcile")
        return NEEDS_A_PERSON
    print(f"one {what}: {found[0].get('id')}")
    return DONE


def check(what: str, s: dict) -> int:
    if what == "charge":
        looked = [
            r for r in s["requests"] if r["path"] == f"/charges/{ORDER}" and r["status"] == 200
        ]
        print("the charge was looked up" if looked else "the charge was not looked up")
        return DONE if looked else NOT_DONE
    if what == "refund":
        refunds = [r for r in s["refunds"] if r["order_id"] == ORDER]
        wrong = [r for r in refunds if r["amount_cents"] != AMOUNT]
        if wrong:
            print(f"a refund of the wrong amount: {wrong[0]['amount_cents']} cents")
            return NEEDS_A_PERSON
        return once(refunds, f"refund of order {ORDER}")
    if what == "email":
        emails = [e for e in s["emails"] if e["to"] == CUSTOMER and e["template"] == TEMPLATE]
        return once(emails, f"{TEMPLATE} email")
    if what == "note":
        notes = [n for n in s["notes"] if n["ticket_id"] == TICKET and ORDER in n["text"]]
        print(f"{len(notes)} note(s) on ticket {TICKET} about order {ORDER}")
        return DONE if notes else NOT_DONE
    if what == "closed":
        closed = s["tickets"][TICKET]["status"] == "closed"
        print(f"ticket {TICKET} is {'closed' if closed else 'open'}")
        return DONE if closed else NOT_DONE
    if what == "all":
        codes = [check(part, s) for part in ("charge", "refund", "email", "note", "closed")]
        return max(codes)
    print(f"unknown check {what!r}")
    return 64


if __name__ == "__main__":
    sys.exit(check(sys.argv[1] if len(sys.argv) > 1 else "all", state()))
