"""`revert-bisect changes --series FILE.csv` through the real CLI: a planted shift found with its rows, shas,
effect and interval; a flat series gives none; bad input exits 2 naming what is wrong, never a traceback."""

from __future__ import annotations

import json
import random

import pytest

SHIFT_AT, RUNS = 30, 60


def write_series(path, shift=-0.05, noise=0.02, missing=(), seed=1):
    """decode_tps (throughput) shifts by `shift` from run SHIFT_AT on; ttft_ms (latency) stays flat."""
    rng = random.Random(seed)
    lines = ["sha,time,decode_tps,ttft_ms"]
    for i in range(RUNS):
        tps = 1000 * (1 + (shift if i >= SHIFT_AT else 0)) * (1 + rng.gauss(0, noise))
        ttft = 50 * (1 + rng.gauss(0, noise))
        lines.append(f"sha{i:03d},2025-01-{i // 2 + 1:02d},{'' if i in missing else f'{tps:.3f}'},{ttft:.3f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_planted_slowdown_is_found_with_its_runs_and_interval(cli, tmp_path):
    series = write_series(tmp_path / "s.csv", missing={SHIFT_AT - 1})
    out = tmp_path / "changes.json"
    r = cli("changes", "--series", str(series), "--direction", "decode_tps=lower", "--json", str(out))
    assert r.code == 0, r.stderr
    changes = json.loads(out.read_text())["changes"]
    assert [(c["metric"], c["index"]) for c in changes] == [("decode_tps", SHIFT_AT)]
    (change,) = changes
    # the run before the shift misses the metric: the last run before is the one before it
    assert (change["before"], change["sha_before"], change["sha_after"]) == (SHIFT_AT - 2, "sha028", "sha030")
    assert change["low"] <= -0.05 <= change["high"] and change["low"] <= change["effect"] <= change["high"]
    assert change["regression"] is True and change["direction"] == "lower"
    assert "decode_tps (lower is worse)" in r.stdout and "a regression" in r.stdout
    assert "--good sha028 --bad sha030 --lower-is-worse --metric-regex" in r.stdout
    assert "taken as higher-is-worse (no --direction): ttft_ms" in r.stdout


def test_the_same_shift_up_in_a_latency_is_a_regression_and_in_a_throughput_an_improvement(cli, tmp_path):
    series = write_series(tmp_path / "s.csv", shift=0.05)
    out = tmp_path / "changes.json"
    r = cli("changes", "--series", str(series), "--json", str(out))  # decode_tps taken as higher-is-worse
    assert r.code == 0, r.stderr
    (change,) = json.loads(out.read_text())["changes"]
    assert change["effect"] > 0 and change["regression"] is True and "a regression" in r.stdout
    r = cli("changes", "--series", str(series), "--direction", "decode_tps=lower", "--json", str(out))
    (change,) = json.loads(out.read_text())["changes"]
    assert change["regression"] is False and "an improvement" in r.stdout
    assert "--higher-is-worse --metric-regex" in r.stdout  # the search turned round: it finds what made it faster


def test_a_flat_series_gives_no_change_point(cli, tmp_path):
    series = write_series(tmp_path / "s.csv", shift=0.0)
    out = tmp_path / "changes.json"
    r = cli("changes", "--series", str(series), "--json", str(out))
    assert r.code == 0, r.stderr
    assert json.loads(out.read_text())["changes"] == []
    assert "no change point" in r.stdout


def test_min_effect_leaves_out_a_shift_smaller_than_it(cli, tmp_path):
    series = write_series(tmp_path / "s.csv", shift=-0.05, noise=0.005)
    out = tmp_path / "changes.json"
    assert cli("changes", "--series", str(series), "--min-effect", "0.08", "--json", str(out)).code == 0
    assert json.loads(out.read_text())["changes"] == []


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "the file is empty"),
        ("sha,time,decode_tps\n", "a header and no rows"),
        ("sha,decode_tps\nabc,1.0\n", "no column 'time'"),
        ("time,decode_tps\n2025,1.0\n", "no column 'sha'"),
        ("sha,time\nabc,2025\n", "no metric column"),
        ("sha,time,decode_tps\na,t,1.0\nb,t,fast\n", "row 1 (line 3), column 'decode_tps': 'fast' is not a number"),
        ("sha,time,decode_tps\na,t,1.0,2.0\n", "row 0 (line 2) has 4 cells, the header 3"),
    ],
)
def test_bad_input_exits_2_naming_what_is_wrong(cli, tmp_path, text, words):
    series = tmp_path / "s.csv"
    series.write_text(text)
    r = cli("changes", "--series", str(series))
    assert r.code == 2
    assert words in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize(
    "given, words", [("nosuch=lower", "no metric 'nosuch'"), ("decode_tps=down", "use METRIC=lower")]
)
def test_a_direction_that_names_no_metric_or_no_way_exits_2(cli, tmp_path, given, words):
    series = write_series(tmp_path / "s.csv")
    r = cli("changes", "--series", str(series), "--direction", given)
    assert r.code == 2 and words in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("rows", [[], ["a,t,5.0"], ["a,t,5.0", "b,t,5.0", "c,t,5.0", "d,t,5.0", "e,t,5.0"]])
def test_a_single_run_or_a_constant_metric_gives_no_change_point(cli, tmp_path, rows):
    series = tmp_path / "s.csv"
    series.write_text("\n".join(["sha,time,m", "z,t,", *rows]) + "\n")  # z misses the metric
    r = cli("changes", "--series", str(series))
    assert r.code == 0, r.stderr
    assert "no change point" in r.stdout
