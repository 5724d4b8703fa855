"""`kernlint history`: E-divisive change points over baselines in commit order (issue 20)."""
from __future__ import annotations

import json
import os

import msgspec
import numpy as np
import pytest
from click.testing import CliRunner

from kernlint.baseline import write_baseline
from kernlint.baseline.history import (
    MAX_CACHE_BYTES,
    analyse,
    change_points,
    permutation_length,
    permutations_for,
    smallest_permutation_p,
)
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
    assert json.loads(cache.read_text())["version"] == 2
    text = CliRunner().invoke(main, ["history", str(tmp_path), "--isolated"])
    assert text.exit_code == 0 and "at b21.json (#21)" in text.output


def test_too_short_a_history_is_one_line(tmp_path):
    for i, b in enumerate(_history(None, n=3)):
        write_baseline(tmp_path / f"b{i}.json", b)
    result = CliRunner().invoke(main, ["history", str(tmp_path), "--isolated"])
    assert result.exit_code == 2
    assert result.output.strip() == "kernlint: error: history needs 4 or more baselines, got 3"


# -- issue 35: a test that can reach its alpha ---------------------------------------------------------------

def test_a_clean_5_percent_step_after_4_of_8_baselines_is_found_at_the_default_alpha():
    """No permutation test can show it at alpha 0.01: of the 8! orderings, those that keep the same 4 values on
    each side give the same statistic, so its p is at least 2/70 = 0.029. Student's t can (with the split
    chosen among 5, Bonferroni)."""
    history, _ = analyse(_history(4, n=8, step=1.05), [f"b{i + 1}" for i in range(8)])
    assert {(c.series, c.baseline) for c in history.change_points} == {
        ("trace / module Linear_0 / nvjet_gemm", "b5"), ("trace / total device time", "b5")}
    assert all(c.p_value < 0.01 and c.test == "t-test" for c in history.change_points)
    gemm = [c for c in history.change_points if c.series.endswith("nvjet_gemm")][0]
    assert gemm.relative == pytest.approx(0.05, abs=0.003)
    assert smallest_permutation_p(8, 4) == pytest.approx(2 / 70)


def test_8_unchanged_baselines_give_no_change_point():
    for seed in range(5):
        rng = np.random.default_rng(seed)
        history, _ = analyse([_baseline(100.0, 20.0, rng) for _ in range(8)], [f"b{i}" for i in range(8)])
        assert history.series == 3 and history.change_points == [], seed


def test_the_permutation_test_has_permutations_enough_for_its_alpha():
    """199 permutations give p in steps of 0.005: at alpha 0.01 one permutation as extreme as the data (a tie:
    the same split) hid a change. 20 / alpha permutations, and from 11 values on (at alpha 0.01) the
    permutation test decides: a clean 6 | 6 step is found by it."""
    assert permutations_for(0.01) == 1999 and permutations_for(0.05) == 399 and permutations_for(0.5) == 199
    assert permutation_length(0.01) == 11 and permutation_length(0.05) == 9
    history, _ = analyse(_history(6, n=12, step=1.05), [f"b{i + 1:02d}" for i in range(12)])
    assert {c.baseline for c in history.change_points} == {"b07"} and history.notes == []
    assert all(c.test == "permutation" and c.p_value < 0.01 for c in history.change_points)
    assert [i for i, _ in change_points([10.0] * 5 + [10.5] * 5)] == [5]   # 10 values: by t


def _with_a_new_kernel(baseline: Baseline) -> Baseline:
    """The baseline with one more launch in its scope (a kernel that later baselines added)."""
    program = baseline.programs["trace"]
    scope = program.scopes["module Linear_0"]
    added = Launch(pos=2, kind="kernel", name="new_kernel", category="elementwise", us=[3.0] * 10)
    scopes = {"module Linear_0": msgspec.structs.replace(scope, launches=[*scope.launches, added])}
    return msgspec.structs.replace(baseline, programs={"trace": msgspec.structs.replace(program, scopes=scopes)})


