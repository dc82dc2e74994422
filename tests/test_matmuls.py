"""shardbook.matmuls: every matmul of a program is found, and only those that make an output count."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shardbook.checks import CheckFailed
from shardbook.matmuls import dot_generals, expect_matmul_work, matmul_work


def test_dot_generals_reads_every_program_inside():
    # property: a matmul under jit, in either branch of a cond, in a loop's body or in a custom_vjp is a
    # matmul of the program (a walker that skipped cond's tuple of branches missed an f32 one)
    @jax.custom_vjp
    def custom(a):
        return a @ a

    custom.defvjp(lambda a: (custom(a), a), lambda a, g: (g @ a.T,))

    def f(a):
        in_jit = jax.jit(lambda a: a @ a)(a)
        in_cond = jax.lax.cond(a[0, 0] > 0, lambda: a, lambda: a @ a)
        in_loop = jax.lax.fori_loop(0, 2, lambda i, c: c @ a, a)
        return in_jit + in_cond + in_loop + custom(a)

    a = jnp.ones((3, 3))
    assert len(dot_generals(f, a)) == 4
    assert len(dot_generals(jax.make_jaxpr(f)(a))) == 4  # a jaxpr already traced, as it is


def test_matmul_work_says_which_outputs_each_matmul_feeds():
    # property: doubling a matmul that makes an output moves it; one multiplied by zero, or left in the
    # branch a cond does not take, moves nothing; one in a loop's body is not probed (None); pairs count
    # the batch dimensions too
    a = jnp.asarray(np.random.default_rng(0).standard_normal((2, 4, 3)), jnp.float32)

    def f(a):
        used = jnp.einsum("bij,bkj->bik", a, a)  # 2 batches of 4·4 outputs, sums of length 3
        thrown = 0.0 * (a[0] @ a[0].T)
        untaken = jax.lax.cond(a[0, 0, 0] == a[0, 0, 0], lambda: a[0], lambda: a[0] @ jnp.ones((3, 3)))
        looped = jax.lax.fori_loop(0, 1, lambda i, c: c @ jnp.eye(3), a[1])
        return used.sum(0) + thrown, untaken + looped

    work = matmul_work(f, a)
    assert [w.pairs for w in work] == [96, 48, 36, 36]
    used, thrown, untaken, looped = work
    assert used.moves[0] > 0.1 and used.moves[1] == 0.0
    assert thrown.moves == (0.0, 0.0) and untaken.moves == (0.0, 0.0) and looped.moves is None


def test_expect_matmul_work_names_the_output_and_the_pairs():
    # property: an elementwise multiply-and-sum beside a matmul thrown away fails, naming the output,
    # the pairs needed and those that feed it; the real matmul passes
    a = jnp.asarray(np.random.default_rng(1).standard_normal((4, 8)), jnp.float32)
    need = [("C", 4 * 8 * 4, "one product")]
    expect_matmul_work(lambda a: a @ a.T, a, needs=need, what="f")
    with pytest.raises(
        CheckFailed,
        match=r"f: expected the dot_generals that C depends on to multiply at least 128 pairs of numbers "
        r"\(one product\), got 0 \(0 of the program's 1 dot_generals feed C\)\. Hint: a real matmul",
    ):
        expect_matmul_work(
            lambda a: (a[:, None, :] * a[None, :, :]).sum(-1) + 0.0 * (a @ a.T),
            a,
            needs=need,
            what="f",
            hint="a real matmul.",
        )
