"""``to_json_value`` refuses keys that collide as JSON text wherever they are, walked a level at a time.

The walk groups a level's items by type and tests its dicts' keys as one set of types (``_check_no_merged_keys``):
these hold that the grouping still finds a collision beside other kinds of item, in a dict subclass, behind a
set, a model's extra or a dataclass, and that keys of one type each (all ``str``, all ``int``) or dicts of
different key types side by side are not refused.
"""

import dataclasses
import math
from collections import OrderedDict
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from pydantic_core import to_jsonable_python

from toolhub.tools.results import to_json_value


@dataclasses.dataclass
class Box:
    inner: Any


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)
    name: str = "x"


def _colliding() -> dict[Any, str]:
    return {200: "a", "200": "b"}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(_colliding(), id="top level"),
        pytest.param({"rows": [{"a": 1}, Box(1), "s", 2.5, [_colliding()], None]}, id="deep, beside other kinds"),
        pytest.param([{"a": 1}] * 50 + [{"b": 2, 2: "x", "2": "y"}], id="one dict of many at its level"),
        pytest.param([OrderedDict([(True, 1), ("true", 2)])], id="dict subclass"),
        pytest.param({"s": [("t", Box({7: 1, "7": 2}))]}, id="behind a list, a tuple, a dataclass"),
        pytest.param(Loose(more=[{1.5: "a", "1.5": "b"}]), id="a model's extra field"),
        pytest.param({"k": {math.nan: 1, float("nan"): 2}}, id="two NaN keys"),
    ],
)
def test_keys_that_collide_as_text_are_refused_wherever_they_are(value: Any) -> None:
    with pytest.raises(ValueError, match="collide"):
        to_json_value(value)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"rows": [{"id": i, "name": f"r{i}", "tags": ["a"]} for i in range(100)]}, id="str keys"),
        pytest.param({i: str(i) for i in range(100)}, id="int keys"),
        pytest.param([{1: "a", 2: "b"}, {"1": "a", "2": "b"}], id="int-keyed and str-keyed dicts side by side"),
        pytest.param({1: "a", "2": "b", 2.5: "c", None: "d"}, id="mixed keys that stay distinct"),
        pytest.param(Box([Loose(more={"k": 1})]), id="dataclass holding a model"),
    ],
)
def test_keys_that_stay_distinct_are_converted(value: Any) -> None:
    assert to_json_value(value) == to_jsonable_python(value)
