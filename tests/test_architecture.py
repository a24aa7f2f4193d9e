"""The import contracts in pyproject.toml (layers, independent phases, torch-free reports, a TUI
without the analyzer, no circles) hold, and the linter that checks them sees real imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import REPO

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
