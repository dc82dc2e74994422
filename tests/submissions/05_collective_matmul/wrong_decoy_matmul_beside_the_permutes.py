"""Decoy matmul: each answer gathers (5.1, 5.6) or reduces (5.3) with plain permutes and does its real
matmuls before or after them, never between; an unrelated 8 x 8 matmul, multiplied by zero, runs while
the permutes fly, so that "some permute runs while a matmul runs". A learner's cheat of the overlap
check (review of 2026-12-07): right values and bytes, and within plain jit's time + 10%, but the
visible and hidden tests fail on overlap: well under an eighth of the matmul time passes beside the
communication.
"""

EXPECTED = {'lost': ['test_matmul_allgather_visible', 'test_matmul_allgather_hidden',
          'test_matmul_reducescatter_visible', 'test_matmul_reducescatter_hidden',
          'test_transformer_mlp_visible', 'test_transformer_mlp_hidden'],
 'feedback': ['of the matmul time', 'to pass while a collective runs',
              'the matmuls beside the communication do little of the work']}


def matmul_allgather(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """A[B_X, D_Y] · W[D, F_Y] → Out[B_X, F_Y]: A's blocks travel round 'Y' while the block in hand is multiplied."""
    n = mesh.shape["Y"]
    left = [(s, (s - 1) % n) for s in range(n)]

    def body(a_blk, w_blk):
        y = jax.lax.axis_index("Y")
        cols = a_blk.shape[1]
        blocks, held = [a_blk], a_blk
        for _ in range(1, n):
            held = jax.lax.ppermute(held, "Y", left)
            blocks.append(held)
        rows = [jax.lax.dynamic_slice_in_dim(w_blk, ((y + s) % n) * cols, cols, 0) for s in range(n)]
        return jnp.concatenate(blocks, 1) @ jnp.concatenate(rows, 0) + _decoy(a_blk, w_blk)

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))(a, w)


def _decoy(u, v):
    # a matmul of at most 8 x 8 that has nothing to do with the result, to be seen "overlapping"
    k = min(8, u.shape[1], v.shape[0])
    return (u[:8, :k] @ v[:k, :8]).sum() * 0.0


def matmul_reducescatter(t: jax.Array, w2: jax.Array, mesh: Mesh) -> jax.Array:
    """T[B_X, F_Y] · W2[F_Y, D] → Out[B_X, D_Y]: an accumulator per output block travels round 'Y'."""
    n = mesh.shape["Y"]
    left = [(s, (s - 1) % n) for s in range(n)]

    def body(t_blk, w_blk):
        y = jax.lax.axis_index("Y")
        full = t_blk @ w_blk  # every contribution first, then a ring of slices with nothing to multiply
        cols = full.shape[1] // n
        acc = jax.lax.dynamic_slice_in_dim(full, ((y + 1) % n) * cols, cols, 1)
        for s in range(1, n):
            part = jax.lax.dynamic_slice_in_dim(full, ((y + 1 + s) % n) * cols, cols, 1)
            acc = jax.lax.ppermute(acc, "Y", left) + part
        return acc + _decoy(t_blk, w_blk)

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", "Y"))(t, w2)


def transformer_mlp(x: jax.Array, w_in: jax.Array, w_out: jax.Array, mesh: Mesh) -> jax.Array:
    """In[B_X, D_Y] · Win[D, F_Y] · Wout[F_Y, D] → Out[B_X, D_Y], with every transfer overlapped."""
    n = mesh.shape["Y"]
    left = [(s, (s - 1) % n) for s in range(n)]

    def body(x_blk, wi, wo):
        y = jax.lax.axis_index("Y")
        cols = x_blk.shape[1]
        blocks, held = [x_blk], x_blk
        for _ in range(1, n):
            held = jax.lax.ppermute(held, "Y", left)
            blocks.append(held)
        rows = [jax.lax.dynamic_slice_in_dim(wi, ((y + s) % n) * cols, cols, 0) for s in range(n)]
        full = (jnp.concatenate(blocks, 1) @ jnp.concatenate(rows, 0)) @ wo
        oc = full.shape[1] // n
        acc = jax.lax.dynamic_slice_in_dim(full, ((y + 1) % n) * oc, oc, 1)
        for s in range(1, n):
            part = jax.lax.dynamic_slice_in_dim(full, ((y + 1 + s) % n) * oc, oc, 1)
            acc = jax.lax.ppermute(acc, "Y", left) + part
        return acc + _decoy(x_blk, wi)

    return jax.shard_map(
        body, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y"), P("Y", None)), out_specs=P("X", "Y")
    )(x, w_in, w_out)
