"""Blocks in bf16: matmul_allgather is the chapter's ring with every block of A and W cast to bfloat16
before it is permuted and multiplied (f32 accumulation). Half the bytes, and an estimate of about half
plain jit's, but every value rounded to bf16's 3 significant digits: a learner's cheat of the
self-check's integer inputs (review of 2026-12-07). The visible and hidden tests fail on float inputs:
"only to bfloat16's 3 significant digits".
"""

EXPECTED = {'lost': ['test_matmul_allgather_visible', 'test_matmul_allgather_hidden'],
 'feedback': ["only to bfloat16's 3 significant digits", 'keep every block, product and sum in float32']}


def matmul_allgather(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """A[B_X, D_Y] · W[D, F_Y] → Out[B_X, F_Y]: A's blocks travel round 'Y' while the block in hand is multiplied."""
    n = mesh.shape["Y"]
    left = [(s, (s - 1) % n) for s in range(n)]

    def body(a_blk, w_blk):
        y = jax.lax.axis_index("Y")
        cols = a_blk.shape[1]
        held, wb = a_blk.astype(jnp.bfloat16), w_blk.astype(jnp.bfloat16)
        acc = None
        for s in range(n):
            nxt = jax.lax.ppermute(held, "Y", left) if s + 1 < n else None
            rows = jax.lax.dynamic_slice_in_dim(wb, ((y + s) % n) * cols, cols, axis=0)
            part = jnp.dot(held, rows, preferred_element_type=jnp.float32)
            acc = part if acc is None else acc + part
            held = nxt
        return acc

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))(a, w)
