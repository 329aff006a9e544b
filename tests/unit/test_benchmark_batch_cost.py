"""The per-batch cost harness (benchmarks/batch_cost.py): its pure parts, no services."""

from __future__ import annotations

import pytest

from benchmarks import batch_cost


def test_a_cell_gives_the_median_and_the_90th_percentile() -> None:
    assert batch_cost._cell([float(n) for n in range(1, 11)]) == "5.50 / 10.00"


def test_a_cell_without_values_is_a_dash() -> None:
    assert batch_cost._cell([]) == "-"


def test_a_task_mark_counts_its_records_between_its_start_and_end() -> None:
    ((start, end, count),) = batch_cost._mark(0, iter("abc"))
    assert count == 3 and start <= end


def test_a_table_is_markdown_with_one_row_per_entry() -> None:
    table = batch_cost._table("T", ["a", "b"], [["1", "2"]])
    assert table.splitlines() == ["T", "| a | b |", "|---|---|", "| 1 | 2 |"]


def test_an_unknown_store_is_refused_before_any_service_starts(capsys) -> None:
    with pytest.raises(SystemExit):
        batch_cost.main(["--stores", "sqlite,mongo"])
    assert "unknown store 'mongo'" in capsys.readouterr().err
