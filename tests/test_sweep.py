"""`ctc-doctor sweep`: many targets in real child processes, shards merged, sweeps diffed.

One small fleet of zoo fixtures and test targets (clean, breaks, recompiles, a builder that raises,
one that hangs in its builder, one that hangs while tracing, a missing script) runs once per module,
whole and as two shards; the tests read what those runs wrote.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctc_doctor.errors import ExitCode, ManifestInvalid
from ctc_doctor.sweep.manifest import parse_shard, read_manifest, shard
from ctc_doctor.sweep.regressions import diff_sweeps
from ctc_doctor.sweep.summary import load_summary, render_text

from .conftest import REPO, TARGETS, ctrl_c_reaches_the_child, run_cli

FLEET = """\
# a small fleet: every status a sweep can give
ctc_doctor.fixtures.zoo:clean
ctc_doctor.fixtures.zoo:print_in_forward          # a break
ctc_doctor.fixtures.zoo:shape_change_dim0         # a recompile
tests/targets/user_targets.py:raises
tests/targets/user_targets.py:sleeps_in_build
tests/targets/user_targets.py:hangs_while_tracing
tests/targets/sweep_targets.py:planted
run -- tests/targets/no_such_script.py
run --timeout 120 -- ctc_doctor/fixtures/scripts/train.py --backend eager --steps 4
"""
TIMEOUT = "4"


def sweep(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("sweep", *args, "--timeout", TIMEOUT, "--jobs", "2", env=env, timeout=300)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fleet swept whole, as shards 1/2 and 2/2 merged, and again with the planted break."""
    root = tmp_path_factory.mktemp("sweep")
    manifest = root / "models.txt"
    manifest.write_text(FLEET)
    dirs = {name: root / name for name in ("whole", "s1", "s2", "merged", "planted")}
    whole = sweep(str(manifest), "--out", str(dirs["whole"]))
    assert whole.returncode == 0, whole.stderr
    # the two shards at once, one job each, as two CI matrix jobs would (more children at once could push
    # a small target past the 4 s --timeout on a loaded 2-core machine)
    shards = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ctc_doctor",
                "sweep",
                str(manifest),
                "--shard",
                f"{i}/2",
                "--out",
                str(dirs[f"s{i}"]),
                "-q",
                "--timeout",
                TIMEOUT,
                "--jobs",
                "1",
            ],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(TARGETS)},
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    for process in shards:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
    merged = run_cli("sweep", "merge", str(dirs["s1"]), str(dirs["s2"]), "--out", str(dirs["merged"]))
    assert merged.returncode == 0, merged.stderr
    # after a planted regression, only the targets it may touch are swept again
    again = root / "again.txt"
    again.write_text("ctc_doctor.fixtures.zoo:clean\ntests/targets/sweep_targets.py:planted\n")
    planted = sweep(str(again), "--out", str(dirs["planted"]), "-q", env={"CTC_TEST_PLANTED_BREAK": "1"})
    assert planted.returncode == 0, planted.stderr
    return {**dirs, "manifest": manifest, "stderr": whole.stderr}  # type: ignore[dict-item]


def rows(path: Path) -> dict[str, dict]:
    data = json.loads((path / "summary.json").read_text())
    return {row["target"]: row for row in data["targets"]}


def test_each_target_gets_its_status_and_a_crash_or_hang_costs_one_row(fleet: dict[str, Path]) -> None:
    got = rows(fleet["whole"])
    statuses = {target: row["status"] for target, row in got.items()}
    assert statuses == {
        "ctc_doctor.fixtures.zoo:clean": "clean",
        "ctc_doctor.fixtures.zoo:print_in_forward": "graph_breaks",
        "ctc_doctor.fixtures.zoo:shape_change_dim0": "recompiles",
        "tests/targets/user_targets.py:raises": "error",
        "tests/targets/user_targets.py:sleeps_in_build": "timeout",
        "tests/targets/user_targets.py:hangs_while_tracing": "timeout",
        "tests/targets/sweep_targets.py:planted": "clean",
        "run -- tests/targets/no_such_script.py": "error",
        "run --timeout 120 -- ctc_doctor/fixtures/scripts/train.py --backend eager --steps 4": "graph_breaks_and_recompiles",
    }
    assert "raised KeyError" in got["tests/targets/user_targets.py:raises"]["reason"]
    assert got["tests/targets/user_targets.py:raises"]["exit_code"] == ExitCode.BUILDER_FAILED
    killed = got["tests/targets/user_targets.py:sleeps_in_build"]
    assert killed["exit_code"] is None and "stopped" in killed["reason"] and killed["report"] is None
    # the child's own --timeout ran out while tracing: exit 8 and a partial report
    partial = got["tests/targets/user_targets.py:hangs_while_tracing"]
    assert partial["exit_code"] == ExitCode.TIMEOUT and partial["report"] is not None
    assert (fleet["whole"] / partial["report"]).exists()
    assert "no such script" in got["run -- tests/targets/no_such_script.py"]["reason"]
    script = got["run --timeout 120 -- ctc_doctor/fixtures/scripts/train.py --backend eager --steps 4"]
    assert {tuple(s["module_paths"]) for s in script["break_sites"]} == {("blocks.1.norm",)}
    assert script["exit_code"] == 0 and ("size", "x", 0) in {(c["kind"], c["source"], c["dim"]) for c in script["recompile_causes"]}


