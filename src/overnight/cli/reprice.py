"""``overnight reprice RUN``: a recorded night billed again from its exact recorded usage,
under other prices, another model's price or another cache policy. No model call."""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

from pydantic import ValidationError

from overnight.config.price_record import table_from_record
from overnight.config.prices import price_for
from overnight.config.spec import PriceSpec, Spec
from overnight.core.budget import Price, PriceTable, to_nanos
from overnight.core.errors import ConfigError
from overnight.estimate.reprice import render_repricing, reprice_run
from overnight.night.workload_record import facts_of_run
from overnight.store.journal import read_intact_records
from overnight.store.rundir import RunDir, read_json
from overnight.store.spend import spend_totals


def load_prices(path: Path) -> dict[str, Price]:
    """``[<model>]`` tables (or ``[prices.<model>]``, as in a spec) of $ per million tokens."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError("--prices", f"{path} cannot be read: {exc}", "pass a TOML file") from None
    tables = data.get("prices", data)
    out: dict[str, Price] = {}
    for name, table in tables.items():
        try:
            out[str(name)] = PriceSpec.model_validate(table).price()
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(x) for x in problem["loc"])
            raise ConfigError(
                f"--prices [{name}]{'.' + where if where else ''}",
                problem["msg"],
                "give input and output (and optionally the cache rates) in $ per million tokens",
            ) from None
    return out


def _recorded_table(rd: RunDir, spec: Spec) -> tuple[PriceTable | None, str]:
    manifest = read_json(rd.manifest)
    record = manifest.get("prices")
    if isinstance(record, dict):
        try:
            return table_from_record(record), "the prices the run recorded (run.json)"
        except (KeyError, TypeError, ValueError):
            pass
    try:
        return spec.price_table(), "the run's spec and genai-prices today"
    except ConfigError:
        return None, "none recorded"


def cmd_reprice(args: argparse.Namespace) -> int:
    rd = RunDir(args.run_dir)
    spec = Spec.model_validate(read_json(rd.spec))
    facts = facts_of_run(rd.path)
    if facts is None:
        raise ConfigError("RUN", f"{rd.path} has no trace to reprice", "pass a run that ran")
    recorded, source = _recorded_table(rd, spec)
    given = load_prices(args.prices) if args.prices is not None else {}
    provider = spec.model.provider if spec.model is not None else "python"
    if given:
        source = f"{args.prices}, then {source}"

    def price_of(name: str) -> Price:
        if name in given:
            return given[name]
        if recorded is not None and name in recorded:
            return recorded.price(name)
        try:
            return price_for(name, provider, {})
        except ConfigError:
            raise ConfigError(
                "--prices" if name != args.model else "--model",
                f"no price is known for model {name!r}",
                f"pass --prices FILE with a [{name}] table (input, output)",
            ) from None

    totals = spend_totals(read_intact_records(rd.spend))
    result = reprice_run(
        facts,
        price_of,
        model=args.model,
        policy=args.cache,
        min_cacheable=spec.agent.min_cacheable_tokens,
        cap=(spec.budget.usd, spec.budget.finish_at, spec.budget.enforce_at),
        unanswered_nanos=totals.dangling_nanos,
        prices_from=source,
    )
    if (len(facts.all_calls), to_nanos(facts.total_usd)) != (totals.calls, totals.nanos):
        result = type(result)(
            **{
                **result.__dict__,
                "notes": (
                    *result.notes,
                    f"the trace holds {len(facts.all_calls)} booked calls, the spend journal "
                    f"{totals.calls}: lines were dropped from the trace, whose calls are missing",
                ),
            }
        )
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, sort_keys=True))
    else:
        sys.stdout.write(render_repricing(result))
    return 0
