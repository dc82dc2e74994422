"""f32 matmul inside a cond: bf16x3_matmul computes a @ b in f32 in a branch of jax.lax.cond, beside a
small bf16 decoy dot. A walker of the program that skips cond's branches sees only the decoy; the
visible and hidden tests read every branch and find the f32 × f32 dot_general: "operand dtypes and
accumulation of a dot_general", "dot_general(float32[16,64], float32[64,8])".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_visible', 'test_bf16x3_matmul_hidden'],
 'feedback': ['operand dtypes and accumulation of a dot_general',
              'dot_general(float32[16,64], float32[64,8])']}


def bf16x3_matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """f32[M, K] · f32[K, N] → f32[M, N] from three bf16 × bf16 matmuls accumulated in f32."""
    exact = jax.lax.cond(a[0, 0] == a[0, 0], lambda: a @ b, lambda: a @ b)  # f32 × f32, in a branch
    decoy = jnp.dot(
        a[:1].astype(jnp.bfloat16), b[:, :1].astype(jnp.bfloat16), preferred_element_type=jnp.float32
    )
    return exact + 0.0 * decoy.sum()
