from bot.domain.bisect.candidates import (
    ancestors,
    descendants,
    first_parent_scope,
    is_merge,
    merge_scope,
)

GRAPH = {"m1": ("g",), "m2": ("m1",), "s1": ("m1",), "s2": ("s1",), "m3": ("m2", "s2"), "m4": ("m3",)}


def test_first_parent_scope_skips_side_commits():
    scope = first_parent_scope(GRAPH, "g", "m4")
    assert scope.candidates == ("m1", "m2", "m3", "m4")
    assert scope.position("g") == 0 and scope.position("m3") == 3 and scope.position("s1") is None


def test_merge_scope_is_side_branch_then_merge():
    scope = merge_scope(GRAPH, "m3")
    assert scope.base == "m1" and scope.candidates == ("s1", "s2", "m3")
    assert is_merge(GRAPH, "m3") and not is_merge(GRAPH, "m2")


def test_ancestry():
    assert ancestors(GRAPH, "m3") == {"m1", "m2", "s1", "s2", "m3"}
    assert descendants(GRAPH, "s1") == {"s1", "s2", "m3", "m4"}
