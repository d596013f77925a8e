"""The context text written through orjson equals json.dumps' compact text to the byte, for
every JSON value the gate lets through."""

from __future__ import annotations

import json
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.samples.core.context_text import compact_json


def reference(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_SCALARS = (st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(st.characters(blacklist_categories=("Cs",))))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)  # the float sweep below covers the range
@given(st.dictionaries(st.text(max_size=8), _VALUES, max_size=8))
def test_the_text_equals_json_dumps(value):
    assert compact_json(value) == reference(value)


def test_floats_across_their_whole_range_and_every_control_character():
    floats = [struct.unpack("<d", struct.pack("<Q", bits))[0]
              for bits in range(0, 2**64, 2**64 // 20_011)]
    floats += [1e-05, -1e-05, 9.99e-05, 1e-4, 1e-10, 5e-324, 0.0, -0.0, 1e16, 1e+300,
               0.25128, 123456789.123]
    for x in floats:
        if x == x and abs(x) != float("inf"):
            assert compact_json({"model_score": x, "nested": [{"x": x}]}) == reference(
                {"model_score": x, "nested": [{"x": x}]}), x
    text = "".join(chr(c) for c in range(0x80)) + "\u2028\u2029é日本\U0001F600"
    assert compact_json({"s": text, text: 1}) == reference({"s": text, text: 1})
