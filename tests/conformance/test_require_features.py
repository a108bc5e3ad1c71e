"""``conformance.engine.describe.require_features``: the one place a case turns "the server does not offer
this optional feature" into UNIMPLEMENTED (§1.7, §4.4)."""

from __future__ import annotations

import pytest

from conformance.engine.case import Unimplemented
from conformance.engine.describe import require_features


def test_every_feature_listed_goes_on():
    require_features(("marks", "utterance", "lexicon"), "utterance", "marks")
    require_features(frozenset({"lexicon"}), "lexicon")


def test_no_describe_is_unimplemented_and_says_why():
    with pytest.raises(Unimplemented, match=r"does not offer describe.*offers utterance and marks"):
        require_features(None, "utterance", "marks")


def test_a_missing_feature_is_named_with_what_the_server_lists():
    listed = r"does not list marks in capabilities.features \(\['utterance'\]\)"
    with pytest.raises(Unimplemented, match=listed):
        require_features(["utterance"], "utterance", "marks")


def test_an_empty_list_is_not_no_describe():
    with pytest.raises(Unimplemented, match="does not list lexicon"):
        require_features((), "lexicon")
