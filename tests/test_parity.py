"""The self-check varies every dimension the hidden tests vary (grading/parity.py), and the self-check
alone kills a hard-coded answer (the hard-coding mutants of grading/mutations.py).

A learner who writes down the ring length, k, the tensor names or the notebook's global mesh passes a
self-check that never changes them and loses every hidden point (issue 48). For each of the 44 graded
functions, the reference solution's self-check and hidden tests run with the function wrapped and its
reads probed; what they called it with gives the rule's dimensions (nothing here lists them), and the
values the probed sites took give the hard-coding mutants. That is the reference solution's one
in-process grading (tests/conftest.py: graded_in_process), which tests/test_submissions.py reads too.
"""

import dataclasses

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from grading import mutants as M
from grading import parity
from grading.mutations import hardcoding_mutants, hardcoding_sites, instrumented
from tests.conftest import IN_PROCESS_ASSIGNMENTS
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


F_ANSWER = "def f(x):\n    ### BEGIN SOLUTION\n    n = x.shape[0]\n    return n\n    ### END SOLUTION\n"
G_ANSWER = "def g(x):\n    ### BEGIN SOLUTION\n    return f(x) + 1\n    ### END SOLUTION\n"
F_TESTS = [("test_f_visible", "assert f(np.ones(2)) == 2"), ("test_f_hidden", "assert f(np.ones(3)) == 3")]
G_TESTS = [
    ("test_g_visible", "assert g(np.ones(4)) == f(np.ones(6)) - 1"),  # a test of f's too (it names f)
    ("test_g_hidden", "assert g(np.ones(5)) == 6"),
]


def test_one_run_of_every_cell_records_each_function_from_its_own_test_cells(monkeypatch):
    # Property: every cell run once, in order, in one namespace with every answer probed and wrapped
    # (as the reference solution's grading runs them) records what each function's cells alone would:
    # inside g, f's calls are g's business: neither calls of f's tests (one of g's cells is also f's)
    # nor values that f's probes, or g's, take. A test cell that drops shardbook.hosts and
    # grading.parity and imports the first again (as grading's hardening prologue does) still gets a
    # function_source that records in the workers and sends the probe as an import.
    import sys

    import shardbook
    from grading.assignment import run_cell
    from shardbook import hosts

    monkeypatch.setitem(sys.modules, "shardbook.hosts", hosts)  # the originals again afterwards
    monkeypatch.setitem(sys.modules, "grading.parity", parity)
    monkeypatch.setattr(shardbook, "hosts", hosts)
    reimport = (
        "import importlib, sys\n"
        "for name in ('grading.parity', 'shardbook.hosts'):\n"
        "    del sys.modules[name]\n"
        "hosts = importlib.import_module('shardbook.hosts')\n"
    )
    sent = reimport + "SENT = hosts.function_source(f)"
    tests = {"f": [*F_TESTS, G_TESTS[0], ("test_f_sent_hidden", sent)], "g": G_TESTS}
    probed = {"f": M.probed_source(F_ANSWER), "g": M.probed_source(G_ANSWER)}
    namespace: dict = {"__name__": "__main__"}
    run_cell("import numpy as np", "<imports>", namespace)
    cells = [("f", F_ANSWER), ("g", G_ANSWER), *F_TESTS, *G_TESTS, ("test_f_sent_hidden", sent)]
    with parity.Recorder(tests, probed) as recorder:
        for gid, source in cells:
            with recorder.cell(gid, namespace):
                run_cell(recorder.source(gid, source), f"<{gid}>", namespace)
            recorder.wrap(namespace, gid)
    f, g = recorder.found["f"], recorder.found["g"]
    assert [c["argument 0 shape[0]"] for c in f.calls["visible"] + f.calls["hidden"]] == ["2", "6", "3"]
    assert [c["argument 0 shape[0]"] for c in g.calls["visible"] + g.calls["hidden"]] == ["4", "5"]
    assert f.first[0] == 2 and f.taken[0] == {"2", "6", "3"}  # site 0, x.shape[0]: never 4 or 5
    assert not {"4", "5"} & set().union(*g.taken.values())
    assert "_parity.wrap_in_worker(globals(), 'f')" in namespace["SENT"]
    assert "from grading.parity import hardcoding_probe as __hardcoding_probe__" in namespace["SENT"]


# ---------------------------------------------------------------------------------------------------
# Every graded function of every assignment: what the reference solution's one in-process grading
# recorded (tests/conftest.py: graded_in_process, with --parity; tests/submissions: grade_assignment),
# the run tests/test_submissions.py also reads. tests/test_submissions.py checks that run scored full
# marks with no error, so no call stopped early.


def test_every_assignment_is_recorded():
    # Each assignment of solutions/ is graded in-process (it has committed submissions), so the two
    # tests below hold every one of them to the rule.
    assert [p.values[0] for p in IN_PROCESS_ASSIGNMENTS] == ASSIGNMENTS


@pytest.mark.parametrize("assignment", IN_PROCESS_ASSIGNMENTS)
def test_the_self_check_varies_every_dimension_the_hidden_tests_vary(assignment, graded_in_process):
    found = graded_in_process(assignment)["reference_solution"]["parity"]
    assert set(found) == set(M.load(assignment).answers)
    problems, gaps = [], KNOWN_GAPS.get(assignment, set())
    for fn, rec in found.items():
        assert rec["calls"]["visible"] and rec["calls"]["hidden"], f"{fn}: no call was recorded"
        broken = parity.violations(rec["calls"])
        if fn in gaps:
            assert broken, f"{fn} now varies every dimension: take it off KNOWN_GAPS"
        elif broken:
            problems.append(f"{assignment}:{fn}:\n  " + "\n  ".join(broken))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("assignment", IN_PROCESS_ASSIGNMENTS)
def test_the_self_check_alone_kills_a_hard_coded_answer(assignment, graded_in_process):
    # One hard-coding mutant per function (the first: the earliest value read, or the mesh argument
    # replaced by the global mesh), judged by the self-check alone in the same process
    # (grading.mutants.first_hardcoding_judged); `make mutants` runs them all.
    found = graded_in_process(assignment)["reference_solution"]["parity"]
    survivors = []
    for fn, rec in found.items():
        mutant = rec["hardcoded"]  # None when no value it reads varies (parsing a text, say)
        if fn not in KNOWN_GAPS.get(assignment, set()) and mutant and mutant["status"] == "survived":
            survivors.append(mutant["diff"])
    assert not survivors, "\n".join(survivors)
