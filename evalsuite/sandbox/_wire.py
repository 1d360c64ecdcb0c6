"""Plain data across the channel between the tests' interpreter and the program's (stdlib only).

Only None, bool, int, float, complex, str, bytes, list, tuple, dict, set and frozenset cross, recursively,
and only their exact types: a subclass (an `int` whose `__eq__` lies) or any other object is refused
when encoded and cannot be produced when decoded, so nothing the program wrote reaches the tests'
interpreter as code. Messages are bounded on the wire (`MAX_BYTES`, `MAX_DEPTH`) and once decoded
(`MAX_DECODED`: 15 MB of empty sets would be over 600 MB of objects in the reader). Both interpreters run this
module's code (`harness.build_harness` ships it); the suite imports it only for tests.

Every message is a `Message`: a kind (`KINDS`) and its fields by name, never told apart by its
length or read by position. Values inside it are plain data.

Format: one tag byte per value; lengths and counts as 4-byte big-endian unsigned ints; a message is
"M", its kind as a string, then its fields' values in the order `KINDS` gives.
"""

import os
import struct

MAX_DEPTH = 100  #: nesting levels a message may have
MAX_BYTES = 64 * 1024 * 1024  #: bytes one message may take
MAX_DECODED = 128 * 1024 * 1024  #: bytes of objects one message may decode to (CPython's sizes, estimated)

# estimated bytes of each decoded container: a fixed part and a part per item (a float takes 24, a
# complex 32, and an int, str or bytes about 40 and one per byte, counted as they are read)
_COST = {b"l": (56, 8), b"t": (40, 8), b"S": (216, 64), b"Z": (216, 64), b"d": (64, 64)}

_F = struct.Struct(">d")
_C = struct.Struct(">dd")


class WireError(ValueError):
    """A value that cannot cross: not plain data, too deep, too large or malformed."""


#: every kind of message and its fields, in their order on the wire
KINDS = {
    "load": ("program", "names"),  # harness -> program: the program's source, the names the tests reference
    "ready": ("kinds",),  # program -> harness -> tests: {name: how the tests see it}
    "load_error": ("type", "message"),  # program -> harness: the program raised while loading
    "call": ("name", "args", "kw"),  # tests -> (harness ->) program
    "ok": ("value", "args", "kw"),  # program -> tests: the result; args and kw as the call left them, or None
    "raise": ("type", "message"),  # program -> tests: the call raised
    "object": ("why",),  # program -> tests: the result cannot cross, and why (the program's words)
    "done": ("tests_run", "why"),  # tests -> harness: their report (why: None, or why they stopped)
}


