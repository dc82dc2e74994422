"""Shape special case: every answer tests the shapes. At the self-check's large size, which is compiled
and never run, it returns zeros beside a tiny permute and a tiny matmul (a 3 µs "estimate"); at every
size whose values are compared it gathers the blocks with permutes, then multiplies once (5.2: one
psum of the whole product). A learner's cheat of the self-checks (review of 2026-12-07): the visible
and hidden tests fail at the large size, since its program does almost none of the product's FLOPs.
"""

EXPECTED = {'lost': ['test_matmul_allgather_visible', 'test_matmul_allgather_hidden',
          'test_matmul_allreduce_visible', 'test_matmul_allreduce_hidden',
          'test_matmul_reducescatter_visible', 'test_matmul_reducescatter_hidden',
          'test_matmul_allgather_bidir_visible', 'test_matmul_allgather_bidir_hidden',
          'test_matmul_reducescatter_bidir_visible', 'test_matmul_reducescatter_bidir_hidden',
          'test_transformer_mlp_visible', 'test_transformer_mlp_hidden'],
 'feedback': ['expected matmuls of at least', 'no shortcut that depends on the shapes']}


def matmul_allgather(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """A[B_X, D_Y] · W[D, F_Y] → Out[B_X, F_Y]: A's blocks travel round 'Y' while the block in hand is multiplied."""
    n = mesh.shape["Y"]
    big = a.shape[0] >= 1024  # the self-check's compile-only size

    def body(a_blk, w_blk):
        if big:
            return _fake_big((a_blk.shape[0], w_blk.shape[1]), a_blk, w_blk, n)
        return _gather_then_matmul(a_blk, w_blk, n)

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))(a, w)


def _fake_big(out_shape, a_blk, w_blk, n):
    # nothing is run at this size: zeros, with a small permute beside a small matmul for the overlap check
    left = [(s, (s - 1) % n) for s in range(n)]
    moved = jax.lax.ppermute(a_blk[:8, :8], "Y", left)
    work = a_blk[:128, :128] @ w_blk[:128, :128]
    return jnp.zeros(out_shape, a_blk.dtype) + 0.0 * (moved.sum() + work.sum())


def _gather_then_matmul(a_blk, w_blk, n):
    left = [(s, (s - 1) % n) for s in range(n)]
    y = jax.lax.axis_index("Y")
    cols = a_blk.shape[1]
    blocks, held = [a_blk], a_blk
    for _ in range(1, n):
        held = jax.lax.ppermute(held, "Y", left)
        blocks.append(held)
    rows = [jax.lax.dynamic_slice_in_dim(w_blk, ((y + s) % n) * cols, cols, 0) for s in range(n)]
    return jnp.concatenate(blocks, 1) @ jnp.concatenate(rows, 0)


