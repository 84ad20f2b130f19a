"""Fresh virtualenvs with one of the install sets the README documents.

The README's install table (``| `pip install ...` | `command`, ... |``) is the promise:
:func:`documented_sets` reads it; :func:`make_venv` makes a fresh virtualenv with one set
installed as the README says (a wheel of this checkout with the set's extras, or the checkout
itself for an editable row); :func:`build_wheel` builds the wheel from a copy of the
checkout's files, as a release would be. pip resolves pyproject.toml's extras: nothing here
lists their libraries.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys

__all__ = [
    "CORE",
    "README",
    "REPO",
    "InstallSet",
    "Venv",
    "build_wheel",
    "documented_sets",
    "editable_venv",
    "make_venv",
]

REPO = pathlib.Path(__file__).resolve().parents[2]
README = REPO / "README.md"
_ROW = re.compile(r"^\| `(?P<install>pip install [^`]+)`(?P<where>[^|]*)\| (?P<commands>.+) \|$")
_EXTRAS = re.compile(r"\[([a-z,]+)\]")
_COMMAND = re.compile(r"`([^`]+)`")
CORE = "pip install berth-scheduler"


@dataclasses.dataclass(frozen=True)
class InstallSet:
    """One row of the README's install table."""

    install: str  # as the README writes it
    extras: tuple[str, ...]
    editable: bool  # `pip install -e` of the checkout
    commands: tuple[str, ...]

    @property
    def name(self) -> str:
        return ("-e " if self.editable else "") + ("[" + ",".join(self.extras) + "]")


def documented_sets() -> list[InstallSet]:
    """The README's install table, row by row."""
    sets = []
    for line in README.read_text().splitlines():
        found = _ROW.match(line)
        if found is None:
            continue
        install = found["install"]
        extras = _EXTRAS.search(install)
        sets.append(
            InstallSet(
                install=install,
                extras=tuple(extras[1].split(",")) if extras else (),
                editable=" -e " in install,
                commands=tuple(_COMMAND.findall(found["commands"])),
            )
        )
    return sets


# The environment ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Venv:
    """A fresh virtualenv with one install set, and a home of its own."""

    root: pathlib.Path
    home: pathlib.Path

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)

    def env(self, **extra: str) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("BERTH_", "VIRTUAL_ENV", "PYTHON")) and k != "KUBECONFIG"
        }
        path = f"{self.root / 'bin'}{os.pathsep}{base.get('PATH', '')}"
        return base | {
            "PATH": path,
            "HOME": str(self.home),
            "KUBECACHEDIR": str(self.home / "kube-cache"),
            "BERTH_STATE_DIR": str(self.home / "state"),
            **extra,
        }

    def run(
        self, *argv: str, timeout: float = 120, cwd: pathlib.Path = REPO, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` with this virtualenv first on PATH (in the checkout by default)."""
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=cwd,
            env=self.env(**env),
        )


def _sources(target: pathlib.Path) -> pathlib.Path:
    """A copy of the checkout's files (tracked and new, not ignored): what a release holds."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for relative in filter(None, listed.split("\0")):
        source = REPO / relative
        if not source.is_file():
            continue  # deleted in the working tree
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(source.read_bytes())
    return target


def make_venv(root: pathlib.Path, install_set: InstallSet, wheel: pathlib.Path | None) -> Venv:
    """A fresh virtualenv with ``install_set`` installed as the README says: ``wheel`` with
    its extras, or (editable rows, or no wheel) the checkout itself."""
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    venv = Venv(root / "venv", root / "home")
    venv.home.mkdir()
    suffix = f"[{','.join(install_set.extras)}]" if install_set.extras else ""
    if install_set.editable or wheel is None:
        target = ["-e", f"{REPO}{suffix}"]
    else:
        target = [f"{wheel}{suffix}"]
    installed = venv.run(
        venv.bin("python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
        *target, timeout=900,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    return venv


def build_wheel(scratch: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """Berth's wheel, built from a copy of this checkout's files in ``scratch``."""
    sources = _sources(scratch)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(sources)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (found,) = out.glob("berth_scheduler-*.whl")
    return found


def editable_venv(root: pathlib.Path, install_set: InstallSet) -> Venv:
    """A fresh virtualenv with the checkout installed editable with ``install_set``'s extras,
    plus what the README says to add on Python 3.11."""
    venv = make_venv(root, install_set, wheel=None)
    if sys.version_info < (3, 12):
        added = venv.run(
            venv.bin("python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
            "--ignore-requires-python", "helm-sdkpy>=0.1.32,<0.2", timeout=600,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
    return venv
