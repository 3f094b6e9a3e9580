import pytest

from kbtui.collections import canonical_collection_id
from kbtui.errors import InvalidCollection


@pytest.mark.parametrize(
    "raw, expected",
    [
        (None, "DEFAULT"),
        ("", "DEFAULT"),
        ("   ", "DEFAULT"),
        ("ops", "OPS"),
        ("  team-a.docs_v2 ", "TEAM-A.DOCS_V2"),
        ("x" * 128, "X" * 128),
    ],
)
def test_collection_ids_are_trimmed_and_upper_cased(raw, expected):
    assert canonical_collection_id(raw) == expected


@pytest.mark.parametrize("raw", ["a b", "ops/../x", "Ümlaut", "semi;colon", "x" * 129, "東京", "tab\tin"])
def test_invalid_collection_ids_are_refused(raw):
    with pytest.raises(InvalidCollection):
        canonical_collection_id(raw)