def test_rows_carry_sites_causes_and_their_reports(fleet: dict[str, Path]) -> None:
    got = rows(fleet["whole"])
    breaks = got["ctc_doctor.fixtures.zoo:print_in_forward"]
    assert breaks["graph_count"] == 2 and breaks["graph_break_count"] >= 1
    [site] = breaks["break_sites"]
    assert site["file"] == "fixtures/zoo.py" and site["module_paths"] == ["head"] and site["own_code"]
    report = json.loads((fleet["whole"] / breaks["report"]).read_text())
    assert report["graph_breaks"][0]["gb_type"] == site["gb_type"]
    recompiles = got["ctc_doctor.fixtures.zoo:shape_change_dim0"]
    [cause] = recompiles["recompile_causes"]
    assert (cause["kind"], cause["source"], cause["dim"], cause["recompiles"]) == ("size", "x", 0, 1)
    summary = json.loads((fleet["whole"] / "summary.json").read_text())
    assert summary["totals"]["statuses"] == {
        "clean": 2, "recompiles": 1, "graph_breaks": 1, "graph_breaks_and_recompiles": 1, "error": 2, "timeout": 2
    }  # fmt: skip
    assert summary["totals"]["targets"] == 9 and summary["environment"]["torch"]
    assert summary["manifest_size"] == 9 and summary["shards"] == [] and summary["jobs"] == 2
    assert all((fleet["whole"] / row["log"]).exists() for row in summary["targets"])


