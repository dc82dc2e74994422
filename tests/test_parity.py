"""The self-check varies every dimension the hidden tests vary (grading/parity.py), and the self-check
alone kills a hard-coded answer (the hard-coding mutants of grading/mutations.py).

A learner who writes down the ring length, k, the tensor names or the notebook's global mesh passes a
self-check that never changes them and loses every hidden point (issue 48). For each of the 44 graded
functions, the reference solution's self-check and hidden tests run once with the function wrapped
and its reads probed; what they called it with gives the rule's dimensions (nothing here lists them),
and the values the probed sites took give the hard-coding mutants.
"""

import dataclasses
import functools

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from grading import mutants as M
from grading import parity
from grading.mutations import hardcoding_mutants, hardcoding_sites, instrumented
from tests.notebooks import ASSIGNMENTS

# Functions whose self-check does not yet vary every dimension its hidden tests vary: each a known gap
# (issue 48), listed so that the list only shrinks (a listed function that complies fails the test).
KNOWN_GAPS: dict[str, set[str]] = {}


# ---------------------------------------------------------------------------------------------------
# The recorder and the rule, on toy functions (cheap).


def test_features_are_the_dimensions_of_a_call():
    # mesh shape and axis names; each dimension and dtype of an array and its mesh; a dict's keys (the
    # tensor names); a number's value; a result's keys, not its values.
    mesh = jax.make_mesh((2, 4), ("X", "Y"))
    x = jax.device_put(np.zeros((8, 3), np.float32), NamedSharding(mesh, P("X")))
    got = parity.features((x, mesh, 3, "/tmp/a/path"), {"params": {"w": x}}, {"w": 1, "b": 2})
    assert got["argument 0 shape[0]"] == "8" and got["argument 0 shape[1]"] == "3"
    assert got["argument 0 dtype"] == "float32" and got["argument 0 mesh shape"] == "(2, 4)"
    assert got["argument 1 mesh axis names"] == "('X', 'Y')" and got["argument 2 value"] == "3"
    assert got["argument params keys"] == "['w']" and got["argument params['w'] shape[0]"] == "8"
    assert got["result keys"] == "['b', 'w']"
    assert "argument 3 value" not in got  # a path is not a dimension


def test_a_dimension_only_the_hidden_tests_vary_is_a_violation():
    calls = {
        "visible": [{"k": "2", "mesh shape": "(8,)"}, {"k": "2", "mesh shape": "(2, 4)"}],
        "hidden": [{"k": "3", "mesh shape": "(8,)"}, {"k": "2", "only hidden": "1"}],
    }
    (only,) = parity.violations(calls)
    assert only.startswith("k: the self-check tries only 2, the hidden tests also ['3']")
    calls["visible"].append({"k": "3"})
    assert parity.violations(calls) == []


TOY_ANSWER = '''\
def topk_mean(b, mesh):
    """Mean of b's k columns, on mesh."""
    ### BEGIN SOLUTION
    k = b.shape[1]
    n = mesh.shape["X"]
    return b.sum(axis=1) / k * n
    ### END SOLUTION
'''
TOY_IMPORTS = (
    "import jax, numpy as np\nmesh = jax.make_mesh((8,), ('X',))\n"
    "other = jax.make_mesh((4,), ('X',), devices=jax.devices()[:4])"
)
ONE_K = "assert np.allclose(topk_mean(np.ones((4, 2)), mesh), 8)"
TWO_K = ONE_K + "\nassert np.allclose(topk_mean(np.ones((6, 3)), other), 4)"
HIDDEN = "for k in (2, 3, 5):\n    assert np.allclose(topk_mean(np.ones((6, k)), other), 4)"


def toy(visible: str) -> tuple[M.Notebook, dict]:
    cells = [("test_topk_mean_visible", visible), ("test_topk_mean_hidden", HIDDEN)]
    nb = M.Notebook(
        "toy",
        [("imports", TOY_IMPORTS), ("topk_mean", TOY_ANSWER)],
        {"topk_mean": TOY_ANSWER},
        {"topk_mean": cells},
        {"X", "Y"},
    )
    return nb, M.base_namespace(nb)


def recorded(visible: str) -> tuple[M.Notebook, dict, parity.Recording]:
    nb, base = toy(visible)
    found = parity.record_function(
        base, "topk_mean", nb.tests["topk_mean"], M.fresh, M.probed_source(TOY_ANSWER)
    )
    return nb, base, found


