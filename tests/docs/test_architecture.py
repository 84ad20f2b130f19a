"""docs/architecture.md names only what exists.

We test these aspects:

- every path the document names in backticks — of the repository (``berth/...``, ``tests/...``,
  ``docs/...``, ``helm/...``), of the package (``kube/binder/decisions.py``,
  ``scheduler/plugins/``), or of Kopf's source (``kopf/_core/...``) — exists;
- every dotted name of Berth's it gives (``berth.kube.transport.writes.Writer``) imports: the
  module, and the attribute after it.
"""

from __future__ import annotations

import importlib
import pathlib
import re

import kopf
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
KOPF = pathlib.Path(kopf.__file__).resolve().parent.parent

_SPANS = re.findall(r"`([^`\n]+)`", DOC.read_text())
_TOP = {p.name for p in ROOT.iterdir()} - {".git"}
_PACKAGES = {p.name for p in (ROOT / "berth").iterdir() if p.is_dir()}


def _paths() -> list[str]:
    found = []
    for span in _SPANS:
        span = span.split(" ", 1)[0].rstrip(",.:;")
        if "/" not in span or not re.fullmatch(r"[\w./-]+", span):
            continue
        first = span.split("/", 1)[0]
        if first in _TOP or first in _PACKAGES or first == "kopf":
            found.append(span)
    return sorted(set(found))


def _names() -> list[str]:
    return sorted({s for s in _SPANS if re.fullmatch(r"berth(\.\w+)+", s)})


def _exists(path: str) -> bool:
    bases = [KOPF] if path.startswith("kopf/") else [ROOT, ROOT / "berth"]
    return any((base / path).exists() for base in bases)


def test_the_document_names_paths_and_names() -> None:
    assert len(_paths()) > 30 and len(_names()) > 20  # the extraction finds what it should


@pytest.mark.parametrize("path", _paths())
def test_every_path_it_names_exists(path: str) -> None:
    assert _exists(path), f"docs/architecture.md names {path}, which does not exist"


@pytest.mark.parametrize("name", _names())
def test_every_dotted_name_it_gives_imports(name: str) -> None:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            assert hasattr(found, attribute), f"{name}: no {attribute}"
            found = getattr(found, attribute)
        return
    pytest.fail(f"{name} does not import")
