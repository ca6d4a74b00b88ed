"""Rules for the four components of a model switch (weights, tokenizer, chat template, sampling defaults) and the
drain-grace arithmetic (docs/checklist.md, model.* and rollout.*)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from switchover.check.evidence import Evidence
from switchover.check.judging import Judgement, Limits, short_text

if TYPE_CHECKING:
    from switchover.model.tokenizer import TokenizerDiff


def _short(text: str | None, n: int = 40) -> str:
    return short_text(text, n)


def weights(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    d = j.source(ev.diff_model, ev, "diff_model")
    if d is not None:
        same = d.weights_same
        for side, w in (("old", d.weights_old), ("new", d.weights_new)):
            j.fig(f"{side} weights hash", w.hash[:16] if w else None, None, None if w else "not hashed")
        j.fig("old / new quantization", f"{d.old.quantization} / {d.new.quantization}")
        if same is True:
            j.ok.append("the weights are identical (same hash)")
        elif same is False:
            j.warn.append(
                "the weights differ: outputs change by design; caches keyed without the weights hash "
                "serve stale entries — judged by the kernels and template items"
            )
        else:
            j.missing.append("diff-model did not hash the weights")
        for r in d.reasons:  # quantization / context / scale: the weights' side of a model switch
            if r.blocking and not r.what.startswith(("tokenizer", "chat template")):
                j.warn.append(f"diff-model: {r.what}: {r.why} → {r.action}")
    v = ev.verify
    if v is not None and v.summary is not None:
        s = v.summary
        j.link("verify results", "verify.json")
        j.fig("greedy: identical outputs", f"{s.identical}/{s.prompts}")
        if s.prompts and s.identical == s.prompts and not s.failed:
            j.ok.append(f"greedy outputs identical on all {s.prompts} prompts")
        elif d is None:  # without a weights hash, the outputs are the evidence
            j.warn.append(
                f"greedy outputs identical on {s.identical} of {s.prompts} prompts: the served weights "
                "(or their precision) differ"
            )
    elif d is None:
        j.missing.append(ev.why_missing("verify"))
    return j


def _tokenizers_agree(ev: Evidence) -> bool | None:
    lm = ev.live_model
    if lm is None:
        return None
    rows = [t for t in lm.texts if t.old is not None and t.new is not None]
    if not rows:
        return None
    return all(t.same_ids is not False and t.old == t.new for t in rows)


def tokenizer(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    lm = j.source(ev.live_model, ev, "live_model", plot="tokenizer_counts")
    if lm is not None:
        rows = [t for t in lm.texts if t.old and t.new is not None]  # a % change needs a non-zero old count
        if rows:
            shifts = [((t.new - t.old) / t.old * 100, t) for t in rows if t.new is not None and t.old]
            worst, _ = max(shifts, key=lambda s: abs(s[0]))
            j.fig("texts compared (server /tokenize)", len(rows))
            j.fig("worst token-count change", round(worst, 2), "%")
            j.fig("limit: tokenizer_shift_pct", lim.tokenizer_shift_pct, "%")
            over = [(s, t) for s, t in shifts if abs(s) > lim.tokenizer_shift_pct]
            for s, t in over[:4]:
                j.nogo.append(
                    f"{_short(t.text)!r}: {t.old} tokens on old, {t.new} on new ({s:+.0f}%): budgets, "
                    "truncation and max_tokens must be recomputed"
                )
            if not over:
                diff_ids = [t for t in rows if t.same_ids is False]
                if diff_ids:
                    j.warn.append(
                        f"{len(diff_ids)} text(s) get different token ids with counts within "
                        f"{lim.tokenizer_shift_pct:g}% (worst {worst:+.1f}%)"
                    )
                else:
                    j.ok.append(f"{len(rows)} texts tokenize to the same ids on old and new")
        else:
            j.missing.append("servers did not tokenize: " + ("; ".join(lm.notes) or "no /tokenize"))
    if ev.diff_model is not None:
        _tokenizer_files(ev.diff_model.tokenizer, j, lim)
    return j


def _tokenizer_files(tok: TokenizerDiff, j: Judgement, lim: Limits) -> None:
    """diff-model's tokenizer comparison: the same files, or the corpus' token-count ratio against the limit."""
    j.link("model diff", "diff_model.json")
    j.fig("diff-model: tokenizer fingerprints equal", tok.same)
    j.fig("diff-model: corpus token ratio new/old", tok.total_ratio)
    ratio = tok.total_ratio
    if tok.same:
        j.ok.append("diff-model: the tokenizer files are the same")
    elif ratio is not None and abs(ratio - 1) * 100 > lim.tokenizer_shift_pct:
        j.nogo.append(f"diff-model: the tokenizer changed and the corpus costs x{ratio} tokens")
    else:
        j.warn.append(f"diff-model: the tokenizer changed (corpus ratio x{ratio})")


def chat_template(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    lm = j.source(ev.live_model, ev, "live_model")
    if lm is not None:
        rows = [c for c in lm.chats if c.old_prompt_tokens is not None and c.new_prompt_tokens is not None]
        agree = _tokenizers_agree(ev)
        if rows:
            differ = [c for c in rows if c.old_prompt_tokens != c.new_prompt_tokens]
            j.fig("chat conversations compared (usage.prompt_tokens)", len(rows))
            j.fig("conversations with different prompt tokens", len(differ))
            j.fig("tokenizers agree on plain text", agree, None, None if agree is not None else "not compared")
            if differ and agree:
                for c in differ[:3]:
                    roles = "+".join(m.get("role", "?") for m in c.messages)
                    j.nogo.append(
                        f"the same {roles} messages cost {c.old_prompt_tokens} prompt tokens on old and "
                        f"{c.new_prompt_tokens} on new while the tokenizers agree: the servers apply "
                        "different chat templates (instruction following degrades)"
                    )
            elif differ:
                j.missing.append(
                    "prompt tokens differ, but so do the tokenizers: the live check cannot isolate the "
                    "template (diff-model can)"
                )
            else:
                j.ok.append(f"{len(rows)} conversations cost the same prompt tokens on old and new")
        else:
            errs = [c.new_error or c.old_error for c in lm.chats if c.new_error or c.old_error]
            j.missing.append("no chat request reported usage on both sides" + (f": {errs[0]}" if errs else ""))
    d = ev.diff_model
    if d is not None:
        tpl = d.template
        j.link("model diff", "diff_model.json")
        j.fig("diff-model: same rendered conversations", tpl.same_renders)
        if not tpl.same_renders:
            changed = [r.conversation for r in tpl.renders if not r.same]
            j.nogo.append(
                f"diff-model: the chat templates render differently ({', '.join(changed[:4])}): "
                "evaluate the new model with its own template, put the template hash in cache keys"
            )
        else:
            j.ok.append("diff-model: the chat templates render every test conversation the same")
    return j


def sampling_defaults(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    if ev.probe is not None:
        rs = [r for r in ev.probe.results if r.id == "sampling.defaults"]
        if rs:
            r = rs[0]
            j.link("probe results", "probe.json")
            j.fig("probe sampling.defaults: old", _short(r.old.summary, 90) if r.old else None)
            j.fig("probe sampling.defaults: new", _short(r.new.summary, 90) if r.new else None)
            j.fig("probe sampling.defaults verdict", "breaking difference" if r.breaking_difference else r.verdict)
            if r.verdict == "differs":
                text = (
                    f"a request without sampling fields samples differently: old {_short(r.old.summary, 90)!r}, "
                    f"new {_short(r.new.summary, 90) if r.new else '?'!r}"
                )
                (j.nogo if r.breaking_difference else j.warn).append(text)
            elif r.verdict == "same":
                j.ok.append("probe sampling.defaults: a bare request samples alike on old and new")
            else:
                j.missing.append(f"probe sampling.defaults {r.verdict}: {r.old.summary if r.old else ''}")
        else:
            j.missing.append("probe sampling.defaults was not run")
    else:
        j.missing.append(ev.why_missing("probe"))
    d = ev.diff_model
    if d is not None:
        g = d.generation
        j.link("model diff", "diff_model.json")
        changes = g.file_changes
        j.fig("generation_config.json fields changed", len(changes))
        for name, (a, b) in list(changes.items())[:4]:
            j.warn.append(f"generation_config.json {name}: {a} → {b} (requests that omit it change behaviour)")
        notes = g.notes
        j.fig("effective sampling defaults that change (model file + engine)", len(notes))
        for note in notes[:3]:
            j.warn.append(f"diff-model: {note}")
        if not changes and not notes:
            j.ok.append("generation_config.json and the engines' effective sampling defaults are the same")
    return j


def grace(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    g = j.source(ev.grace, ev, "grace", plot="grace")
    if g is None:
        return j
    j.fig("max_tokens", g.max_tokens, "tokens", None if g.max_tokens else "check.grace.max_tokens not set")
    j.fig("TPOT p99 (worst bench step)", g.tpot_p99_ms, "ms", None if g.tpot_p99_ms else g.missing)
    j.fig(
        "TTFT p99 (worst bench step)",
        g.ttft_p99_ms,
        "ms",
        None if g.ttft_p99_ms is not None else (g.missing or g.latency_source),
    )
    if g.need is None:
        j.missing.append(g.missing or "the need could not be computed")
        return j
    req = g.need.required_s
    j.fig("required grace = max_tokens × TPOT p99 + TTFT p99 + margin", req, "s")
    j.fig("margin", g.need.margin_s, "s")
    for f in g.findings:
        where = f"{f.file}:{f.line}"
        j.fig(f"{f.setting} ({where})", f.value_s, "s")
        (j.ok if f.ok else j.nogo).append(f"{where} {f.setting}: {f.message}")
    if not g.configured and not g.findings:
        j.warn.append(
            f"the longest request needs {req:.1f} s to finish, but no grace period was given to compare "
            "(check.grace.drain_grace_s, check.grace.deploy_dir or gateway.drain_seconds)"
        )
    for c in g.configured:
        where = f"{c.source}" + (f":{c.line}" if c.line else "")
        j.fig(f"{c.name} ({where})", c.value_s, "s", None if c.value_s is not None else "not a duration")
        if c.value_s is None:
            j.warn.append(f"{c.name} at {where} is not a duration")
        elif c.value_s < req:
            j.nogo.append(
                f"{c.name} = {c.value_s:g} s ({where}) < {req:.1f} s the longest request needs "
                f"({g.max_tokens} × {g.tpot_p99_ms:.1f} ms + TTFT + margin): in-flight requests are cut "
                "off, clients see empty or half responses"
            )
        else:
            j.ok.append(f"{c.name} = {c.value_s:g} s ({where}) >= {req:.1f} s required")
    return j


def client_timeout(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    g = ev.grace
    if g is None or g.need is None:
        j.missing.append(ev.why_missing("grace") if g is None else (g.missing or "no need computed"))
        return j
    j.link("grace arithmetic", "grace.json")
    ttft = g.need.ttft_p99_ms
    gen = g.need.server_s  # generation + TTFT p99 where measured
    j.fig(
        "server generation time (max_tokens × TPOT p99 + TTFT p99)"
        if ttft is not None
        else "server generation time (max_tokens × TPOT p99; TTFT not measured, left out)",
        round(gen, 2),
        "s",
    )
    j.fig(
        "client timeout",
        g.client_timeout_s,
        "s",
        None if g.client_timeout_s else "check.grace.client_timeout_s not set",
    )
    if g.client_timeout_s is None:
        j.missing.append("check.grace.client_timeout_s not set")
    elif g.client_timeout_s < gen:
        j.warn.append(
            f"client timeout {g.client_timeout_s:g} s < {gen:.1f} s: the server keeps generating for "
            "clients that left (wasted capacity, amplified during the canary)"
        )
    else:
        j.ok.append(f"client timeout {g.client_timeout_s:g} s >= {gen:.1f} s generation")
    return j
