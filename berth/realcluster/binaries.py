"""Where the control plane's binaries come from.

In this order: a directory the user names with ``BERTH_K8S_BIN`` (every component), then
controller-runtime's ``KUBEBUILDER_ASSETS`` (etcd and kube-apiserver; the rest from the cache),
then the cache ``hack/build-k8s`` fills from Go modules (``$BERTH_CACHE/k8s/<version>/bin``,
default ``~/.cache/berth``), shared by every checkout on the machine.
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
    "KUBERNETES_VERSION",
    "Binaries",
    "BinariesMissing",
    "build",
    "cache_directory",
    "find",
]

KUBERNETES_VERSION = "v1.36.3"
"""The version ``hack/build-k8s`` pins (keep the two in step)."""

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


def cache_directory(environ: collections.abc.Mapping[str, str] | None = None) -> pathlib.Path:
    """Where ``hack/build-k8s`` puts the binaries of :data:`KUBERNETES_VERSION`."""
    environ = os.environ if environ is None else environ
    root = environ.get("BERTH_CACHE") or str(pathlib.Path.home() / ".cache" / "berth")
    return pathlib.Path(root) / "k8s" / KUBERNETES_VERSION / "bin"


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


def build(repository: pathlib.Path) -> Binaries:
    """Run ``hack/build-k8s`` of a checkout (its progress goes to stderr), then :func:`find`."""
    script = repository / "hack" / "build-k8s"
    if not script.is_file():
        raise BinariesMissing(f"{script} does not exist (not a Berth checkout); {_HOW}")
    if shutil.which("go") is None:
        raise BinariesMissing(f"no Go toolchain on PATH to build them; {_HOW}")
    result = subprocess.run(["bash", str(script)], stdout=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        raise BinariesMissing(f"{script} failed (exit {result.returncode}); see its output above")
    return find()
