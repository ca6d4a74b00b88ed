"""`switchover review`: rate the gateway's spot-check pairs in a local web page, summarize, export, gate."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from switchover.cli import params
from switchover.cli.common import console, print_json, run
from switchover.errors import BadInput

if TYPE_CHECKING:
    from switchover.evidence.review import ReviewSummary
    from switchover.evidence.review_store import ReviewStore

app = typer.Typer(
    no_args_is_help=True,
    help="Human spot-checks of new's answers next to old's (docs/review.md).\n\n"
    "Example: switchover review serve -c switchover.yaml --port 8790",
)

_CONFIG = params.config_file("The migration file with a `gateway:` section.")
_DB = typer.Option(
    None,
    "--db",
    parser=params.PATH,
    help="The review database (default: gateway.run_dir / gateway.review.db of the config).",
)


def _db_path(config: Path, db: Path | None) -> Path:
    if db is not None:
        return db
    from switchover.config import load_migration

    m = load_migration(config)
    if m.gateway is None:
        raise BadInput(f"{config}: no `gateway:` section", hint="or give --db PATH")
    return m.gateway.resolved_run_dir(config) / m.gateway.review.db


def _open(config: Path, db: Path | None) -> ReviewStore | None:
    """The review database; None when the config's is not there yet (no pair sampled: a state, not bad input). A
    database named with --db must exist (exit 2 otherwise: the user named a file that is not there)."""
    from switchover.evidence.review_store import ReviewStore

    path = _db_path(config, db)
    if db is None and not os.path.lexists(path):
        return None
    return ReviewStore.open(path, create=False)


def _nothing_yet(config: Path, db: Path | None) -> str:
    return (
        f"no pairs recorded yet (no review database at {_db_path(config, db)}; the gateway writes it once "
        "gateway.review.pairs_per_day > 0 and pairs are sampled)"
    )


def _summary(store: ReviewStore | None) -> ReviewSummary:
    """The store's summary; an empty one (no pairs, no ratings) when nothing is recorded yet."""
    from switchover.evidence.review import ReviewSummary, summarize

    if store is None:
        return ReviewSummary(types=[], total=summarize("all", 0, {}))
    try:
        return store.summary()
    finally:
        store.close()


@app.command()
def serve(
    config: Path = _CONFIG,
    db: Path = _DB,
    host: str = typer.Option("127.0.0.1", "--host", help="Loopback address to serve on (127.0.0.1 or ::1)."),
    port: int = typer.Option(
        8790, "--port", parser=params.Number(lo=0, hi=65535, integer=True), help="Port (0: any free one)."
    ),
    seconds: float = typer.Option(
        0, "--seconds", parser=params.non_negative(7 * 86400), help="Stop after this long (0: until Ctrl-C)."
    ),
) -> None:
    """Serve the review page on loopback: each pair's prompt with old's and new's answers; rate new as better,
    same, worse or broken. Ratings are stored in the database at once (they survive restarts).

    Example: switchover review serve -c switchover.yaml --port 8790   # then open the printed URL
    """
    from switchover.review.server import ReviewApp, serving

    store = _open(config, db)
    if store is None:
        console.print(f"nothing to review: {escape(_nothing_yet(config, db))}", highlight=False, soft_wrap=True)
        return

    async def main() -> None:
        async with serving(ReviewApp(store), host, port) as url:
            console.print(
                f"review page: {url}  (database {escape(str(store.path))}; Ctrl-C to stop)",
                highlight=False,
                soft_wrap=True,
            )
            await asyncio.sleep(seconds) if seconds else await asyncio.Event().wait()

    try:
        run(main())
    except KeyboardInterrupt:
        pass
    finally:
        store.close()


@app.command()
def summary(config: Path = _CONFIG, db: Path = _DB, json_out: bool = params.json_flag("the summary")) -> None:
    """Ratings per task type: counts and the worse-or-broken share with its 95 % Wilson interval.

    Example: switchover review summary -c switchover.yaml --json
    """
    store = _open(config, db)
    s = _summary(store)
    if json_out:
        print_json(s)
        return
    if store is None:
        console.print(escape(_nothing_yet(config, db)), highlight=False, soft_wrap=True)
    for t in [*s.types, s.total]:
        share = "-" if t.bad_share is None else f"{t.bad_share:.0%} [{t.bad_low:.0%}, {t.bad_high:.0%}]"
        console.print(
            f"{escape(t.task_type):<16} pairs {t.pairs:>5}  rated {t.rated:>5}  "
            + "  ".join(f"{k} {v}" for k, v in t.counts.items())
            + f"  worse-or-broken {share}",
            highlight=False,
            soft_wrap=True,
        )


@app.command()
def export(
    out: Path = typer.Option(
        ..., "--out", "-o", parser=params.OUT_FILE, help="Output file: .jsonl or .parquet (by its suffix, or --format)."
    ),
    config: Path = _CONFIG,
    db: Path = _DB,
    fmt: str = typer.Option("", "--format", help="jsonl or parquet (default: from the file name)."),
) -> None:
    """Every pair with its latest rating, written whole, as JSON lines or Parquet.

    Example: switchover review export -c switchover.yaml -o ratings.parquet
    """
    import tempfile

    from switchover.evidence.review_store import ReviewStore

    kind = fmt or out.suffix.lstrip(".")
    if kind not in ("jsonl", "parquet"):
        raise BadInput(f"--format must be jsonl or parquet, got {kind!r}", hint="or name the file *.jsonl / *.parquet")
    with tempfile.TemporaryDirectory(prefix="switchover-review-") as scratch:
        # nothing recorded yet: the same export of an empty database (a file with the same columns, no rows)
        store = _open(config, db) or ReviewStore.open(Path(scratch) / "empty.sqlite")
        try:
            n = store.export_jsonl(out) if kind == "jsonl" else store.export_parquet(out)
        finally:
            store.close()
    if n == 0 and not os.path.lexists(_db_path(config, db)):
        console.print(escape(_nothing_yet(config, db)), highlight=False, soft_wrap=True)
    console.print(f"{n} pairs written to {escape(str(out))}", highlight=False)


@app.command()
def gate(
    config: Path = _CONFIG,
    db: Path = _DB,
    max_bad: float = typer.Option(
        10.0, "--max-bad", parser=params.PERCENT, help="Worse-or-broken share allowed, percent."
    ),
    min_ratings: int = typer.Option(
        30,
        "--min-ratings",
        parser=params.count(hi=10_000_000),
        help="Ratings needed before the gate can pass (fewer: hold).",
    ),
    json_out: bool = params.json_flag("the verdict"),
) -> None:
    """The rating gate: exit 0 when worse-or-broken ≤ --max-bad with at least --min-ratings ratings (overall and
    for each task type that has that many), 1 when it holds (too few ratings) or fails.

    Example: switchover review gate -c switchover.yaml --max-bad 5 --min-ratings 50
    """
    from switchover.evidence.review import rating_gate

    store = _open(config, db)
    verdict = rating_gate(_summary(store), max_bad / 100, min_ratings)
    if store is None:  # holds, as too few ratings do: no rating is no evidence
        verdict = verdict.model_copy(update={"reason": f"{_nothing_yet(config, db)}; {verdict.reason}"})
    if json_out:
        print_json(verdict)
    else:
        console.print(f"{verdict.verdict}: {escape(verdict.reason)}", highlight=False, soft_wrap=True)
    sys.exit(0 if verdict.verdict == "pass" else 1)
