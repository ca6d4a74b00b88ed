"""Multi-node launches across engines: the node count and rank carry over as they are (intents nnodes, node_rank);
the head node's rendezvous address is one HOST:PORT option in SGLang (--dist-init-addr) and two in vLLM from 0.11.1
(--master-addr, --master-port); a node of rank above 0 runs only its workers in SGLang, which vLLM is told with
--headless. Which engine has which is the profiles' data; nothing here names an engine."""

from __future__ import annotations

from switchover.plan.translate_values import Derived, Render

_ADDRESS, _HOST, _PORT = "dist_init_address", "master_addr", "master_port"


def nodes(r: Render) -> None:
    """The rendezvous address in the target's shape, and the worker-only mode a non-head node needs there."""
    _rendezvous(r)
    _worker_node(r)


def _settable(r: Render, intent: str) -> bool:
    spec = r.dst.flags.get(intent)
    return spec is not None and bool(spec.flag)


def _rendezvous(r: Render) -> None:
    """HOST:PORT in one option where the target takes host and port in two, and back (the source's default for the
    half it does not give)."""
    values, src = r.values, r.src.flags
    if _ADDRESS in values and not _settable(r, _ADDRESS) and _settable(r, _HOST) and _settable(r, _PORT):
        host, sep, port = str(values[_ADDRESS]).rpartition(":")
        if not sep or not port.isdigit():
            return  # not HOST:PORT: left for the copy, which says it is lost
        values.pop(_ADDRESS)
        values[_HOST], values[_PORT] = host.strip("[]"), int(port)
        r.details[_HOST] = r.details[_PORT] = (
            f"{src[_ADDRESS].flag} HOST:PORT is {r.dst.flags[_HOST].flag} HOST and {r.dst.flags[_PORT].flag} PORT in "
            f"{r.target_label} (the head node's address for torch.distributed)"
        )
        r.follows[_ADDRESS] = (_HOST, _PORT)
    elif (_HOST in values or _PORT in values) and not _settable(r, _HOST) and _settable(r, _ADDRESS):
        given = [x for x in (_HOST, _PORT) if x in values]
        host = values.pop(_HOST, src[_HOST].default if _HOST in src else None)
        port = values.pop(_PORT, src[_PORT].default if _PORT in src else None)
        if host is None or port is None:
            return
        values[_ADDRESS] = f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
        r.details[_ADDRESS] = f"the head node's host and port are one HOST:PORT in {r.target_label}" + (
            "" if len(given) == 2 else f" ({'port' if _HOST in given else 'host'}: the {r.src.name} default)"
        )
        for name in given:
            r.follows[name] = _ADDRESS


def _worker_node(r: Render) -> None:
    """A node of rank above 0 runs only its share of the workers (SGLang: no HTTP server there); a target that
    would start an API server unless told otherwise gets its worker-only switch."""
    rank = r.values.get("node_rank")
    spec = r.dst.flags.get("headless")
    if not isinstance(rank, int) or rank <= 0 or spec is None or not spec.flag or not _settable(r, "node_rank"):
        return
    if "headless" in r.values or "headless" in r.src.flags:
        return
    r.values["headless"] = True
    r.derived.append(
        Derived(
            what="headless",
            value=True,
            source=spec.source,
            why=f"node rank {rank} runs only its workers for the head node's instance in "
            f"{r.src.name}; {r.dst.name} does so with {spec.flag} (no API server there)",
        )
    )
