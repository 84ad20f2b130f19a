"""Loading manifests: YAML (or JSON) documents -> the API models, with errors a user can act on.

:func:`load` dispatches each document by ``apiVersion``/``kind`` to its model and raises
:class:`berth.api.errors.ManifestError` naming the source, the document index, the kind and
name, and every failing field path with its rule -- never a traceback. Used by the CLI, the
simulator and the demo to read ``examples/`` and user files.
"""

from __future__ import annotations

import collections.abc
import os
import pathlib
import typing

import pydantic
import yaml

from berth.api import errors, keys, podgroups, pods, queues, reservations

__all__ = [
    "MODELS",
    "Manifest",
    "describe",
    "format_location",
    "load",
    "load_documents",
    "problems_of",
]

Manifest: typing.TypeAlias = queues.Queue | podgroups.PodGroup | reservations.Reservation | pods.Pod

MODELS: collections.abc.Mapping[tuple[str, str], type[Manifest]] = {
    (keys.API_VERSION, queues.KIND): queues.Queue,
    (keys.API_VERSION, podgroups.KIND): podgroups.PodGroup,
    (keys.API_VERSION, reservations.KIND): reservations.Reservation,
    ("v1", "Pod"): pods.Pod,
}
"""The kinds :func:`load` knows, by ``(apiVersion, kind)``."""

_SUFFIXES = (".yaml", ".yml", ".json")


def format_location(loc: tuple[int | str, ...], *, whole: str = "(object)") -> str:
    """A pydantic location as a field path: ``spec.owners[0].labelSelector`` (``whole`` for
    the object itself)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or whole


def problems_of(
    exc: pydantic.ValidationError, *, whole: str = "(object)"
) -> tuple[tuple[str, str], ...]:
    """Each error of ``exc`` as ``(field path, message)``, in pydantic's order (``whole``: the
    path of an error about the object itself)."""
    out = []
    for error in exc.errors(include_url=False):
        # Model validators report on the enclosing object; drop pydantic's "Value error, ".
        message = error["msg"].removeprefix("Value error, ")
        # Tagged unions and function validators add non-field parts ("function-after[...]").
        loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and "[" in p))
        out.append((format_location(loc, whole=whole), message))
    return tuple(out)


def describe(
    exc: pydantic.ValidationError, *, whole: str = "(object)", separator: str = "; "
) -> str:
    """Every error of ``exc`` as ``path: message``, joined by ``separator``: what Berth's
    commands, webhooks and files say about input that does not validate."""
    return separator.join(f"{path}: {message}" for path, message in problems_of(exc, whole=whole))


def load_documents(
    documents: collections.abc.Iterable[typing.Any], *, source: str = "<input>"
) -> list[Manifest]:
    """Validate already-parsed documents (``None`` ones, i.e. empty YAML documents, skipped)."""
    loaded: list[Manifest] = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        where = f"{source}: document {index}"
        if not isinstance(document, collections.abc.Mapping):
            raise errors.ManifestError(
                f"{where}: a manifest must be a mapping, not {type(document).__name__}"
            )
        api_version, kind = document.get("apiVersion"), document.get("kind")
        model = MODELS.get((str(api_version), str(kind)))
        if model is None:
            known = ", ".join(f"{v}/{k}" for v, k in MODELS)
            raise errors.ManifestError(
                f"{where}: unknown apiVersion/kind {api_version}/{kind}; known: {known}"
            )
        metadata = document.get("metadata")
        name = metadata.get("name") if isinstance(metadata, collections.abc.Mapping) else None
        try:
            loaded.append(model.model_validate(document))
        except pydantic.ValidationError as exc:
            problems = problems_of(exc)
            lines = "\n".join(f"  {path}: {message}" for path, message in problems)
            raise errors.ManifestError(
                f"{where} ({kind} {name or '<unnamed>'}) is invalid:\n{lines}", problems=problems
            ) from None
    return loaded


def _parse(text: str, *, source: str) -> list[typing.Any]:
    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise errors.ManifestError(f"{source}: not valid YAML: {exc}") from None


def _files(path: pathlib.Path) -> list[pathlib.Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _SUFFIXES)
    if not path.is_file():
        raise errors.ManifestError(f"{path}: no such file or directory")
    return [path]


def load(text_or_path: str | os.PathLike[str]) -> list[Manifest]:
    """Load every manifest in YAML text, a file, or a directory's ``*.yaml``/``*.yml``/``*.json``.

    A ``str`` is YAML text when it spans lines or holds a ``:`` (every manifest does), and a
    path otherwise; a ``PathLike`` is always a path. Documents come back in order (files
    sorted by name).
    """
    if isinstance(text_or_path, str) and ("\n" in text_or_path or ":" in text_or_path):
        return load_documents(_parse(text_or_path, source="<text>"), source="<text>")
    loaded: list[Manifest] = []
    for file in _files(pathlib.Path(text_or_path)):
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise errors.ManifestError(f"{file}: cannot be read: {exc}") from None
        loaded.extend(load_documents(_parse(text, source=str(file)), source=str(file)))
    return loaded
