"""`switchover diff-model OLD NEW` and `switchover cachekey MODEL`: what changes with a new model, and cache keys
that change with it."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from switchover import textfile
from switchover.cli import params
from switchover.cli.common import console, err_console, print_json
from switchover.errors import BadInput, CheckFailed
from switchover.textfile import read_text
from switchover.words import plain


def _show(v: object) -> str:
    """A value from a tokenizer/template file: quoted when text (the exact token), in words otherwise ("(none)";
    "a, b"), markup escaped ('[/INST]')."""
    if isinstance(v, str):
        return escape(repr(v))
    if isinstance(v, list | tuple):
        return escape(", ".join(repr(x) if isinstance(x, str) else plain(x) for x in v) or "none")
    return escape(plain(v, missing="(none)"))


def render(d) -> None:  # d: ModelDiff
    colour = "green" if d.verdict == "hot switch possible" else "bold red"
    console.print(
        f"[{colour}]{d.verdict}[/]  old {escape(d.old.source)}  →  new {escape(d.new.source)}",
        highlight=False,
        soft_wrap=True,
    )
    t = d.tokenizer
    tt = Table(title=f"tokenizer: {'same' if t.same else 'CHANGED'}")
    for col in ("", "old", "new"):
        tt.add_column(col, overflow="fold")
    tt.add_row("fingerprint", t.old.fingerprint[:16], t.new.fingerprint[:16])
    tt.add_row(
        "type / vocab",
        escape(f"{t.old.model_type} / {t.old.vocab_size}"),
        escape(f"{t.new.model_type} / {t.new.vocab_size}"),
    )
    for role in ("bos", "eos", "pad", "unk"):
        tt.add_row(role, _show(t.old.special.get(role)), _show(t.new.special.get(role)))
    tt.add_row(
        "only here",
        f"{t.only_old_count}" + (f", e.g. {_show(t.only_old[:6])}" if t.only_old else ""),
        f"{t.only_new_count}" + (f", e.g. {_show(t.only_new[:6])}" if t.only_new else ""),
    )
    tt.add_row("same token, same id / moved", f"{t.vocab_shared} / {t.vocab_moved}", "")
    console.print(tt)
    ct = Table(title="token counts over the corpus" + (f" (budget {t.budget})" if t.budget else ""))
    for col in ("#", "kind", "old", "new", "ratio", "over budget"):
        ct.add_column(col)
    for c in t.counts:
        ct.add_row(
            escape(str(c.id)),
            escape(str(c.kind)),
            str(c.old),
            str(c.new),
            str(c.ratio),
            "[red]yes[/]" if c.over_budget else "",
        )
    console.print(ct)
    for note in {t.old.encoder_note, t.new.encoder_note} - {None}:
        console.print(f"[dim]note: {escape(str(note))}[/]", highlight=False, soft_wrap=True)
    tp = d.template
    console.print(
        f"[bold]chat template[/]: {'same' if tp.same_renders else 'CHANGED'} "
        f"(old {escape(str(tp.old.origin))}, sha {str(tp.old.sha256)[:12]}; "
        f"new {escape(str(tp.new.origin))}, sha {str(tp.new.sha256)[:12]})",
        highlight=False,
        soft_wrap=True,
    )
    mt = Table(title="role markers and system placement")
    for col in ("", "old", "new"):
        mt.add_column(col, overflow="fold")
    for k in dict.fromkeys(list(tp.old_markers.separators) + list(tp.new_markers.separators)):
        mt.add_row(escape(str(k)), _show(tp.old_markers.separators.get(k)), _show(tp.new_markers.separators.get(k)))
    mt.add_row("system prompt", escape(str(tp.old_markers.system)), escape(str(tp.new_markers.system)))
    mt.add_row(
        "default system (none given)", _show(tp.old_markers.default_system), _show(tp.new_markers.default_system)
    )
    console.print(mt)
    for r in tp.renders:
        if not r.same:
            console.print(
                f"[bold]render diff: {escape(str(r.conversation))}[/]"
                + (f" [red]{escape(str(r.error))}[/]" if r.error else ""),
                highlight=False,
            )
            console.print(r.unified or "(no text)", highlight=False, markup=False)
    g = d.generation
    old_gen, new_gen = (plain(s.fields, empty="no sampling fields") for s in (g.old, g.new))
    console.print(
        f"[bold]generation defaults[/]: old {escape(str(g.old.origin or 'none'))}: {escape(old_gen)}; "
        f"new {escape(str(g.new.origin or 'none'))}: {escape(new_gen)}",
        highlight=False,
        soft_wrap=True,
    )
    gt = Table(title="what a request without sampling fields gets (engine profile + model defaults)")
    for col in ("engine", "old model", "new model", "changed"):
        gt.add_column(col, overflow="fold")

    def fmt(rows: list, side: str) -> str:
        return ", ".join(
            f"{r.field} {plain(getattr(r, side))}" + ("*" if getattr(r, side + "_from") == "model" else "")
            for r in rows
        )

    for eng, rows in g.engines.items():
        changed = [r.field for r in rows if r.changed]
        gt.add_row(
            escape(eng),
            escape(fmt(rows, "old")),
            escape(fmt(rows, "new")),
            f"[yellow]{escape(', '.join(changed))}[/]" if changed else "",
        )
    console.print(gt)
    console.print("[dim]* = taken from the model's own defaults[/]")
    if d.weights_old and d.weights_new:
        w1, w2 = d.weights_old, d.weights_new
        console.print(
            f"[bold]weights[/]: {'same' if d.weights_same else 'different'}; old {w1.hash} ({w1.format}, "
            f"{w1.tensors} tensors, {w1.params:,} params, {plain(w1.dtypes)}); new {w2.hash} ({w2.format}, "
            f"{w2.tensors} tensors, {w2.params:,} params, {plain(w2.dtypes)})",
            highlight=False,
            soft_wrap=True,
        )
    for r in d.reasons:
        mark = "[red]blocks hot switch[/]" if r.blocking else "[yellow]note[/]"
        console.print(
            f"- {mark} {escape(str(r.what))}: {escape(str(r.why))}. → {escape(str(r.action))}",
            highlight=False,
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    @app.command("diff-model")
    def diff_model(
        old: Path = typer.Argument(..., help="Old model: HF directory or .gguf file."),
        new: Path = typer.Argument(..., help="New model: HF directory or .gguf file."),
        corpus: Path = typer.Option(
            None,
            help="Texts for the token-count shift: .jsonl ({text}) or blank-line "
            "separated text. Default: built-in (English, Chinese, code, JSON).",
        ),
        budget: int = typer.Option(
            None, help="Token budget per prompt: flag texts that fit with old, not new.", parser=params.TOKENS
        ),
        old_engine: str = typer.Option(None, help="Engine serving the old model (for effective defaults)."),
        new_engine: str = typer.Option(None, help="Engine serving the new model."),
        weights: bool = typer.Option(True, "--weights/--no-weights", help="Hash the weights (streams every byte)."),
        fail_on_dual_track: bool = typer.Option(False, "--fail-on-dual-track", help="Exit 1 unless hot switch."),
        json_out: bool = params.json_flag("the diff"),
    ) -> None:
        """Tokenizer, chat template, generation defaults and weights of two models, and the verdict: hot switch
        possible or dual-track required.

        Example: switchover diff-model ./llama-v1 ./llama-v2 --budget 4000 --old-engine vllm --new-engine vllm
        """
        from switchover.engines import load_profile
        from switchover.model.diff import diff_models
        from switchover.model.tokenizer import load_corpus

        if (old_engine is None) != (new_engine is None):
            raise BadInput("give both --old-engine and --new-engine, or neither")
        for e in (old_engine, new_engine):
            if e:
                load_profile(e)  # BadInput naming the known engines
        texts = load_corpus(corpus) if corpus else None
        with err_console.status("reading models..."):
            d = diff_models(
                old,
                new,
                corpus=texts,
                budget=budget,
                old_engine=old_engine,
                new_engine=new_engine,
                hash_weights=weights,
            )
        if json_out:
            print_json(d)
        else:
            render(d)
        if fail_on_dual_track and d.verdict != "hot switch possible":
            raise CheckFailed(f"{d.verdict}: " + "; ".join(r.what for r in d.reasons if r.blocking))

    @app.command("cachekey")
    def cachekey_cmd(
        model: Path = typer.Argument(..., help="Model: HF directory or .gguf file."),
        model_id: str = typer.Option(..., "--model-id", help="The model id your service uses.", parser=params.TEXT),
        prompt: str = typer.Option(None, help="The prompt text (or --prompt-file, or stdin with '-')."),
        prompt_file: Path = typer.Option(None, help="File holding the prompt."),
        json_out: bool = params.json_flag("the key and its parts"),
    ) -> None:
        """A cache key = model id | weights hash | tokenizer hash | template hash | prompt hash: a cache keyed
        without them serves the old model's state to the new one.

        Example: switchover cachekey ./llama-v2 --model-id llama-8b --prompt "Hello"
        """
        from switchover.model.cachekey import cachekey

        if (prompt is None) == (prompt_file is None):
            raise BadInput("give exactly one of --prompt or --prompt-file")
        if prompt_file is not None:  # size-capped, FIFO- and device-safe (textfile)
            prompt = read_text(prompt_file, what="--prompt-file (a text file)")
        elif prompt == "-":
            prompt = sys.stdin.read(textfile.MAX_BYTES + 1)
            if len(prompt) > textfile.MAX_BYTES:
                raise BadInput(f"--prompt -: more than {textfile.MAX_BYTES} characters on stdin")
        assert prompt is not None
        key = cachekey(prompt, model_id=model_id, model_path=model)
        if json_out:
            print_json(key)
        else:
            console.print(key.key, highlight=False)
