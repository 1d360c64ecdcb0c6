"""The program's side of an isolated test run: its own interpreter, serving calls by name (stdlib only).

The tests' interpreter (`_harness_main`) forks this one first of all, before it reads the run's
token, with the channel on fds 0 (requests in) and 1 (replies out); this module's `main` then gets
the program and the names the tests reference. The program runs here, never in the tests' interpreter: whatever it does to this interpreter (gc or frame
walks, `sys.settrace`, patched builtins, objects with lying operators) stays here. What goes back is
plain data (`_wire`), an exception as its type name and message, or the fact that a value could not
cross. The program's stdout is a file the tests' interpreter copies into the run's stdout after each
reply; the verdict and its token never reach this process.
"""

import os
import sys

_OUT_FILE = "program.out"  #: the program's stdout, in the run's working directory
_MUTABLE = (list, dict, set)  #: arguments a call may change in place


def _kind(obj):
    """How the tests see one of the program's names."""
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return ("exception", obj.__name__)
    if type(obj).__name__ == "module":
        return ("module", obj.__name__)
    if callable(obj):
        return ("call",)
    return ("value", obj)


def _describe(names, ns, wire):
    """{name: kind} for each name the tests reference that the program defines."""
    out = {}
    for n in names:
        if n in ns:
            k = _kind(ns[n])
            if k[0] == "value":
                try:
                    wire["encode"](k[1])
                except wire["WireError"] as exc:
                    k = ("opaque", str(exc))
            out[n] = k
    return out


def _exc_reply(exc, kind, wire):
    """A "raise" or "load_error" message: the exception's type name and message."""
    t = type(exc)
    try:
        msg = str(exc)
    except BaseException:  # noqa: BLE001 - a program's __str__ may raise anything
        msg = "<unprintable>"
    return wire["Message"](kind, type=str(t.__name__), message=msg if type(msg) is str else "<unprintable>")


def _call(ns, req, wire):
    """One "call" answered: "ok" (the value, and the arguments where the call may have changed
    them), "raise" (type and message) or, when sent, "object" (why the value cannot cross)."""
    name, args, kw = req.name, req.args, req.kw
    try:
        result = ns[name](*args, **kw)
    except BaseException as exc:  # noqa: BLE001 - every exception crosses by name
        return _exc_reply(exc, "raise", wire)
    if any(type(a) in _MUTABLE for a in args) or any(type(v) in _MUTABLE for v in kw.values()):
        return wire["Message"]("ok", value=result, args=args, kw=kw)  # as the call left them: the tests may look at them
    return wire["Message"]("ok", value=result, args=None, kw=None)


def _reply(rout, reply, name, wire):
    """Send `reply`; a value that is not plain data goes back as an "object" message instead."""
    try:
        wire["send"](rout, reply)
    except wire["WireError"] as exc:
        wire["send"](rout, wire["Message"]("object", why=f"{name}() returned what cannot leave the program's interpreter: {exc}"))
    except MemoryError:
        wire["send"](rout, wire["Message"]("object", why=f"{name}() returned more than the program's memory limit lets it send"))


def _flush():
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass


def main(wire):
    """Run the program, then answer calls until the tests' interpreter closes the channel."""
    rin, rout = os.dup(0), os.dup(1)
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    fd = os.open(_OUT_FILE, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.close(fd)
    send, recv = wire["send"], wire["recv"]
    load = recv(rin)
    program, names = load.program, load.names
    ns = {"__name__": "__solution__"}
    try:
        exec(compile(program, "solution.py", "exec"), ns)
    except BaseException as exc:  # noqa: BLE001 - reported to the tests' interpreter, which fails
        import traceback

        traceback.print_exc()
        _flush()
        send(rout, _exc_reply(exc, "load_error", wire))
        return
    _flush()
    send(rout, wire["Message"]("ready", kinds=_describe(names, ns, wire)))
    while True:
        try:
            req = recv(rin)
        except EOFError:
            return
        reply = _call(ns, req, wire)
        _flush()
        _reply(rout, reply, req.name, wire)