def test_summary_md_and_the_terminal_summary(fleet: dict[str, Path]) -> None:
    md = (fleet["whole"] / "summary.md").read_text()
    assert "| status | targets |" in md and "| timeout | 2 |" in md
    assert "## Graph breaks across the fleet" in md and "## Recompile causes across the fleet" in md
    assert "size of x dim 0" in md
    assert "`tests/targets/user_targets.py:raises` | error |" in md
    # the progress names each finished target on its own line; the summary fits 80 columns
    assert "[9/9]" in fleet["stderr"] and "(stopped," in fleet["stderr"]
    text = render_text(load_summary(fleet["whole"])[0], width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "did not finish:" in text and "timeout  tests/targets/user_targets.py:sleeps_in_build" in text


def test_shards_are_disjoint_and_merge_into_the_whole_sweep(fleet: dict[str, Path]) -> None:
    s1, s2 = rows(fleet["s1"]), rows(fleet["s2"])
    assert not set(s1) & set(s2) and len(s1) + len(s2) == 9
    whole, merged = load_summary(fleet["whole"])[0], load_summary(fleet["merged"])[0]
    assert merged.shards == ["1/2", "2/2"] and merged.notes == []
    strip = lambda s: [r.model_dump(exclude={"duration_s"}) for r in s.targets]  # noqa: E731
    assert strip(merged) == strip(whole)
    assert merged.totals.statuses == whole.totals.statuses
    # the merged directory holds the reports it points at
    assert all((fleet["merged"] / r.report).exists() for r in merged.targets if r.report)
    same = run_cli("sweep", "diff", str(fleet["whole"]), str(fleet["merged"]), "--fail-on-regression")
    assert same.returncode == 0, same.stdout
    assert "no regressions" in same.stdout and "0 changed, 9 unchanged" in same.stdout


def test_sweep_diff_catches_the_planted_regression(fleet: dict[str, Path]) -> None:
    done = run_cli("sweep", "diff", str(fleet["whole"]), str(fleet["planted"]), "--fail-on-regression")
    assert done.returncode == ExitCode.CHECK_FAILED, done.stdout
    assert "tests/targets/sweep_targets.py:planted: clean -> graph_breaks" in done.stdout
    assert "REGRESSIONS (2):" in done.stdout  # the new site, and clean -> graph_breaks
    assert "new break site" in done.stdout and "sweep_targets.py" in done.stdout
    # the other way round it is a fix, not a regression
    assert "7 removed" in done.stdout and "the manifests differ" in done.stdout
    back = run_cli("sweep", "diff", str(fleet["planted"]), str(fleet["whole"]), "--fail-on-regression")
    assert back.returncode == 0 and "fixed" in back.stdout and "7 added" in back.stdout


@pytest.mark.fast
def test_sweep_diff_matches_a_site_whose_line_moved() -> None:
    from ctc_doctor.sweep.summary_models import SweepSite, SweepSummary, SweepTarget, Totals

    def summary(line: int, status: str = "graph_breaks") -> SweepSummary:
        site = SweepSite(gb_type="Unsupported", file="pkg/model.py", line=line, function="forward", module_paths=["a"])
        row = SweepTarget(target="pkg:build", index=0, status=status, break_sites=[site])  # type: ignore[arg-type]
        return SweepSummary(
            manifest="m",
            manifest_digest="d",
            manifest_size=1,
            started_at="",
            wall_s=0,
            tool_version="",
            targets=[row],
            totals=Totals(targets=1),
        )

    moved = diff_sweeps(summary(10), summary(14))
    assert moved.regressions == [] and moved.changes == []
    worse = diff_sweeps(summary(10), summary(10, "timeout"))
    assert worse.regressions == ["pkg:build: graph_breaks -> timeout"]


@pytest.mark.fast
def test_the_committed_summary_schema_matches_the_models() -> None:
    from ctc_doctor.sweep.summary_models import sweep_schema_text

    committed = REPO / "ctc_doctor" / "sweep" / "summary.schema.json"
    assert committed.read_text() == sweep_schema_text(), "summary.schema.json is stale: regenerate it with `make schema`"


@pytest.mark.fast
def test_manifest_lines_comments_and_shards(tmp_path: Path) -> None:
    path = tmp_path / "m.txt"
    path.write_text("# head\n\na:build --timeout=7 # one\nrun --nproc 2 -- t.py --x 'a b'\na:build   --timeout=7\nb.py:make --train\n")
    manifest = read_manifest(str(path))
    assert [e.line for e in manifest.entries] == ["a:build --timeout=7", "run --nproc 2 -- t.py --x 'a b'", "b.py:make --train"]
    assert [e.kind for e in manifest.entries] == ["build", "run", "build"]
    assert [e.timeout_s for e in manifest.entries] == [7.0, None, None]
    assert "repeats line 3" in manifest.notes[0]
    assert len({e.slug for e in manifest.entries}) == 3
    parts = [shard(manifest.entries, i, 2) for i in (1, 2)]
    assert [e.index for e in parts[0]] == [0, 2] and [e.index for e in parts[1]] == [1]
    assert parse_shard("2/8") == (2, 8)
    for bad in ("0/2", "3/2", "x", "1/0"):
        with pytest.raises(ManifestInvalid):
            parse_shard(bad)
    for text in ("--backend eager\n", "run t.py\n", "# nothing\n", "a:build --json x.json\n", "run --check -- t.py\n"):
        path.write_text(text)
        with pytest.raises(ManifestInvalid):
            read_manifest(str(path))


def test_bad_input_is_one_line_with_its_exit_code(tmp_path: Path, fleet: dict[str, Path]) -> None:
    missing = run_cli("sweep", str(tmp_path / "nope.txt"))
    assert missing.returncode == ExitCode.USAGE and "manifest not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad_shard = run_cli("sweep", str(fleet["manifest"]), "--shard", "3/2")
    assert bad_shard.returncode == ExitCode.USAGE and "bad --shard" in bad_shard.stderr
    corrupt = tmp_path / "summary.json"
    corrupt.write_text("{not json")
    bad = run_cli("sweep", "diff", str(corrupt), str(fleet["whole"]))
    assert bad.returncode == ExitCode.REPORT_INVALID and "not valid JSON" in bad.stderr
    other = tmp_path / "other"
    other.mkdir()
    data = json.loads((fleet["s1"] / "summary.json").read_text())
    (other / "summary.json").write_text(json.dumps({**data, "manifest_digest": "0" * 64}))
    mixed = run_cli("sweep", "merge", str(other), str(fleet["s2"]), "--out", str(tmp_path / "m"))
    assert mixed.returncode == ExitCode.REPORT_INVALID and "another manifest" in mixed.stderr


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_stops_the_targets_and_still_writes_the_summary(tmp_path: Path, stop: int) -> None:
    manifest = tmp_path / "m.txt"
    manifest.write_text("tests/targets/user_targets.py:sleeps_in_build\nctc_doctor.fixtures.zoo:clean\n")
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "ctc_doctor", "sweep", str(manifest), "--out", str(out), "--jobs", "1"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(TARGETS)},
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_reaches_the_child,
    )
    logs = out / "logs"
    deadline = time.time() + 60
    while not (logs.exists() and any(logs.iterdir())) and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    child_pids = {int(p) for p in subprocess.run(["pgrep", "-f", "sleeps_in_build"], capture_output=True, text=True).stdout.split()}
    process.send_signal(stop)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == ExitCode.INTERRUPTED, stderr
    summary = json.loads((out / "summary.json").read_text())
    [row] = summary["targets"]
    assert row["status"] == "error" and "interrupted" in row["reason"]
    # the stop names what stopped it: a cancelled CI job's SIGTERM is not a Ctrl-C
    name = "SIGTERM" if stop == signal.SIGTERM else "SIGINT"
    assert summary["stopped_by"] == name and name in row["reason"] and f"stopped by {'Ctrl-C, ' * (name == 'SIGINT')}{name}" in stderr
    assert ("Ctrl-C" in row["reason"]) == (stop == signal.SIGINT)
    assert any("never started" in note for note in summary["notes"])
    time.sleep(0.5)
    still = {int(p) for p in subprocess.run(["pgrep", "-f", "sleeps_in_build"], capture_output=True, text=True).stdout.split()}
    assert child_pids and not (child_pids & still), "the stopped target's process outlived the sweep"


