from __future__ import annotations

import pandas as pd

from probes.sources.frames import stack


def test_stack_keeps_the_parts_in_order_and_an_empty_table_its_columns() -> None:
    a, b = pd.DataFrame({"x": [1, 2]}), pd.DataFrame({"x": [3]})
    assert stack([a, pd.DataFrame(columns=["x"]), b], ["x"])["x"].tolist() == [1, 2, 3]
    assert stack([b.set_axis([7])], ["x"]).index.tolist() == [0]
    empty = stack([pd.DataFrame(columns=["x"])], ["x", "y"])
    assert (len(empty), list(empty.columns)) == (0, ["x", "y"])
