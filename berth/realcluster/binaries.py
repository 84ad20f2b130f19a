"""Where the control plane's binaries come from.

In this order: a directory the user names with ``BERTH_K8S_BIN`` (every component), then
controller-runtime's ``KUBEBUILDER_ASSETS`` (etcd and kube-apiserver; the rest from the cache),
then the cache ``hack/build-k8s`` fills from Go modules (``$BERTH_CACHE/k8s/<version>/bin``,
default ``~/.cache/berth``), shared by every checkout on the machine.

Extra components (:data:`EXTRAS`: peers Berth is measured against, such as Kueue) are built only
when asked (``hack/build-k8s --with NAME``) into ``$BERTH_CACHE/<name>/<version>``, with their
binaries in ``bin/`` and the files of their module source they need at run time in ``config/``;
:func:`extra` finds one.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import os
import pathlib
import shutil
import subprocess

__all__ = [
    "COMPONENTS",
    "EXTRAS",
    "KUBERNETES_VERSION",
    "Binaries",
    "BinariesMissing",
    "build",
    "cache_directory",
    "extra",
    "extra_directory",
    "find",
]

KUBERNETES_VERSION = "v1.36.3"
"""The version ``hack/build-k8s`` pins (keep the two in step)."""

EXTRAS = {"kueue": "v0.17.0", "karpenter": "v1.15.0"}
"""Each extra component's pinned version (``hack/build-k8s``'s ``EXTRAS``; keep them in step)."""

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
_ENVTEST = ("etcd", "kube-apiserver")  # what KUBEBUILDER_ASSETS holds

_HOW = (
    "provide them with BERTH_K8S_BIN=DIR (a directory with etcd, kube-apiserver, "
    "kube-controller-manager, kube-scheduler and kwok), or build them from Go modules with "
    "`bash hack/build-k8s` (needs Go >= 1.26 and the Go module proxy; minutes the first time)"
)


class BinariesMissing(RuntimeError):
    """Some control-plane binary cannot be found; the message says how to provide it."""


@dataclasses.dataclass(frozen=True)
class Binaries:
    """The path of each component's executable."""

    paths: dict[str, pathlib.Path]

    def __getitem__(self, component: str) -> pathlib.Path:
        return self.paths[component]


def _root(environ: collections.abc.Mapping[str, str]) -> pathlib.Path:
    return pathlib.Path(environ.get("BERTH_CACHE") or str(pathlib.Path.home() / ".cache" / "berth"))


def cache_directory(environ: collections.abc.Mapping[str, str] | None = None) -> pathlib.Path:
    """Where ``hack/build-k8s`` puts the binaries of :data:`KUBERNETES_VERSION`."""
    environ = os.environ if environ is None else environ
    return _root(environ) / "k8s" / KUBERNETES_VERSION / "bin"


def extra_directory(
    name: str, environ: collections.abc.Mapping[str, str] | None = None
) -> pathlib.Path:
    """Where ``hack/build-k8s --with NAME`` puts extra component ``name``."""
    environ = os.environ if environ is None else environ
    return _root(environ) / name / EXTRAS[name]


def extra(name: str, environ: collections.abc.Mapping[str, str] | None = None) -> pathlib.Path:
    """Extra component ``name``'s directory (``bin/``, ``config/``), once it is built."""
    if name not in EXTRAS:
        raise ValueError(f"no extra component {name!r} (known: {', '.join(sorted(EXTRAS))})")
    directory = extra_directory(name, environ)
    if not (directory / "bin").is_dir():
        raise BinariesMissing(
            f"no {name} {EXTRAS[name]} in {directory}; build it with "
            f"`bash hack/build-k8s --with {name}` (needs Go >= 1.26 and the Go module proxy; "
            "minutes the first time)"
        )
    return directory


def find(environ: collections.abc.Mapping[str, str] | None = None) -> Binaries:
    """Every component's executable, from the first source that has it."""
    environ = os.environ if environ is None else environ
    sources: list[tuple[str, pathlib.Path, tuple[str, ...]]] = []
    if named := environ.get("BERTH_K8S_BIN"):
        sources.append(("BERTH_K8S_BIN", pathlib.Path(named), COMPONENTS))
    if assets := environ.get("KUBEBUILDER_ASSETS"):
        sources.append(("KUBEBUILDER_ASSETS", pathlib.Path(assets), _ENVTEST))
    sources.append(("the build cache", cache_directory(environ), COMPONENTS))
    paths: dict[str, pathlib.Path] = {}
    for _, directory, provides in sources:
        for component in provides:
            candidate = directory / component
            if component not in paths and os.access(candidate, os.X_OK):
                paths[component] = candidate
    missing = [c for c in COMPONENTS if c not in paths]
    if missing:
        looked = ", ".join(f"{label} ({directory})" for label, directory, _ in sources)
        raise BinariesMissing(f"no {', '.join(missing)} binary in {looked}; {_HOW}")
    return Binaries(paths)


def build(repository: pathlib.Path, *, extras: collections.abc.Sequence[str] = ()) -> Binaries:
    """Run ``hack/build-k8s`` of a checkout (its progress goes to stderr), with the ``extras``
    too, then :func:`find`."""
    script = repository / "hack" / "build-k8s"
    if not script.is_file():
        raise BinariesMissing(f"{script} does not exist (not a Berth checkout); {_HOW}")
    if shutil.which("go") is None:
        raise BinariesMissing(f"no Go toolchain on PATH to build them; {_HOW}")
    asked = [argument for name in extras for argument in ("--with", name)]
    result = subprocess.run(["bash", str(script), *asked], stdout=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        raise BinariesMissing(f"{script} failed (exit {result.returncode}); see its output above")
    return find()