def test_a_series_too_short_to_reach_alpha_says_so(tmp_path):
    baselines = _history(None, n=6)
    baselines[3:] = [_with_a_new_kernel(b) for b in baselines[3:]]   # in 3 baselines only
    for i, b in enumerate(baselines):
        write_baseline(tmp_path / f"b{i + 1}.json", b)
    result = CliRunner().invoke(main, ["history", str(tmp_path), "--format", "json", "--isolated"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["series"] == 3 and data["change_points"] == []
    short, few = data["notes"]
    assert short.startswith("3 series of 6 baselines: too short for the permutation test to reach alpha 0.01 "
                            "(the smallest p it can give 6 baselines is 0.1; it needs 11)")
    assert "Student's t" in short
    assert few.startswith("1 series in fewer than 4 baselines, too short to cut") and "new_kernel" in few
    text = CliRunner().invoke(main, ["history", str(tmp_path), "--isolated"])
    assert "note: 3 series of 6 baselines: too short for the permutation test" in text.output


def test_a_cache_of_other_settings_is_not_reused():
    names = [f"b{i + 1:02d}" for i in range(30)]
    full = _history(20)
    _, cache = analyse(full[:25], names[:25], alpha=0.05)
    again, _ = analyse(full, names, cache=cache)   # alpha 0.01: searched again
    assert again.reused == 0


# -- issue 38, item 11: the cache is input, never trusted ------------------------------------------------------

def _step_of_8(tmp_path):
    """8 baselines with a 5% step after the 4th (change points at b5.json), and their cache."""
    folder = tmp_path / "b"
    folder.mkdir()
    baselines = _history(4, n=8, step=1.05)
    for i, b in enumerate(baselines):
        write_baseline(folder / f"b{i + 1}.json", b)
    _, cache = analyse(baselines, [f"b{i + 1}.json" for i in range(8)])
    return folder, cache


def _history_with_cache(folder, cache_path):
    return CliRunner().invoke(main, ["history", str(folder), "--cache", str(cache_path), "--isolated"])


def _malformed_caches(cache: dict) -> dict[str, str]:
    text = json.dumps(cache)
    wrong_types = json.loads(text)
    for entry in wrong_types["series"].values():
        entry.update(n="eight", changes="x")
    nan = json.loads(text)
    for entry in nan["series"].values():
        entry["changes"] = [[float("nan"), 0.001, "t-test"]]
    return {
        "not JSON": "hello", "empty": "", "truncated": text[:len(text) // 2], "wrong shape": "[1, 2, 3]",
        "wrong types": json.dumps(wrong_types), "NaN": json.dumps(nan),
        "a 5000-digit count": text.replace('"n": 8', '"n": 1' + "0" * 5000, 1),
        "p above 1": text.replace('e-12, "t-test"', 'e+12, "t-test"', 1),   # p = 3.9e-12 -> 3.9e+12
        "nested 100,000 deep": '{"version": 2, "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "series null": json.dumps({**cache, "series": None}),
        "version 1": json.dumps({**cache, "version": 1}),
        "unknown key": json.dumps({**cache, "more": 1}),
    }


def test_a_malformed_cache_is_one_warning_and_the_history_is_searched_again(tmp_path):
    folder, cache = _step_of_8(tmp_path)
    path = tmp_path / "cache.json"
    for what, text in _malformed_caches(cache).items():
        path.write_text(text)
        result = _history_with_cache(folder, path)
        assert result.exit_code == 0, (what, result.output)
        warning, = result.stderr.splitlines()
        assert warning.startswith(f"kernlint: warning: {path}: ") and warning.endswith(
            "not used: searched again, and the cache rewritten"), (what, warning)
        assert "at b5.json (#5)" in result.stdout and "0 from the cache" in result.stdout, what
        assert json.loads(path.read_text())["digest"] == cache["digest"], what   # rewritten, whole
        again = _history_with_cache(folder, path)
        assert again.stderr == "" and "3 from the cache" in again.stdout, what


def test_a_forged_or_foreign_cache_is_never_trusted(tmp_path):
    """Change points written into a real cache (its digests kept), or the cache of other baselines: the
    content digest, or the inputs' digests, differ; what is reported is what the baselines hold."""
    folder, cache = _step_of_8(tmp_path)
    forged = json.loads(json.dumps(cache))
    for entry in forged["series"].values():
        entry["changes"] = [[2, 1e-6, "t-test"]]
    # the same seed: b1.json and b2.json are the same, the step comes 2 baselines earlier
    _, foreign = analyse(_history(2, n=8, step=1.05), [f"b{i + 1}.json" for i in range(8)])
    path = tmp_path / "cache.json"
    for what, data, why in [("forged", forged, "its content digest does not match (edited or damaged)"),
                            ("foreign", foreign, "computed from other baselines (b3.json, #3, differs)")]:
        path.write_text(json.dumps(data))
        result = _history_with_cache(folder, path)
        assert result.exit_code == 0 and why in result.stderr, (what, result.stderr)
        assert "at b3.json" not in result.stdout and "at b5.json (#5)" in result.stdout, (what, result.stdout)


def test_a_cache_that_is_not_a_regular_file_is_refused_before_it_is_opened(tmp_path):
    folder, _ = _step_of_8(tmp_path)
    fifo = tmp_path / "cache.fifo"
    os.mkfifo(fifo)   # opened for reading, it would wait for a writer forever
    result = _history_with_cache(folder, fifo)
    assert result.exit_code == 2 and result.stderr == (
        f"kernlint: error: {fifo}: not a regular file (a FIFO): give --cache a file path\n")


def test_a_cache_larger_than_the_bound_is_not_read(tmp_path):
    folder, _ = _step_of_8(tmp_path)
    path = tmp_path / "cache.json"
    with open(path, "wb") as fh:
        fh.truncate(MAX_CACHE_BYTES + 1)   # sparse: no disk, and never read
    result = _history_with_cache(folder, path)
    assert result.exit_code == 0 and "larger than 64 MiB" in result.stderr, result.stderr
