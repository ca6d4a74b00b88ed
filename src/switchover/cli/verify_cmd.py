"""`switchover verify`: are the outputs equivalent? Greedy divergence, structured output, long inputs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from switchover import inputs
from switchover.cli import params
from switchover.cli.common import console, err_console, run, show_report
from switchover.errors import BadInput, CheckFailed

if TYPE_CHECKING:  # the verifier is imported when the command runs, so `verify --help` stays fast
    from switchover.verify import EquivalenceReport


def _short(s: str, n: int = 28) -> str:
    s = s.replace("\n", "⏎")
    return s if len(s) <= n else s[: n - 1] + "…"


def render(r: EquivalenceReport) -> None:
    from rich.table import Table

    t = Table(title=escape(f"greedy consistency: old {r.old_url} vs new {r.new_url}"), expand=True)
    for col in ("prompt", "kind", "same", "1st diff char/token", "agree", "common prefix", "old → new", "flags"):
        t.add_column(col, overflow="fold")
    for d in r.greedy:
        where = "-" if d.identical else f"{d.first_char}/{d.first_token if d.first_token is not None else '?'}"
        agree = "" if d.token_agreement is None else f"{d.token_agreement:.2f}"
        after = (
            ""
            if d.identical
            else (
                f"{_short(d.old_text[len(d.common_prefix) :], 16)!r} → "
                f"{_short(d.new_text[len(d.common_prefix) :], 16)!r}"
            )
        )
        t.add_row(
            escape(d.id),
            d.kind,
            "yes" if d.identical else "no",
            where,
            agree,
            escape(repr(_short(d.common_prefix))),
            escape(after),
            "[red]" + escape("; ".join(d.flags)) + "[/]" if d.flags else "",
        )
    console.print(t)
    s = r.summary
    if s:
        console.print(
            f"identical {s.identical}/{s.prompts}, flagged {s.flagged}, failed {s.failed}; token agreement "
            f"{s.token_agreement_mean}; common prefix chars p10/p50/p90 {s.prefix_chars_p10}/{s.prefix_chars_p50}/"
            f"{s.prefix_chars_p90}; tokens p50 {s.prefix_tokens_p50}; mean |Δlogprob| before divergence "
            f"{s.logprob_delta_mean}; near ties at divergence {s.near_ties}",
            highlight=False,
            soft_wrap=True,
        )
    for side in r.structured:
        bad = [f"{c.id}: {c.status} ({c.reason})" for c in side.cases if c.status != "valid"]
        console.print(
            f"structured output {side.url}: {side.summary()}" + (f" — {'; '.join(bad)}" if bad else ""),
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    for li in r.long_inputs:
        if li.skipped:
            console.print(f"long inputs {li.url}: skipped ({li.skipped})", highlight=False, markup=False)
            continue
        lt = Table(title=escape(f"long inputs {li.url} (context {li.context})"))
        for col in (
            "target",
            "prompt tokens",
            "status",
            "finish",
            "tokens",
            "repetition",
            "loop",
            "early stop",
            "drift",
        ):
            lt.add_column(col)
        for c in li.checks:
            lt.add_row(
                f"{c.target_fraction:.0%}",
                str(c.prompt_tokens),
                escape(c.status if not c.error else c.error[:60]),
                str(c.finish_reason),
                str(c.completion_tokens),
                str(c.repetition),
                "[red]yes[/]" if c.loop else "no",
                "[red]yes[/]" if c.early_stop else ("—" if c.early_stop is None else "no"),
                f"[red]{c.script_drift}[/]" if c.script_drift else "",
            )
        console.print(lt)
        if li.boundary:
            b = li.boundary

            def tok(n: int | None, what: str) -> str:
                return f"{n} {what}" if n is not None else f"{what}: not reported by the server"

            console.print(
                f"longest input that succeeded: {tok(b.longest_ok_prompt_tokens, 'prompt tokens')} "
                f"({tok(b.longest_ok_text_tokens, 'text tokens')}, aimed at {b.longest_ok_target_tokens}; "
                f"configured context {b.configured_context}); shortest failure "
                f"{tok(b.shortest_failed_text_tokens, 'text tokens')}, aimed at "
                f"{b.shortest_failed_target_tokens}"
                f"{': ' + b.failure if b.failure else ''} [{b.steps} requests]",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )


def register(app: typer.Typer) -> None:
    @app.command()
    def verify(
        old: str = params.endpoint("old"),
        new: str = params.endpoint("new"),
        config: Path | None = params.config_file(
            "switchover.yaml: take old/new url, model and api_key_env from it.", None
        ),
        prompts: Path = typer.Option(None, "--prompts", help="JSONL prompts: {id, messages|prompt, max_tokens}."),
        model: str = params.served_model(" for both sides"),
        old_model: str | None = typer.Option(None, help="Model name on the old side."),
        new_model: str | None = typer.Option(None, help="Model name on the new side."),
        context: int = typer.Option(
            None,
            help="Context length when the servers do not report it.",
            parser=params.count(lo=64, hi=inputs.MAX_TOKENS),
        ),
        structured: int = typer.Option(
            5, help="Number of JSON-schema prompts per side (0 skips).", parser=params.count(lo=0, hi=100)
        ),
        long_inputs: bool = typer.Option(True, "--long-inputs/--no-long-inputs", help="Run the long-input checks."),
        fail_on_flagged: bool = typer.Option(False, "--fail-on-flagged", help="Exit 1 when any prompt is flagged."),
        api_key_env: str | None = params.api_key_env(" (both sides)"),
        json_out: bool = params.json_flag("the report"),
    ) -> None:
        """Compare outputs of old and new: greedy divergence (chars, tokens, logprobs), JSON-schema validity,
        long inputs at 60-70% of the context and the longest input that really succeeds.

        Example: switchover verify --old http://127.0.0.1:8000 --new http://127.0.0.1:8080 --prompts p.jsonl
        """
        from switchover.config import load_migration
        from switchover.probe import Target
        from switchover.verify import BUILTIN, VerifyOptions, load_jsonl, run_verify

        config = params.discovered_config(config, old, new)
        if config is not None:
            if old or new:
                raise BadInput("give --config or --old/--new, not both")
            mig = load_migration(config)
            old, new = mig.old.url, mig.new.url
            old_model, new_model = old_model or mig.old.model, new_model or mig.new.model
            api_key_env = api_key_env or mig.old.api_key_env
        if not old or not new:
            raise BadInput("give --old URL and --new URL (or --config switchover.yaml)")
        # load_jsonl reads a regular UTF-8 file of bounded size: a FIFO, device, binary or oversized file is one line
        cases = load_jsonl(prompts) if prompts else BUILTIN
        opts = VerifyOptions(structured=structured, long_inputs=long_inputs)
        with err_console.status("verifying...") as status:
            report = run(
                run_verify(
                    Target(old, old_model or model, api_key_env, context),
                    Target(new, new_model or model, api_key_env, context),
                    cases,
                    opts,
                    on_progress=lambda m: status.update(m),
                )
            )
        show_report(report, json_out, render)
        if fail_on_flagged and report.summary and report.summary.flagged:
            raise CheckFailed(f"{report.summary.flagged} prompt(s) flagged")
