"""Mutation testing of the graders (grading/mutants.py): the transformer, and a deterministic sample run.

The full run is ``make mutants`` (tens of minutes); here the mutants of 01_meshes (cheap graders) and
an evenly spread sample of 04_shard_map's run in this process, against the same cells as the full run.
"""

import ast
import dataclasses
import functools

import pytest

from grading import mutants as M

# One worker runs them all: every test reads the mutants of its assignment from generated() (a cache of
# this process), which the other worker would generate again (1-3 s of CPU a run, 2026-12-07).
pytestmark = pytest.mark.xdist_group("mutants")

TOY = '''\
def f(x, w, mesh):
    """Docstring: "X" here is not mutated."""
    ### BEGIN SOLUTION
    n = mesh.shape["Y"]
    ring = [(j, (j + 1) % n) for j in range(n)]  # a comment that must survive

    def per_device(a, b):
        s = jax.lax.psum(jnp.sum(a @ b, axis=1), "Y")
        s = jax.lax.ppermute(s, "Y", ring)
        return s[1:n].astype(jnp.float32)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X"))(x, w)
    ### END SOLUTION
'''


@functools.cache
def generated(assignment: str) -> tuple:
    """The notebook and every mutant of one assignment (about 1 s of CPU each; shared by the tests)."""
    nb = M.load(assignment)
    return nb, M.all_mutants(nb)


def toy_mutants():
    return M.mutants_of("toy", "f", TOY, {"X", "Y"})


def test_every_kind_of_learner_mistake_is_generated():
    kinds = {m.kind for m in toy_mutants()}
    for kind in (
        "axis_name",
        "axes_swapped_everywhere",
        "collective_swapped",
        "call_removed",
        "collective_twice",
        "ppermute_reversed",
        "ppermute_shifted",
        "operands_swapped",
        "reduction_axis",
        "reduction_swapped",
        "off_by_one",
        "dtype",
        "spec_swapped",
        "spec_entry_dropped",
        "operator",
        "constant",
    ):
        assert kind in kinds, kind


def test_mutants_are_distinct_compilable_and_change_only_their_lines():
    ms = toy_mutants()
    dumps = [ast.dump(ast.parse(m.source)) for m in ms]
    assert len(set(dumps)) == len(dumps) and ast.dump(ast.parse(TOY)) not in dumps
    for m in ms:
        compile(m.source, m.fingerprint, "exec")
        assert "# a comment that must survive" in m.source and '"X" here is not mutated' in m.source
        assert m.diff.startswith("--- solution/f") and "\n+" in m.diff
    # psum -> pmean changes one word of one line
    swap = next(m for m in ms if m.kind == "collective_swapped" and "pmean" in m.source)
    assert [line for line in swap.diff.splitlines() if line.startswith("+ ")] == [
        '+        s = jax.lax.pmean(jnp.sum(a @ b, axis=1), "Y")'
    ]


def test_order_and_fingerprints_are_stable_across_unrelated_edits():
    first = [m.fingerprint for m in toy_mutants()]
    assert first == [m.fingerprint for m in toy_mutants()] and len(set(first)) == len(first)
    shifted = M.mutants_of(
        "toy", "f", TOY.replace("    ### BEGIN SOLUTION\n", "    ### BEGIN SOLUTION\n    pass\n"), {"X", "Y"}
    )
    # an inserted line adds mutants of its own but renames none of the others
    assert set(first) <= {m.fingerprint for m in shifted}


def test_mutants_ignore_what_other_libraries_hang_on_shared_ast_nodes():
    # CPython shares one ast.Load() (and one of each operator) between all trees; IPython's tracebacks
    # (the `executing` library) set .parent on it. A copy that followed it would copy a foreign tree
    # with every Name (in CI: minutes per assignment) or, here, fail.
    class Untouchable:
        def __deepcopy__(self, memo):
            raise AssertionError("a mutation copied an attribute hung on a shared AST node")

        def __reduce_ex__(self, protocol):
            raise AssertionError("a mutation copied an attribute hung on a shared AST node")

    before = [(m.fingerprint, m.source) for m in toy_mutants()]
    shared = [ast.parse("x + y").body[0].value.left.ctx, ast.parse("x + y").body[0].value.op]
    try:
        for node in shared:
            node.parent = Untouchable()
        assert [(m.fingerprint, m.source) for m in toy_mutants()] == before
    finally:
        for node in shared:
            del node.parent


