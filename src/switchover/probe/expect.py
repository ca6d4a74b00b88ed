"""What the engine profile (engines/data/<engine>.yaml, cited from source) predicts each probe will observe, in
the probe's own value vocabulary. A mismatch means the live server differs from the profile: another version,
a non-default flag, or a profile error; the probe reports it, it does not decide the verdict."""

from __future__ import annotations

from typing import Any

from switchover.engines import ApiSemantics

_SHAPE = {"openai_nested": "nested", "llamacpp_nested": "nested", "openai_flat": "flat", "tgi": "tgi"}


def expected(probe_id: str, api: ApiSemantics) -> Any | None:
    """The value the profile predicts for a probe at default launch flags; None when it predicts nothing."""
    status = api.validation_status
    match probe_id:
        case "stop.count":
            if api.max_stop_strings is not None and api.max_stop_strings < 6:
                return {"accepted": False, "status": status, "honoured": 0}
            return {"accepted": True, "status": 200, "honoured": 6}
        case "stop.kept":
            return "kept" if api.stop_string_in_output else "trimmed"
        case "stop.matching":
            return "token" if api.stop_matching == "token_ids" else "text"
        case "finish.length":
            return "length"
        case "finish.eos":
            return "stop"
        case "finish.stop_string":
            return "stop_sequence" if "stop_sequence" in api.finish_reasons else "stop"
        case "request.unknown_field":
            return f"rejected {status}" if api.unknown_field_policy == "reject" else "ignored"
        case "sampling.seed_repeat":
            return {"honored": "reproduced", "needs_flag": "not reproduced"}.get(api.seed_per_request)
        case "n.honoured":
            return {"supported": {"choices": 3, "status": 200}, "limited": {"choices": 3, "status": 200},
                    "ignored": {"choices": 1, "status": 200}}.get(api.n_gt_1)
        case "usage.stream_include_usage":
            return "present" if api.streaming_usage else "absent"
        case "usage.cached_tokens":
            return {"always": "reported, hit", "with_flag": "not reported", "never": "not reported"}.get(
                api.cached_tokens_reported)
        case "response_format.json_schema":
            return {"accepted": True} if api.openai_json_schema else {"accepted": False, "status": status}
        case "length.over_context":
            return {"clamp": "clamped to context", "finish_length": "clamped to context", "reject_400": "error 400",
                    "reject_422": "error 422"}.get(api.context_overflow)
        case "error.malformed" | "error.invalid_value":
            return {"status": status, "shape": _SHAPE.get(api.error_body)}
        case "error.unknown_model":
            return {"status": 404} if api.unknown_model_policy == "reject_404" else {"status": 200}
        case "sampling.defaults":
            d = api.default_sampling
            if d.get("temperature") == 0:
                return "greedy"
            if d.get("temperature") == 1.0 and d.get("top_p", 1.0) == 1.0 and d.get("top_k", 0) in (0, -1) \
                    and not d.get("min_p"):
                return "same as temperature=1, top_p=1"  # when the model's generation_config sets no sampling
            if d.get("temperature") is not None:
                return "sampled with other server defaults"
            return None
    return None


def matches(observed: Any, predicted: Any) -> bool:
    """Equal, or (for dicts) every predicted key equal in the observation."""
    if isinstance(predicted, dict) and isinstance(observed, dict):
        return all(observed.get(k) == v for k, v in predicted.items())
    return bool(observed == predicted)
