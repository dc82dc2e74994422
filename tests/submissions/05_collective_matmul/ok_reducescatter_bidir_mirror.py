"""A learner's bidirectional reduce-scatter (review of 2026-12-07), written in another order than the
reference solution: each stream's first part computed before the loop, the stream going left stepped
first. The longer stream goes right, as in the reference; the same code with it going left models at
102.2 µs, as the reference does, but this way XLA:CPU orders the four matmuls so that the first permute
waits for three of them, and the cost model gives 113.9 µs on the (2, 4) mesh (the reference's own
mirror image, its longer stream going left, models at 113.9 µs too). Correct either way, so within
Exercise 5.5's target: plain jit's 104.0 µs + 10%.
"""

EXPECTED = {'lost': [], 'feedback': []}


def matmul_reducescatter_bidir(t: jax.Array, w2: jax.Array, mesh: Mesh) -> jax.Array:
    """As matmul_reducescatter, with accumulators travelling both ways round 'Y'."""
    n = mesh.shape["Y"]
    left = [(s, (s - 1) % n) for s in range(n)]
    right = [(s, (s + 1) % n) for s in range(n)]
    kl = (n - 1) // 2  # passes of the stream going left
    kr = n // 2  # passes of the stream going right: the longer one

    def body(t_blk, w_blk):
        y = jax.lax.axis_index("Y")
        cols = w_blk.shape[1] // n

        def part(block):
            return t_blk @ jax.lax.dynamic_slice_in_dim(w_blk, (block % n) * cols, cols, axis=1)

        acc_l = part(y - kl) if kl else None
        acc_r = part(y + kr) if kr else None
        for s in range(1, max(kl, kr) + 1):
            if s <= kl:
                acc_l = jax.lax.ppermute(acc_l, "Y", left)
                if s < kl:
                    acc_l = acc_l + part(y + s - kl)
            if s <= kr:
                acc_r = jax.lax.ppermute(acc_r, "Y", right)
                if s < kr:
                    acc_r = acc_r + part(y - s + kr)
        out = part(y)
        if kl:
            out = out + acc_l
        if kr:
            out = out + acc_r
        return out

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", "Y"))(t, w2)
