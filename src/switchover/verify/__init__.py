"""verify: are the outputs equivalent? Greedy divergence, structured-output validity, long-input behaviour."""

from switchover.verify.divergence import Divergence, GreedySummary, Output, compare, summarize
from switchover.verify.prompts import BUILTIN, PromptCase, load_jsonl
from switchover.verify.report import EquivalenceReport
from switchover.verify.runner import VerifyOptions, run_verify

__all__ = [
    "BUILTIN",
    "Divergence",
    "EquivalenceReport",
    "GreedySummary",
    "Output",
    "PromptCase",
    "VerifyOptions",
    "compare",
    "load_jsonl",
    "run_verify",
    "summarize",
]