class Message:
    """One message: its `kind` and its fields (`KINDS`), read by name; read-only."""

    __slots__ = ("kind", "fields")

    def __init__(self, kind, **fields):
        if KINDS.get(kind) != tuple(fields):
            raise WireError(f"a {kind!r} message has the fields {KINDS.get(kind)}, not {tuple(fields)}")
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "fields", fields)

    def __getattr__(self, name):
        try:
            return object.__getattribute__(self, "fields")[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError("a Message is read-only")

    def __repr__(self):
        return f"Message({self.kind!r}, {self.fields!r})"


def _len4(n):
    return n.to_bytes(4, "big")


def _enc(x, out, depth):
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels")
    t = type(x)
    if x is None:
        out += b"N"
    elif t is bool:
        out += b"T" if x else b"F"
    elif t is int:
        b = x.to_bytes((x.bit_length() + 8) // 8, "big", signed=True)
        out += b"i" + _len4(len(b))
        out += b
    elif t is float:
        out += b"f" + _F.pack(x)
    elif t is complex:
        out += b"c" + _C.pack(x.real, x.imag)
    elif t is str:
        b = x.encode("utf-8", "surrogatepass")
        out += b"s" + _len4(len(b))
        out += b
    elif t is bytes:
        out += b"b" + _len4(len(x))
        out += x
    elif t is list or t is tuple or t is set or t is frozenset:
        out += _SEQ_TAG[t] + _len4(len(x))
        for v in x:
            _enc(v, out, depth + 1)
            if len(out) > MAX_BYTES:
                raise WireError(f"message of over {MAX_BYTES} bytes")
    elif t is dict:
        out += b"d" + _len4(len(x))
        for k, v in x.items():
            _enc(k, out, depth + 1)
            _enc(v, out, depth + 1)
    else:
        raise WireError(f"a {t.__module__}.{t.__qualname__} is not plain data")


_SEQ_TAG = {list: b"l", tuple: b"t", set: b"S", frozenset: b"Z"}


def encode(x):
    """`x` as bytes; WireError when it is not plain data (or a Message of plain data) or is over the bounds."""
    out = bytearray()
    try:
        if type(x) is Message:
            out += b"M"
            _enc(x.kind, out, 0)
            for v in x.fields.values():
                _enc(v, out, 1)
        else:
            _enc(x, out, 0)
    except RecursionError:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels") from None
    if len(out) > MAX_BYTES:
        raise WireError(f"message of {len(out)} bytes (limit {MAX_BYTES})")
    return out


class _Reader:
    __slots__ = ("data", "pos", "left")

    def __init__(self, data):
        self.data, self.pos, self.left = data, 0, MAX_DECODED

    def take(self, n):
        p = self.pos
        if n < 0 or p + n > len(self.data):
            raise WireError("truncated message")
        self.pos = p + n
        return self.data[p : p + n]

    def count(self):
        return int.from_bytes(self.take(4), "big")

    def sized(self, fixed, per):
        """The next length or item count, once the object it makes fits in what is left of `MAX_DECODED`."""
        n = self.count()
        self.left -= fixed + per * n
        if self.left < 0:
            raise WireError(f"message decodes to over {MAX_DECODED} bytes of objects")
        if n > len(self.data) - self.pos:  # every item or byte takes at least one byte
            raise WireError("truncated message")
        return n


def _dec(r, depth):
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels")
    tag = r.take(1)
    if tag == b"N":
        return None
    if tag == b"T":
        return True
    if tag == b"F":
        return False
    if tag == b"i":
        return int.from_bytes(r.take(r.sized(32, 1)), "big", signed=True)
    if tag == b"f":
        r.left -= 24
        return _F.unpack(r.take(8))[0]
    if tag == b"c":
        r.left -= 32
        re_, im = _C.unpack(r.take(16))
        return complex(re_, im)
    if tag == b"s":
        return r.take(r.sized(56, 1)).decode("utf-8", "surrogatepass")
    if tag == b"b":
        return bytes(r.take(r.sized(40, 1)))
    if tag in (b"l", b"t", b"S", b"Z"):
        n = r.sized(*_COST[bytes(tag)])
        items = [_dec(r, depth + 1) for _ in range(n)]
        try:
            return items if tag == b"l" else tuple(items) if tag == b"t" else set(items) if tag == b"S" else frozenset(items)
        except TypeError as exc:
            raise WireError(f"unhashable set member: {exc}") from None
    if tag == b"d":
        n = r.sized(64, 64)
        d = {}
        for _ in range(n):
            k = _dec(r, depth + 1)
            try:
                d[k] = _dec(r, depth + 1)
            except TypeError as exc:
                raise WireError(f"unhashable dict key: {exc}") from None
        return d
    raise WireError(f"unknown tag {tag!r}")


def _message(r):
    """The Message at the reader's position (after its "M")."""
    kind = _dec(r, 1)
    names = KINDS.get(kind) if type(kind) is str else None
    if names is None:
        raise WireError(f"unknown message kind {kind!r}"[:200])
    return Message(kind, **{n: _dec(r, 1) for n in names})


def decode(data):
    """The value `encode` made of `data`; WireError on anything else."""
    if len(data) > MAX_BYTES:
        raise WireError(f"message of {len(data)} bytes (limit {MAX_BYTES})")
    r = _Reader(data)
    try:
        x = _message(r) if data[:1] == b"M" and r.take(1) else _dec(r, 0)
    except RecursionError:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels") from None
    if r.pos != len(data):
        raise WireError("trailing bytes")
    return x


def _read_exact(fd, n):
    chunks, got = [], 0
    while got < n:
        b = os.read(fd, min(n - got, 1 << 20))
        if not b:
            raise EOFError("the channel closed")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def send(fd, x):
    """One message: `x` encoded, after its length."""
    data = encode(x)
    for part in (len(data).to_bytes(4, "big"), data):
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view) :]


def recv(fd):
    """The next message's value; EOFError when the other side is gone."""
    n = int.from_bytes(_read_exact(fd, 4), "big")
    if n > MAX_BYTES:
        raise WireError(f"message of {n} bytes (limit {MAX_BYTES})")
    return decode(_read_exact(fd, n))
