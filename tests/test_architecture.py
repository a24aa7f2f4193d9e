"""The import contracts in pyproject.toml (layers, independent phases, torch-free reports, a TUI
without the analyzer, no circles) hold, and the linter that checks them sees real imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = pytest.mark.fast

LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def _lint(config: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LINT_IMPORTS, "--config", str(config), "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_of_the_project_are_kept(tmp_path):
    result = _lint(REPO / "pyproject.toml", tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_an_import_that_crosses_a_contract_is_reported(tmp_path):
    # the fix phase does import the variants: a contract forbidding it must break
    config = tmp_path / "contracts.toml"
    config.write_text(
        "[tool.importlinter]\n"
        'root_package = "ctc_doctor"\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "fix without the variants"\n'
        'type = "forbidden"\n'
        'source_modules = ["ctc_doctor.analyzer.phases.fix"]\n'
        'forbidden_modules = ["ctc_doctor.analyzer.fixes.variants"]\n'
    )
    result = _lint(config, tmp_path)
    assert result.returncode == 1
    assert "ctc_doctor.analyzer.phases.fix -> ctc_doctor.analyzer.fixes.variants" in result.stdout


def test_the_package_type_checks_clean_under_mypy():
    # the configuration in pyproject.toml; torch and transformers count as Any (see the comment there)
    result = subprocess.run([sys.executable, "-m", "mypy", "ctc_doctor"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_code_keeps_the_configured_line_length_and_format():
    for args in (["check", "ctc_doctor", "tests", "benchmarks"], ["format", "--check", "ctc_doctor", "tests", "benchmarks"]):
        result = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_no_source_file_is_over_700_lines_but_the_zoo():
    allowed = {"ctc_doctor/fixtures/zoo.py"}
    long = {
        str(path.relative_to(REPO)): n
        for path in (REPO / "ctc_doctor").rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 700 and str(path.relative_to(REPO)) not in allowed
    }
    assert long == {}
    folders = {p.parent for p in (REPO / "ctc_doctor").rglob("*.py")}
    crowded = {str(f.relative_to(REPO)): n for f in folders if (n := len(list(f.glob("*.py")))) >= 15}
    assert crowded == {}


@pytest.mark.fast
def test_who_owns_the_model_is_a_type_and_a_callers_model_is_never_released_or_rebuilt():
    """`PhaseContext.owner`: a model the caller handed in (the API's workload, a script's under `run`) has
    no `release` or `rebuild`; only one the doctor built from a TARGET may have them."""
    import typing

    import torch

    from ctc_doctor import Workload
    from ctc_doctor.analyzer.phases.context import Owner, PhaseContext
    from ctc_doctor.analyzer.running.settings import RunSettings

    assert typing.get_args(Owner) == ("doctor", "caller")
    workload = Workload(torch.nn.Linear(2, 2), (torch.ones(1, 2),))
    settings = RunSettings(backend="eager")
    with pytest.raises(ValueError, match="never released or rebuilt"):
        PhaseContext(workload, [], settings, release=lambda: 0)
    assert PhaseContext(workload, [], settings, owner="doctor", release=lambda: 0).release is not None