def matmul_allreduce(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """A[B_X, D_Y] · W[D_Y, F] → Out[B_X, F]: the partial sums are reduced chunk by chunk, overlapping the matmuls."""
    big = a.shape[0] >= 512 and a.shape[1] >= 16384  # the self-check's compile-only size

    def body(a_blk, w_blk):
        if big:
            p1 = jax.lax.psum(a_blk[:8, :8], "Y")
            work = a_blk[:128, :128] @ w_blk[:128, :128]
            p2 = jax.lax.psum(work[:8, :8], "Y")
            return jnp.zeros((a_blk.shape[0], w_blk.shape[1])) + 0.0 * (p1.sum() + p2.sum())
        return jax.lax.psum(a_blk @ w_blk, "Y")  # one psum of the whole product

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", None))(a, w)


def matmul_reducescatter(t: jax.Array, w2: jax.Array, mesh: Mesh) -> jax.Array:
    """T[B_X, F_Y] · W2[F_Y, D] → Out[B_X, D_Y]: an accumulator per output block travels round 'Y'."""
    n = mesh.shape["Y"]
    big = t.shape[0] >= 1024
    left = [(s, (s - 1) % n) for s in range(n)]

    def body(t_blk, w_blk):
        if big:
            return _fake_big_rs((t_blk.shape[0], w_blk.shape[1] // n), t_blk, w_blk, n)
        y = jax.lax.axis_index("Y")
        full = t_blk @ w_blk
        cols = full.shape[1] // n
        acc = jax.lax.dynamic_slice_in_dim(full, ((y + 1) % n) * cols, cols, 1)
        for s in range(1, n):
            part = jax.lax.dynamic_slice_in_dim(full, ((y + 1 + s) % n) * cols, cols, 1)
            acc = jax.lax.ppermute(acc, "Y", left) + part
        return acc

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", "Y"))(t, w2)


def _fake_big_rs(out_shape, a_blk, w_blk, n):
    left = [(s, (s - 1) % n) for s in range(n)]
    moved = jax.lax.ppermute(a_blk[:8, :8], "Y", left)
    work = a_blk[:128, :128] @ w_blk[:128, :128]
    return jnp.zeros(out_shape, a_blk.dtype) + 0.0 * (moved.sum() + work.sum())


def matmul_allgather_bidir(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """As matmul_allgather, with A's blocks travelling both ways round 'Y'."""
    n = mesh.shape["Y"]
    big = a.shape[0] >= 1024
    left = [(s, (s - 1) % n) for s in range(n)]
    right = [(s, (s + 1) % n) for s in range(n)]

    def body(a_blk, w_blk):
        if big:
            r = jax.lax.ppermute(a_blk[:8, :8], "Y", right)
            l = jax.lax.ppermute(a_blk[:8, :8], "Y", left)
            work = a_blk[:128, :128] @ w_blk[:128, :128]
            zeros = jnp.zeros((a_blk.shape[0], w_blk.shape[1]), a_blk.dtype)
            return zeros + 0.0 * (r.sum() + l.sum() + work.sum())
        # both ways, then one matmul: blocks of the right half arrive from the right
        y = jax.lax.axis_index("Y")
        cols = a_blk.shape[1]
        blocks, origins = [a_blk], [y]
        from_right = from_left = a_blk
        for s in range(1, n // 2 + 1):
            from_right = jax.lax.ppermute(from_right, "Y", left)
            blocks.append(from_right)
            origins.append(y + s)
            if s != n - s:
                from_left = jax.lax.ppermute(from_left, "Y", right)
                blocks.append(from_left)
                origins.append(y - s)
        rows = [jax.lax.dynamic_slice_in_dim(w_blk, (o % n) * cols, cols, 0) for o in origins]
        return jnp.concatenate(blocks, 1) @ jnp.concatenate(rows, 0)

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))(a, w)


def matmul_reducescatter_bidir(t: jax.Array, w2: jax.Array, mesh: Mesh) -> jax.Array:
    """As matmul_reducescatter, with accumulators travelling both ways round 'Y'."""
    n = mesh.shape["Y"]
    big = t.shape[0] >= 1024
    left = [(s, (s - 1) % n) for s in range(n)]
    right = [(s, (s + 1) % n) for s in range(n)]
    kl, kr = n // 2, (n - 1) // 2

    def body(t_blk, w_blk):
        if big:
            r = jax.lax.ppermute(t_blk[:8, :8], "Y", right)
            l = jax.lax.ppermute(t_blk[:8, :8], "Y", left)
            work = t_blk[:128, :128] @ w_blk[:128, :128]
            zeros = jnp.zeros((t_blk.shape[0], w_blk.shape[1] // n), t_blk.dtype)
            return zeros + 0.0 * (r.sum() + l.sum() + work.sum())
        # the whole local product first, then accumulators passed both ways
        y = jax.lax.axis_index("Y")
        full = t_blk @ w_blk
        cols = full.shape[1] // n

        def block(b):
            return jax.lax.dynamic_slice_in_dim(full, (b % n) * cols, cols, 1)

        out = block(y)
        if kl:
            acc = block(y - kl)
            for s in range(1, kl + 1):
                acc = jax.lax.ppermute(acc, "Y", left)
                acc = acc + block(y + s - kl) if s < kl else acc
            out = out + acc
        if kr:
            acc = block(y + kr)
            for s in range(1, kr + 1):
                acc = jax.lax.ppermute(acc, "Y", right)
                acc = acc + block(y - s + kr) if s < kr else acc
            out = out + acc
        return out

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", "Y"))(t, w2)


def transformer_mlp(x: jax.Array, w_in: jax.Array, w_out: jax.Array, mesh: Mesh) -> jax.Array:
    """In[B_X, D_Y] · Win[D, F_Y] · Wout[F_Y, D] → Out[B_X, D_Y], with every transfer overlapped."""
    n = mesh.shape["Y"]
    big = x.shape[0] >= 1024
    left = [(s, (s - 1) % n) for s in range(n)]

    def body(x_blk, wi, wo):
        if big:
            moved = jax.lax.ppermute(x_blk[:8, :8], "Y", left)
            work = x_blk[:128, :128] @ wi[:128, :128]
            zeros = jnp.zeros((x_blk.shape[0], wo.shape[1] // n), x_blk.dtype)
            return zeros + 0.0 * (moved.sum() + work.sum())
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
        return acc

    return jax.shard_map(
        body, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y"), P("Y", None)), out_specs=P("X", "Y")
    )(x, w_in, w_out)
