"""shardbook.checks: each check passes on the right value and fails with expected / got / hint."""

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from shardbook.checks import (
    CheckFailed,
    describe_array,
    expect_allclose,
    expect_equal,
    expect_shape,
    expect_sharding,
    expect_type,
)


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((4, 2), ("X", "Y"))


def test_describe_array_names_dtype_shape_and_sharding(mesh):
    x = jax.device_put(np.zeros((8, 4), np.float32), NamedSharding(mesh, P("X", None)))
    assert describe_array(x) == "float32[8,4] sharded P('X', None)"
    r = jax.device_put(np.zeros((8, 4), np.float32), NamedSharding(mesh, P()))
    assert describe_array(r) == "float32[8,4] replicated"
    assert describe_array(None) == "None (did the function forget to return?)"
    assert describe_array(np.zeros(3, np.int32)) == "a NumPy array int32[3]"


def test_expect_equal_message_has_expected_got_and_hint():
    expect_equal((2, 4), (2, 4))
    with pytest.raises(CheckFailed) as e:
        expect_equal([2, 4], (2, 4), "the block shape", hint="return a tuple")
    assert str(e.value) == "the block shape: expected (2, 4), got [2, 4]. Hint: return a tuple"


def test_expect_equal_describes_arrays_instead_of_crashing():
    # Comparing an array with a tuple raises inside NumPy; the check must still answer in words.
    with pytest.raises(CheckFailed, match=r"expected \(2, 4\), got a NumPy array int64\[2\]"):
        expect_equal(np.array([2, 4]), (2, 4))


def test_expect_allclose_names_first_wrong_entry():
    expect_allclose(np.ones(3) + 1e-7, np.ones(3))
    with pytest.raises(CheckFailed, match=r"expected 1\.0 at index \(1,\), got 5\.0 \(1 of 3 entries differ"):
        expect_allclose(np.array([1.0, 5.0, 1.0]), np.ones(3))
    with pytest.raises(CheckFailed, match=r"expected shape \(3,\), got shape \(2,\)"):
        expect_allclose(np.ones(2), np.ones(3))
    with pytest.raises(CheckFailed, match=r"expected an array of shape \(3,\), got None"):
        expect_allclose(None, np.ones(3))


def test_expect_shape():
    expect_shape(np.zeros((2, 3)), (2, 3))
    with pytest.raises(CheckFailed, match=r"expected shape \(3, 2\), got shape \(2, 3\)"):
        expect_shape(np.zeros((2, 3)), (3, 2))


def test_expect_sharding_accepts_equivalent_specs_and_names_the_wrong_one(mesh):
    x = jax.device_put(np.zeros((8, 4), np.float32), NamedSharding(mesh, P("X", None)))
    expect_sharding(x, P("X"))  # P('X') and P('X', None) are the same layout
    with pytest.raises(CheckFailed) as e:
        expect_sharding(x, P(None, "Y"), "the output", hint="shard the columns")
    assert str(e.value) == (
        "the output: expected float32[8,4] sharded P(None, 'Y'), got float32[8,4] sharded P('X', None). "
        "Hint: shard the columns"
    )
    with pytest.raises(CheckFailed, match="expected a JAX array, got a NumPy array"):
        expect_sharding(np.zeros((8, 4)), P("X"))


def test_expect_type():
    expect_type(3, int)
    with pytest.raises(CheckFailed, match="expected a NamedSharding, got the tuple"):
        expect_type(("X",), NamedSharding, "the sharding")