def test_a_self_check_that_tries_one_k_breaks_the_rule_and_lets_a_hard_coded_k_through():
    nb, base, found = recorded(ONE_K)
    text = "\n".join(parity.violations(found.calls))
    assert "argument 0 shape[1]: the self-check tries only 2" in text
    assert "argument 1 mesh shape: the self-check tries only (8,)" in text
    mutants = M.hardcoding_of(nb, "topk_mean", found)
    written = {m.kind: m for m in mutants}
    assert "k = 2\n" in mutants[0].source and "global_mesh" in written
    visible_only = dataclasses.replace(nb, tests={"topk_mean": nb.tests["topk_mean"][:1]})
    assert all(M.judge(visible_only, base, m).status == "survived" for m in mutants)


def test_a_self_check_that_varies_k_and_the_mesh_keeps_the_rule_and_kills_each_hard_coded_value():
    nb, base, found = recorded(TWO_K)
    assert parity.violations(found.calls) == []
    mutants = M.hardcoding_of(nb, "topk_mean", found)
    assert {m.kind for m in mutants} == {"hardcoded", "global_mesh"}
    # k written as 2, n written as 8, the mesh argument replaced by the global `mesh`
    assert any("k = 2\n" in m.source for m in mutants) and any("n = 8\n" in m.source for m in mutants)
    visible_only = dataclasses.replace(nb, tests={"topk_mean": nb.tests["topk_mean"][:1]})
    for m in mutants:
        assert M.judge(visible_only, base, m).status == "killed", m.diff


def test_a_value_the_tests_never_vary_makes_no_mutant():
    # The contract fixes it (every test's dtype, say): written down, it is not a mistake.
    source = TOY_ANSWER.replace("    n = mesh", "    d = b.dtype\n    n = mesh")
    import ast

    from grading.mutations import Sites, solution_lines

    sites = hardcoding_sites(Sites(ast.parse(source), *solution_lines(source)))
    assert "__hardcoding_probe__(" in instrumented(source, sites)
    texts = [ast.unparse(Sites(ast.parse(source), 1, 99).nodes[i]) for i in sites]
    assert "b.dtype" in texts and "b.shape[1]" in texts
    dtype_site = texts.index("b.dtype")
    none = hardcoding_mutants("toy", "topk_mean", source, {}, ["mesh"])
    one = hardcoding_mutants("toy", "topk_mean", source, {dtype_site: np.dtype("float32")}, ["mesh"])
    assert none == [] and len(one) == 1 and 'd = np.dtype("float32")' in one[0].source


# ---------------------------------------------------------------------------------------------------
# Every graded function of every assignment (the reference solution's tests, run once each).


@functools.cache
def recorded_assignment(assignment: str) -> tuple[M.Notebook, dict, dict[str, parity.Recording]]:
    nb = M.load(assignment)
    base = M.base_namespace(nb)
    found = {
        fn: parity.record_function(base, fn, nb.tests[fn], M.fresh, M.probed_source(nb.answers[fn]))
        for fn in nb.answers
    }
    return nb, base, found


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_self_check_varies_every_dimension_the_hidden_tests_vary(assignment):
    nb, _, found = recorded_assignment(assignment)
    assert set(found) == set(nb.answers)
    problems, gaps = [], KNOWN_GAPS.get(assignment, set())
    for fn, rec in found.items():
        assert rec.calls["visible"] and rec.calls["hidden"], f"{fn}: no call was recorded"
        broken = parity.violations(rec.calls)
        if fn in gaps:
            assert broken, f"{fn} now varies every dimension: take it off KNOWN_GAPS"
        elif broken:
            problems.append(f"{assignment}:{fn}:\n  " + "\n  ".join(broken))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_self_check_alone_kills_a_hard_coded_answer(assignment):
    # One hard-coding mutant per function (the first: the earliest value read, or the mesh argument
    # replaced by the global mesh); `make mutants` runs them all.
    nb, base, found = recorded_assignment(assignment)
    visible_only = dataclasses.replace(
        nb, tests={fn: [(g, s) for g, s in cells if g.endswith("_visible")] for fn, cells in nb.tests.items()}
    )
    survivors = []
    for fn, rec in found.items():
        if fn in KNOWN_GAPS.get(assignment, set()):
            continue
        mutants = M.hardcoding_of(nb, fn, rec)  # none when no value it reads varies (parsing a text, say)
        if mutants:
            if M.judge(visible_only, base, mutants[0]).status == "survived":
                survivors.append(mutants[0].diff)
    assert not survivors, "\n".join(survivors)
