"""Node pool specs on the command line: ``berth sim --nodes SPEC``.

A spec is whitespace-separated words (the same shape ``berth emulator --nodes`` takes)::

    [<count>x] <name>=<quantity>[,<name>=<quantity>...] [label=<key>=<value>]...
        [taint=<key>[=<value>]:<effect>]... [prefix=<name-prefix>]

    100x cpu=64,memory=512Gi,nvidia.com/gpu=8 label=pool=gpu taint=dedicated=gpu:NoSchedule

The count defaults to 1; ``pods`` defaults to 110 as on a kubelet; the name prefix defaults to
``pool<index>-`` so that several ``--nodes`` give distinct names. Used by ``berth sim``.
"""

from __future__ import annotations

import re

import pydantic

from berth.api import errors as api_errors
from berth.api import manifests, pods, quantities
from berth.sim import errors, scenarios

__all__ = ["parse"]

_COUNT = re.compile(r"^([1-9][0-9]*)x$")
_TAINT = re.compile(r"^(?P<key>[^=:]+)(?:=(?P<value>[^:]*))?:(?P<effect>[A-Za-z]+)$")


def parse(spec: str, *, index: int = 0) -> scenarios.NodePool:
    """The pool described by ``spec``; ``index`` numbers the default name prefix."""
    words = spec.split()
    if not words:
        raise errors.NodeSpecError("a node spec is empty: try '10x cpu=8,memory=32Gi'")
    count = 1
    match = _COUNT.match(words[0])
    if match:
        count = int(match[1])
        words = words[1:]
    allocatable: dict[str, str] = {}
    labels: dict[str, str] = {}
    taints: list[scenarios.Taint] = []
    prefix = f"pool{index}-"
    for word in words:
        head, _, rest = word.partition("=")
        if head == "label":
            key, sep, value = rest.partition("=")
            if not key or not sep:
                raise errors.NodeSpecError(f"{word!r}: a label is label=<key>=<value>")
            labels[key] = value
        elif head == "taint":
            taints.append(_taint(word, rest))
        elif head == "prefix":
            prefix = rest
        elif "=" in word:
            allocatable.update(_resources(word))
        else:
            raise errors.NodeSpecError(
                f"{word!r} is not <count>x, <resource>=<quantity>, label=, taint= or prefix="
            )
    if not allocatable:
        raise errors.NodeSpecError(f"{spec!r} gives the nodes no resources (e.g. cpu=8)")
    try:
        return scenarios.NodePool.model_validate(
            {
                "count": count,
                "namePrefix": prefix,
                "allocatable": allocatable,
                "labels": labels,
                "taints": [t.to_api() for t in taints],
            }
        )
    except pydantic.ValidationError as exc:
        problems = manifests.describe(exc)
        raise errors.NodeSpecError(f"{spec!r}: {problems}") from None


def _resources(word: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in word.split(","):
        name, sep, text = item.partition("=")
        if not name or not sep:
            raise errors.NodeSpecError(f"{item!r}: a resource is <name>=<quantity>")
        try:
            milli = quantities.parse_milli(text)
        except api_errors.QuantityError as exc:
            raise errors.NodeSpecError(f"{name}: {exc}") from None
        if milli < 0:
            raise errors.NodeSpecError(f"{name}: quantity {text!r} must not be negative")
        out[name] = text
    return out


def _taint(word: str, rest: str) -> scenarios.Taint:
    match = _TAINT.match(rest)
    effects = ", ".join(e.value for e in pods.TaintEffect)
    if not match or match["effect"] not in {e.value for e in pods.TaintEffect}:
        raise errors.NodeSpecError(
            f"{word!r}: a taint is taint=<key>[=<value>]:<effect> with effect one of {effects}"
        )
    return scenarios.Taint(
        key=match["key"], value=match["value"] or None, effect=pods.TaintEffect(match["effect"])
    )
