"""`kernlint history`: E-divisive change points over baselines in commit order (issue 20)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from kernlint.baseline import write_baseline
from kernlint.baseline.history import analyse, change_points
from kernlint.baseline.model import SCHEMA_VERSION, Baseline, Launch, ProgramProfile, ScopeProfile
from kernlint.cli import main


def _baseline(gemm_us: float, quant_us: float, rng: np.random.Generator) -> Baseline:
    gemm = rng.normal(gemm_us, gemm_us * 0.002, 10).tolist()
    quant = rng.normal(quant_us, quant_us * 0.002, 10).tolist()
    scope = ScopeProfile(launches=[Launch(pos=0, kind="kernel", name="scale_1x128_kernel", category="quant",
                                          us=quant),
                                   Launch(pos=1, kind="kernel", name="nvjet_gemm", category="gemm", us=gemm)])
    program = ProgramProfile(runs=10, timing_basis="device", scopes={"module Linear_0": scope},
                             total_us=[g + q for g, q in zip(gemm, quant, strict=True)])
    return Baseline(schema_version=SCHEMA_VERSION, kernlint_version="test", created="2026-12-01T00:00:00Z",
                    programs={"trace": program})


def _history(step_at: int | None, n: int = 30, step: float = 1.01, drift: float = 0.0):
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        factor = (step if step_at is not None and i >= step_at else 1.0) * (1 + drift * i)
        out.append(_baseline(100.0 * factor, 20.0, rng))
    return out


def test_a_one_percent_step_after_baseline_20_is_found_there_and_nowhere_else():
    history, _ = analyse(_history(20), [f"b{i + 1:02d}" for i in range(30)])
    assert {c.baseline for c in history.change_points} == {"b21"}
    series = {c.series for c in history.change_points}
    assert series == {"trace / module Linear_0 / nvjet_gemm", "trace / total device time"}
    gemm = [c for c in history.change_points if c.series.endswith("nvjet_gemm")][0]
    assert gemm.relative == pytest.approx(0.01, abs=0.002) and gemm.p_value < 0.01


def test_an_unchanged_history_has_no_change_point():
    history, _ = analyse(_history(None), [f"b{i}" for i in range(30)])
    assert history.series == 3 and history.change_points == []


def test_a_slow_drift_is_found_though_every_step_is_small():
    history, _ = analyse(_history(None, drift=0.001), [f"b{i}" for i in range(30)])
    assert any(c.series.endswith("nvjet_gemm") for c in history.change_points)
    assert not any("scale_1x128" in c.series for c in history.change_points)


def test_change_points_of_a_plain_series():
    values = [10.0] * 12 + [10.5] * 12
    assert [i for i, _ in change_points(values)] == [12]
    assert change_points([10.0] * 24) == []


def test_an_appended_history_reuses_the_cache_and_finds_the_same_points():
    names = [f"b{i + 1:02d}" for i in range(30)]
    full = _history(20)
    _, cache = analyse(full[:25], names[:25])
    again, _ = analyse(full, names, cache=cache)
    fresh, _ = analyse(full, names)
    assert again.reused == 3 and [c.baseline for c in again.change_points] == [c.baseline for c in
                                                                                fresh.change_points]


def test_the_history_command_reads_a_folder_in_name_order(tmp_path):
    for i, b in enumerate(_history(20)):
        write_baseline(tmp_path / f"b{i + 1:02d}.json", b)
    cache = tmp_path / "cache" / "history.json"
    cache.parent.mkdir()
    result = CliRunner().invoke(main, ["history", str(tmp_path), "--format", "json", "--cache", str(cache),
                                       "--isolated"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["series"] == 3 and {c["baseline"] for c in data["change_points"]} == {"b21.json"}
    assert json.loads(cache.read_text())["version"] == 1
    text = CliRunner().invoke(main, ["history", str(tmp_path), "--isolated"])
    assert text.exit_code == 0 and "at b21.json (#21)" in text.output


def test_too_short_a_history_is_one_line(tmp_path):
    for i, b in enumerate(_history(None, n=3)):
        write_baseline(tmp_path / f"b{i}.json", b)
    result = CliRunner().invoke(main, ["history", str(tmp_path), "--isolated"])
    assert result.exit_code == 2
    assert result.output.strip() == "kernlint: error: history needs 4 or more baselines, got 3"