def test_the_ring_mutations_reverse_and_shift_the_permutation():
    ms = {m.kind: m for m in toy_mutants() if m.kind.startswith("ppermute")}
    assert "[(dst, src) for src, dst in ring]" in ms["ppermute_reversed"].source
    assert "[(src, (dst + 1) % len(ring)) for src, dst in ring]" in ms["ppermute_shifted"].source


def test_kill_rate_counts_equivalents_apart_and_timeouts_as_killed():
    raw = [
        {"function": "g", "status": s, "fingerprint": f"g/k/{i}", "killed_by": ""}
        for i, s in enumerate(["killed"] * 17 + ["timeout", "survived", "survived"])
    ]
    (row,) = M.summarize("a", raw, {"g/k/19": "same answer on every allowed input"})
    assert (row["killed"], row["timeout"], row["equivalent"], row["survived"]) == (17, 1, 1, 1)
    assert row["rate"] == pytest.approx(18 / 19) and row["rate"] < M.THRESHOLD


def test_mutants_the_self_check_passed_are_counted_as_caught_only_by_hidden_tests():
    # The self-check cell runs first: a mutant killed by a hidden test passed it, and a learner with
    # that mistake read "Self-check passed." — counted per function, and listed in the report.
    raw = [
        {
            "function": "g",
            "status": "killed",
            "fingerprint": "g/k/0",
            "killed_by": "test_g_visible: expected",
        },
        {"function": "g", "status": "killed", "fingerprint": "g/k/1", "killed_by": "test_g_hidden: expected"},
        {"function": "g", "status": "timeout", "fingerprint": "g/k/2", "killed_by": "ran past 1 s"},
        {
            "function": "h",
            "status": "killed",
            "fingerprint": "h/k/0",
            "killed_by": "test_h_visible: x_hidden",
        },
    ]
    g, h = M.summarize("a", raw, {})
    assert (g["killed"], g["hidden_only"], g["timeout"], h["hidden_only"]) == (2, 1, 1, 0)
    assert [M.caught_only_by_hidden_tests(m) for m in raw] == [False, True, False, False]


def test_unkillable_on_cpu_mutants_are_counted_apart_from_killed_survived_and_equivalent():
    raw = [
        {"function": "g", "status": s, "fingerprint": f"g/k/{i}", "killed_by": ""}
        for i, s in enumerate(["killed"] * 18 + ["survived", "survived"])
    ]
    (row,) = M.summarize("a", raw, {"g/k/18": "same answer"}, {"g/k/19": "XLA:CPU writes zeros"})
    assert (row["killed"], row["equivalent"], row["unkillable"], row["survived"]) == (18, 1, 1, 0)
    assert row["rate"] == 1.0 and raw[19]["killed_by"] == "XLA:CPU writes zeros"
    assert "unkillable_on_cpu" not in M.equivalents() and "06_moe" in M.unkillables()


def test_each_mutant_starts_from_the_solutions_random_state():
    # The namespace copy is shallow: a Generator drawn from by one mutant must not shift the next one's data.
    import random

    setup = "import numpy as np, random\nrng = np.random.default_rng(0)\nr = random.Random(1)"
    nb = M.Notebook("toy", [("imports", setup)], {}, {}, set())
    base = M.base_namespace(nb)
    first = [M.fresh(base)["rng"].integers(1000, size=4).tolist(), M.fresh(base)["r"].random()]
    ns = M.fresh(base)
    ns["rng"].integers(1000, size=100), ns["r"].random()
    assert [M.fresh(base)["rng"].integers(1000, size=4).tolist(), M.fresh(base)["r"].random()] == first
    assert isinstance(base["r"], random.Random)


def test_every_listed_equivalent_mutant_still_exists():
    # A stale entry (its mutant no longer generated) would hide nothing and mislead; keep the list exact.
    for assignment, entries in [*M.equivalents().items(), *M.unkillables().items()]:
        fingerprints = {m.fingerprint for m in generated(assignment)[1]}
        assert set(entries) <= fingerprints, (assignment, set(entries) - fingerprints)
        assert all(len(reason) > 20 for reason in entries.values())


@pytest.mark.parametrize(("assignment", "sample"), [("01_meshes", None), ("04_shard_map", 3)])
def test_sample_of_mutants_is_killed_by_the_graders(assignment, sample):
    # The full run is `make mutants`; this sample keeps the graders honest in every `make test`.
    nb, mutants = generated(assignment)
    base = M.base_namespace(nb)
    chosen = M.sample(mutants, sample)
    assert chosen and len({m.function for m in chosen}) == len(nb.answers)
    known = M.equivalents().get(assignment, {})
    survivors = [M.judge(nb, base, m).fingerprint for m in chosen]
    survivors = [fp for fp, m in zip(survivors, chosen, strict=True) if m.status == "survived"]
    assert set(survivors) <= set(known), [
        m.diff for m in chosen if m.fingerprint in set(survivors) - set(known)
    ]


