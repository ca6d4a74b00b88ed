"""`switchover overload`: past its concurrency limit, does an engine reject or make requests wait?"""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from switchover.cli import params
from switchover.cli.common import console, err_console, print_json, run
from switchover.errors import BadInput
from switchover.redaction import redact


def register(app: typer.Typer) -> None:
    @app.command()
    def overload(
        url: str = typer.Argument(..., help="Base URL of the engine.", parser=params.URL),
        engine: str | None = typer.Option(
            None,
            "--engine",
            help="Its engine (vllm, llamacpp, ...): read its "
            "waiting-requests gauge and its way to ignore EOS from the profile.",
            parser=params.Text(120),
        ),
        model: str | None = params.served_model(),
        max_concurrency: int = typer.Option(
            16,
            "--max-concurrency",
            parser=params.count(hi=4096),
            help="Highest concurrency tried (levels double from 1).",
        ),
        waves: int = typer.Option(
            2, "--waves", parser=params.count(hi=100), help="Requests per level = concurrency x waves."
        ),
        max_tokens: int = typer.Option(32, "--max-tokens", parser=params.TOKENS, help="Output tokens per request."),
        timeout_s: float = typer.Option(
            120.0,
            "--timeout-s",
            parser=params.SECONDS,
            help="Per request (and for the first GET /v1/models: no answer within it is exit 3).",
        ),
        max_run_s: float = typer.Option(
            900.0,
            "--max-run-s",
            parser=params.SECONDS,
            help="The whole run: a level still running then is stopped and the report says so.",
        ),
        api_key_env: str | None = params.api_key_env(),
        json_out: bool = params.json_flag("the report"),
    ) -> None:
        """Raise concurrency past the engine's limit and say whether it rejects (429/503), queues (requests wait:
        its waiting gauge, or TTFT grows while TPOT holds) or slows (TPOT grows), and from which concurrency on
        (docs/probe.md: reject or wait). Bounded: (1 + 2 + 4 + ... + max) x waves requests, each by --timeout-s, the
        whole run by --max-run-s. Exit 3 when nothing answers (refused, timed out, TLS against plain HTTP), 1 when
        every request at concurrency 1 failed.

        Example: switchover overload http://127.0.0.1:8000 --engine vllm --max-concurrency 32 --json
        """
        from switchover.engines.profile import load_profile
        from switchover.probe.overload import run_overload

        profile = load_profile(engine) if engine else None
        if waves * max_concurrency * 2 > 100_000:
            raise BadInput("--max-concurrency x --waves is too large (at most 100,000 requests in all)")
        with err_console.status("raising concurrency..."):
            report = run(
                run_overload(
                    url,
                    model=model,
                    profile=profile,
                    max_concurrency=max_concurrency,
                    waves=waves,
                    max_tokens=max_tokens,
                    timeout_s=timeout_s,
                    api_key_env=api_key_env,
                    max_run_s=max_run_s,
                )
            )
        if json_out:
            print_json(report.model_copy(update={"url": redact(report.url)}))  # a key may sit in a URL's path
            return
        table = Table(title=f"overload: {escape(redact(url))}" + (f" ({report.engine})" if report.engine else ""))
        for col in (
            "concurrency",
            "sent",
            "ok",
            "429/503",
            "other errors",
            "TTFT p50 ms",
            "TTFT p90 ms",
            "TPOT p50 ms",
            "waiting (max)",
            "s",
        ):
            table.add_column(col, justify="right")

        def f(x: float | None) -> str:
            return "-" if x is None else f"{x:.1f}"

        for s in report.steps:
            table.add_row(
                str(s.concurrency),
                str(s.sent),
                str(s.ok),
                str(s.rejected),
                str(s.other_errors),
                f(s.ttft_p50_ms),
                f(s.ttft_p90_ms),
                f(s.tpot_p50_ms),
                f(s.waiting_max),
                f(s.seconds),
            )
        console.print(table)
        slots = f"; the engine reports {report.slots} slots" if report.slots else ""
        if report.slots is None and report.slots_source:
            slots = f"; slots {report.slots_source}"
        console.print(f"{report.verdict.upper()}: {escape(report.reason)}{slots}", highlight=False, soft_wrap=True)
        if report.stopped:
            console.print(f"[yellow]stopped early:[/] {escape(report.stopped)}", highlight=False, soft_wrap=True)
