"""ltdask.Shape: nav/sig split, flattening, tuple behaviour, pickling."""

from __future__ import annotations

import math
import pickle

import pytest
from dask.base import tokenize
from hypothesis import given
from hypothesis import strategies as st

from ltdask import Shape


@st.composite
def shapes(draw, min_dims=0):
    dims = tuple(draw(st.lists(st.integers(0, 9), min_size=min_dims, max_size=6)))
    sig_dims = draw(st.integers(0, len(dims)))
    return Shape(dims, sig_dims=sig_dims)


@given(shapes())
def test_nav_sig_split(s):
    dims = s.to_tuple()
    assert s.nav_dims + s.sig_dims == len(s) == len(dims)
    assert tuple(s.nav) + tuple(s.sig) == dims
    assert s.nav.sig_dims == 0 and s.sig.sig_dims == s.sig_dims
    assert tuple(s.sig) == dims[len(dims) - s.sig_dims :]
    assert s.size == math.prod(dims)
    assert s == dims and list(s) == list(dims)
    assert s[:] == dims
    if dims:
        assert s[-1] == dims[-1]


@given(shapes())
def test_flatten(s):
    flat = s.flatten_nav()
    assert flat.sig_dims == s.sig_dims
    assert flat[0] == math.prod(s.nav) and tuple(flat.sig) == tuple(s.sig)
    assert flat.size == s.size
    flat_sig = s.flatten_sig()
    assert flat_sig.sig_dims == 1
    assert tuple(flat_sig.nav) == tuple(s.nav) and flat_sig[-1] == math.prod(s.sig)


@given(shapes())
def test_equality_hash_pickle_token(s):
    same = Shape(s.to_tuple(), sig_dims=s.sig_dims)
    assert s == same and hash(s) == hash(same)
    assert tokenize(s) == tokenize(same)
    back = pickle.loads(pickle.dumps(s))
    assert back == s and back.sig_dims == s.sig_dims
    if 0 < len(s):
        other = Shape(s.to_tuple(), sig_dims=(s.sig_dims + 1) % (len(s) + 1))
        assert other != s
        assert tokenize(other) != tokenize(s)
    assert eval(repr(s), {"Shape": Shape}) == s


def test_concatenation():
    s = Shape((2, 3, 4), sig_dims=1)
    assert s + (5,) == (2, 3, 4, 5)
    assert (1,) + s == (1, 2, 3, 4)
    assert s.nav + s.sig == (2, 3, 4)


def test_compares_with_other_types():
    assert Shape((2, 3), sig_dims=1) != [2, 3]
    assert Shape((2, 3), sig_dims=1) != "23"


@pytest.mark.parametrize(
    "dims, sig_dims, message",
    [
        pytest.param((2, 3), 3, r"sig_dims=3 is out of range for shape \(2, 3\)", id="too-many"),
        pytest.param((2, 3), -1, "sig_dims=-1 is out of range", id="negative-sig-dims"),
        pytest.param((2, -3), 1, r"shape \(2, -3\) has negative dims", id="negative-dim"),
    ],
)
def test_errors(dims, sig_dims, message):
    with pytest.raises(ValueError, match=message):
        Shape(dims, sig_dims=sig_dims)
