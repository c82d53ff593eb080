"""The benchmark suite's arithmetic (bench/common.py): the figures in
var/bench/latest.json are only as honest as these helpers."""

import json
from dataclasses import asdict

from bench.common import Row, emit, interleaved, percentile_ms

FIELDS = {"name", "value", "unit", "baseline", "baseline_value", "ratio", "p50_ms", "p99_ms",
          "n", "reps"}


def test_percentiles_are_nearest_rank_in_milliseconds():
    seconds = [i / 1000 for i in range(1, 101)]  # 1 .. 100 ms
    assert percentile_ms(seconds, 50) == 50
    assert percentile_ms(seconds, 99) == 99
    assert percentile_ms([0.007], 99) == 7
    assert percentile_ms([], 50) is None


def test_interleaved_alternates_sides_and_takes_the_median_of_per_round_ratios():
    calls = []
    ours = iter([10.0, 30.0, 20.0, 40.0, 50.0])
    base = iter([10.0, 10.0, 10.0, 20.0, 100.0])

    def side(name, values):
        def run():
            calls.append(name)
            return next(values)
        return run

    value, baseline, ratio = interleaved(5, side("ours", ours), side("base", base))
    # The side that goes first changes every round.
    assert calls == ["base", "ours", "ours", "base", "base", "ours", "ours", "base",
                     "base", "ours"]
    assert (value, baseline) == (30.0, 10.0)
    # Per-round ratios 1, 3, 2, 2, 0.5: their median, not a ratio of medians (3).
    assert ratio == 2.0


def test_emit_writes_every_field_of_every_row(tmp_path):
    out = tmp_path / "rows.json"
    row = Row(name="append sqlite: x", value=1.0, unit="events/s", baseline="raw",
              baseline_value=2.0, ratio=0.5, p50_ms=1.0, p99_ms=2.0, n=10, reps=5)
    emit([row], out)
    [written] = json.loads(out.read_text())
    assert set(written) == FIELDS
    assert written == asdict(row)