@pytest.mark.transformers
def test_the_built_in_transformers_manifest(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from ctc_doctor.fixtures.hf_sweep import manifest, tiny_config

    with pytest.raises(ValueError, match="composite config"):
        tiny_config("clip")
    classes = [row["target"] for row in manifest(limit=45)]
    assert len(classes) == len(set(classes))  # several model types share a class: one row each
    listed = manifest(limit=2)
    assert [row["target"].rsplit(":", 1)[1] for row in listed if row["skip"] is None] == ["BertModel", "GPT2Model"]
    out = tmp_path / "hf"
    done = run_cli("sweep", "transformers", "--limit", "1", "--out", str(out), "--jobs", "1", timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    [row] = summary["targets"]
    assert row["target"] == "ctc_doctor.fixtures.hf_sweep:BertModel" and row["status"] == "recompiles"
    assert [(c["kind"], c["source"], c["dim"]) for c in row["recompile_causes"]] == [("size", "input_ids", 1)]
    assert summary["environment"]["transformers"]


@pytest.mark.fast
def test_a_row_names_where_a_library_break_happens_with_the_users_frame_beside_it():
    """`copy.deepcopy` in a forward breaks inside the standard library's copy.py: the sweep row keys the site
    by that file (two library breaks reached from one user line stay apart) and keeps the user's line."""
    from ctc_doctor.sweep.summary import _sites, _top_cause
    from ctc_doctor.sweep.summary_models import SweepTarget

    from .conftest import saved

    report = saved("analyzed-deepcopy_in_forward")
    [site] = _sites(report)
    own = report.graph_breaks[0].own_frame
    assert not site.own_code and site.file.endswith("copy.py") and site.file != "fixtures/zoo.py"
    assert (site.own_file, site.own_line) == ("fixtures/zoo.py", own.line) and not site.expected
    row = SweepTarget(target="t", index=0, status="graph_breaks", break_sites=[site])
    assert _top_cause(row).endswith(f"copy.py:{site.line} (from fixtures/zoo.py:{own.line})")
