"""``berth crds``: writing and checking the CRD files through click's CliRunner.

We test these aspects:
- it writes the three files into ``--output-dir`` and says so;
- ``--check`` passes on what it wrote and on the committed ``crds/``;
- ``--check`` exits 1 naming each differing or missing file, and changes nothing;
- the command is listed by ``berth --help``.
"""

from __future__ import annotations

import pathlib

from click.testing import CliRunner

from berth.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = ["podgroups.yaml", "queues.yaml", "reservations.yaml"]


def test_writes_the_three_crds(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(main.cli, ["crds", "--output-dir", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == FILES
    for name in FILES:
        assert f"wrote {out / name}" in result.output


def test_check_passes_after_writing(tmp_path: pathlib.Path) -> None:
    runner = CliRunner()
    runner.invoke(main.cli, ["crds", "--output-dir", str(tmp_path)])
    result = runner.invoke(main.cli, ["crds", "--output-dir", str(tmp_path), "--check"])
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output


def test_check_passes_on_the_committed_crds() -> None:
    result = CliRunner().invoke(main.cli, ["crds", "--output-dir", str(ROOT / "crds"), "--check"])
    assert result.exit_code == 0, result.output


def test_check_fails_naming_changed_and_missing_files(tmp_path: pathlib.Path) -> None:
    runner = CliRunner()
    runner.invoke(main.cli, ["crds", "--output-dir", str(tmp_path)])
    changed = tmp_path / "queues.yaml"
    changed.write_text(changed.read_text().replace("weight must be", "weight should be"))
    (tmp_path / "reservations.yaml").unlink()
    before = changed.read_text()
    result = runner.invoke(main.cli, ["crds", "--output-dir", str(tmp_path), "--check"])
    assert result.exit_code == 1
    assert str(changed) in result.stderr
    assert str(tmp_path / "reservations.yaml") in result.stderr
    assert str(tmp_path / "podgroups.yaml") not in result.stderr
    assert changed.read_text() == before
    assert not (tmp_path / "reservations.yaml").exists()


def test_check_of_a_missing_directory_names_every_file(tmp_path: pathlib.Path) -> None:
    result = CliRunner().invoke(
        main.cli, ["crds", "--output-dir", str(tmp_path / "nope"), "--check"]
    )
    assert result.exit_code == 1
    for name in FILES:
        assert name in result.stderr


def test_listed_in_help() -> None:
    result = CliRunner().invoke(main.cli, ["--help"])
    assert result.exit_code == 0
    assert "crds" in result.output
