"""The plain-data wire between the tests' interpreter and the program's (issue 33)."""

from __future__ import annotations

import math
import os
from collections import OrderedDict

import pytest

from evalsuite.sandbox import _wire

PLAIN = [
    None,
    True,
    False,
    0,
    -1,
    2**200,
    -(2**130) + 7,
    1.5,
    -0.0,
    math.inf,
    3 + 4j,
    "",
    "héllo \ud800",
    b"\x00\xff",
    [],
    (),
    {},
    set(),
    frozenset({1, "a"}),
    [1, (2, {"k": {3}}), {frozenset({(1, 2)}): [None, b"x"]}],
    {(1, 2): {"a": [1.0, 2j]}},
]


@pytest.mark.parametrize("value", PLAIN, ids=[repr(v)[:30] for v in PLAIN])
def test_plain_data_round_trips_with_its_exact_types(value):
    back = _wire.decode(_wire.encode(value))
    assert back == value and type(back) is type(value)
    assert repr(back) == repr(value)


def test_nan_round_trips():
    assert math.isnan(_wire.decode(_wire.encode(math.nan)))


class Liar(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


NOT_PLAIN = [
    (Liar(3), "Liar"),
    (OrderedDict(a=1), "OrderedDict"),
    ([1, object()], "object"),
    ({"k": lambda: 1}, "function"),
    (type("S", (str,), {})("x"), "S"),
    ((i for i in ()), "generator"),
    (bytearray(b"x"), "bytearray"),
]


@pytest.mark.parametrize(("value", "name"), NOT_PLAIN, ids=[n for _, n in NOT_PLAIN])
def test_anything_else_is_refused_by_name(value, name):
    with pytest.raises(_wire.WireError, match=name):
        _wire.encode(value)


def test_depth_and_size_are_bounded():
    deep: list = []
    for _ in range(_wire.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(_wire.WireError, match="deeper"):
        _wire.encode(deep)
    ok: list = []
    for _ in range(_wire.MAX_DEPTH - 1):
        ok = [ok]
    assert _wire.decode(_wire.encode(ok)) == ok
    with pytest.raises(_wire.WireError, match="limit"):
        _wire.encode(b"x" * (_wire.MAX_BYTES + 1))


MALFORMED = [
    (b"", "truncated"),
    (b"i\x00\x00\x00\x09\x01", "truncated"),
    (b"Nx", "trailing"),
    (b"?", "unknown tag"),
    (b"S\x00\x00\x00\x01l\x00\x00\x00\x00", "unhashable"),
    (b"d\x00\x00\x00\x01l\x00\x00\x00\x00N", "unhashable"),
    (b"l\x00\x00\x00\x01" * 200, "deeper"),
]


@pytest.mark.parametrize(("data", "why"), MALFORMED, ids=[w + str(i) for i, (_, w) in enumerate(MALFORMED)])
def test_malformed_messages_are_refused(data, why):
    with pytest.raises(_wire.WireError, match=why):
        _wire.decode(data)


def test_messages_cross_a_pipe_and_eof_is_seen():
    r, w = os.pipe()
    try:
        _wire.send(w, ("ok", [1, 2], {"a": None}))
        assert _wire.recv(r) == ("ok", [1, 2], {"a": None})
        os.close(w)
        w = -1
        with pytest.raises(EOFError):
            _wire.recv(r)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_what_a_message_decodes_to_is_bounded_as_well_as_its_size():
    """15 MB of empty sets would be over 600 MB of objects in the reader: refused before it builds them (issue 40)."""
    n = 3_000_000
    flood = b"l" + n.to_bytes(4, "big") + b"S\x00\x00\x00\x00" * n
    assert len(flood) < _wire.MAX_BYTES
    with pytest.raises(_wire.WireError, match="decodes to over"):
        _wire.decode(flood)
    assert _wire.decode(_wire.encode([set()] * 1000)) == [set()] * 1000  # a modest one still crosses


def test_a_count_longer_than_the_message_is_refused_before_it_is_built():
    with pytest.raises(_wire.WireError, match="truncated"):
        _wire.decode(b"l" + (10_000).to_bytes(4, "big") + b"N")


def test_messages_are_tagged_records_read_by_name():
    """Every message is a `Message` of a known kind with its fields by name (issue 40: no tuple told apart by its length)."""
    m = _wire.Message("ok", value=[1, {2}], args=None, kw=None)
    back = _wire.decode(_wire.encode(m))
    assert (type(back), back.kind, back.value, back.args, back.kw) == (_wire.Message, "ok", [1, {2}], None, None)
    with pytest.raises(AttributeError):
        back.kind = "raise"


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: _wire.Message("ok", value=1), "fields"),
        (lambda: _wire.Message("nosuch"), "fields"),
        (lambda: _wire.encode([_wire.Message("object", why="x")]), "not plain data"),
        (lambda: _wire.decode(b"M" + bytes(_wire.encode("nosuch"))), "unknown message kind"),
        (lambda: _wire.decode(b"M" + bytes(_wire.encode("object"))), "truncated"),
    ],
    ids=["missing field", "unknown kind", "nested", "unknown kind on the wire", "missing field on the wire"],
)
def test_a_malformed_message_is_refused(build, match):
    with pytest.raises(_wire.WireError, match=match):
        build()