# Mutants that survived the graders as they were, each killed by one strengthening (its test) and,
# since the book's self-checks cover what the hidden tests grade, by the function's self-check too.
STRENGTHENED = {
    "01_meshes": [
        "per_device_shape/operator/7df25974a9",  # size / parts: floats in the shape
        "sharding_for_layout/off_by_one/666136a701",  # mesh.devices.shape[k - 1]: meshes with a size-1 axis
        "sharding_for_layout/constant/b1c031cc72",  # shape[k] == 0: never skips a size-1 axis
    ],
    "05_collective_matmul": [
        "matmul_allreduce/constant/d5f7a751a1",  # 0 chunks when F % 4 != 0: a case with F = 9
        "matmul_reducescatter_bidir/operator/f4afa7d392",  # me - rightward: a ring of 3 devices
    ],
    "06_moe": ["moe_topk/keyword_dropped/60f18af5c7"],  # shard_map without in_specs: a mesh of Auto axes
    "09_precision": ["bf16x3_matmul/dtype/d873dd7c83"],  # float16 remainder: operands scaled by 2**18
}


@pytest.mark.parametrize(
    ("assignment", "fingerprint"), [(a, fp) for a, fps in STRENGTHENED.items() for fp in fps]
)
def test_strengthened_graders_and_self_checks_kill_their_mutant(assignment, fingerprint):
    nb, mutants = generated(assignment)
    (mutant,) = [m for m in mutants if m.fingerprint == fingerprint]
    base = M.base_namespace(nb)
    for cell in ("_hidden", "_visible"):  # each on its own: the self-check runs first when both do
        only = dataclasses.replace(
            nb, tests={fn: [(g, s) for g, s in cells if g.endswith(cell)] for fn, cells in nb.tests.items()}
        )
        judged = M.judge(only, base, dataclasses.replace(mutant))
        assert judged.status == "killed" and cell in judged.killed_by, (cell, judged.killed_by)
        assert "expected" in judged.killed_by and "got" in judged.killed_by
    assert "Hint:" in judged.killed_by, judged.killed_by  # the self-check's message, in words


def test_a_mutant_past_the_time_limit_counts_as_killed_and_says_so():
    loop = [("test_f_hidden", "while True:\n    f()\n")]
    nb = M.Notebook("toy", [], {"f": "def f():\n    return 1\n"}, {"f": loop}, {"X", "Y"})
    mutant = M.Mutant("toy", "f", "constant", "f/constant/0", "", "def f():\n    return 2\n")
    M.judge(nb, {}, mutant, timeout=1)
    assert mutant.status == "timeout" and "1 s" in mutant.killed_by
    (row,) = M.summarize("toy", [vars(mutant)], {})
    assert row["timeout"] == 1 and row["rate"] == 1.0


def test_hard_coding_mutants_write_down_the_self_checks_first_values():
    # The family of grading/mutations.py: a read of the mesh or the arguments replaced by its value in
    # the self-check's first call, the mesh parameter by the notebook's global mesh; a read whose value
    # the tests never vary (absent from `first`) makes none. The values come from running the
    # self-check (tests/test_parity.py runs that part on toy and real notebooks).
    import ast

    from jax.sharding import Mesh

    from grading.mutations import Sites, hardcoding_mutants, hardcoding_sites, parameters, solution_lines

    sites = Sites(ast.parse(TOY), *solution_lines(TOY))
    reads = [ast.unparse(sites.nodes[i]) for i in hardcoding_sites(sites)]
    assert reads[0] == "mesh.shape['Y']" and "mesh" in reads
    assert parameters(ast.parse(TOY)) == ["x", "w", "mesh"]
    mesh = Mesh(__import__("numpy").array(__import__("jax").devices()[:1]).reshape(1, 1), ("X", "Y"))
    first = {0: 4, -3: mesh}  # mesh.shape["Y"] was 4; the third parameter a Mesh
    ms = hardcoding_mutants("toy", "f", TOY, first, ["mesh"], Mesh)
    assert [m.kind for m in ms] == ["hardcoded", "global_mesh"]
    assert "    n = 4\n" in ms[0].source and "def f(x, w, mesh_given):" in ms[1].source
    assert hardcoding_mutants("toy", "f", TOY, {}, ["mesh"], Mesh) == []
