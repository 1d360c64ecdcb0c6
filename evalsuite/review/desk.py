"""The reviewer's desk in a notebook: the review panel and the live views around it (anywidget).

`ReviewPanel` claims the next item (highest expected impact first) and shows, within one screen:
the item in one line with its progress, the reasons in words, the two outputs side by side, and the
evidence in tabs (what was asked, documents, checks, scores, history); below, a note box and one
button per action, each with its key. Every action goes through evalsuite.review.api, the same
calls as `evalsuite review annotate / skip / undo / back`. `ReviewDesk` ties the panel to an
overview and the open items' cards above it, which refresh after every verdict.

Modes: `anchors` (baseline and variant named), `pairwise` (blind: A and B in a seeded order per
item, "A worse / same / B worse"), `adjudicate` (disputed double reviews only). By default each
item is shown in the mode the rubric's `review.mode` gave it when it was flagged.

The panel renders in a shadow root, so JupyterLab's CSS cannot reach it; its keys are handled
inside and kept from JupyterLab. State lives in the queue (claims, verdicts), so a restarted kernel
or a reloaded page gets the same item back from `claim_next`.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t

from . import api, view
from .store import DEFAULT_LEASE_S

STATIC = Path(__file__).with_name("static")
EXPIRY_OPTIONS = [["", "waiver: no expiry"], ["30d", "waiver: 30 days"], ["90d", "waiver: 90 days"], ["rubric", "waiver: until the rubric changes"]]


def _button(action: str, value: str | None, label: str, key: str, cls: str, *, note: bool = True, title: str = "") -> dict:
    return {"action": action, "value": value, "label": label, "key": key, "cls": cls, "note": note, "needs_item": True, "title": title}


VERDICT_BUTTONS = [
    _button("verdict", "acceptable", "acceptable", "a", "acceptable", title="the difference is fine: waives it in the gate"),
    _button("verdict", "regression", "regression", "r", "regression", title="the variant's output is worse: fails the gate"),
    _button("verdict", "unsure", "unsure", "u", "unsure", title="leave it open for someone else"),
]
BLIND_BUTTONS = [
    _button("answer", "left_worse", "A worse", "1", "left_worse", title="the left answer is worse"),
    _button("answer", "same", "same", "2", "same", title="neither is worse"),
    _button("answer", "right_worse", "B worse", "3", "right_worse", title="the right answer is worse"),
    _button("verdict", "unsure", "unsure", "u", "unsure"),
]
MOVE_BUTTONS = [
    _button("skip", None, "skip", "s", "skip", note=False, title="put it behind the others for you and show the next"),
    {**_button("back", None, "back", "b", "back", note=False, title="the item you answered before"), "needs_item": False},
    {**_button("undo", None, "undo", "z", "undo", note=False, title="retract your last verdict and show its item again"), "needs_item": False},
]


class HtmlView(anywidget.AnyWidget):
    """HTML in a shadow root with the review styles: JupyterLab's CSS cannot reach it."""

    _esm = STATIC / "html.js"
    _style = t.Unicode(view.CSS).tag(sync=True)
    html = t.Unicode("").tag(sync=True)


class ReviewPanel(anywidget.AnyWidget):
    """The review panel (see the module docstring). `act({"action": ...})` is what a key or a button sends."""

    _esm = STATIC / "desk.js"
    _style = t.Unicode(view.CSS).tag(sync=True)
    header = t.Unicode("").tag(sync=True)
    progress = t.Unicode("").tag(sync=True)
    reasons = t.Unicode("").tag(sync=True)
    diff = t.Unicode("").tag(sync=True)
    tabs = t.List(t.Dict()).tag(sync=True)
    tab = t.Unicode("").tag(sync=True)
    buttons = t.List(t.Dict()).tag(sync=True)
    expiry_options = t.List(t.List()).tag(sync=True)
    status = t.Unicode("").tag(sync=True)
    status_kind = t.Unicode("").tag(sync=True)
    item_id = t.Int(0).tag(sync=True)
    serial = t.Int(0).tag(sync=True)
    autofocus = t.Bool(True).tag(sync=True)

    def __init__(
        self, queue: Any = None, reviewer: str | None = None, *, lease_s: float = DEFAULT_LEASE_S, mode: str | None = None, on_change: Callable | None = None
    ):
        super().__init__()
        if mode not in (None, "anchors", "pairwise", "adjudicate"):
            raise ValueError(f"mode: must be anchors, pairwise or adjudicate, got {mode!r}")
        self.queue, self.reviewer, self.lease_s, self.mode = queue, reviewer or api.default_reviewer(), lease_s, mode
        self.on_change: Callable | None = None
        self.item: dict | None = None
        self.recorded: list[dict] = []  #: rows this panel wrote (verdicts and retractions), in order
        self.done = 0  #: verdicts given in this session (the progress line's k)
        self._steps = 0  #: how far `back` has gone
        self._from: int | None = None  #: the item `back` started from
        self.on_msg(lambda _w, content, _b: self.act(content))
        self.next()
        self.on_change = on_change

    # -- actions (a key or button sends one; tests and scripts call them directly) -------------

    def act(self, msg: Mapping[str, Any]) -> dict | None:
        """Do what a key or button asked: verdict, answer, skip, undo or back; show the result."""
        action = msg.get("action")
        try:
            if action == "verdict":
                return self.record(str(msg.get("value")), msg.get("note") or "", expires=msg.get("expires") or None)
            if action == "answer":
                return self.answer(str(msg.get("value")), msg.get("note") or "")
            if action in ("skip", "undo", "back"):
                return getattr(self, action)()
            raise ValueError(f"unknown action {action!r}")
        except Exception as exc:  # noqa: BLE001 - shown in the panel, not lost in the kernel's log
            self._say(f"{type(exc).__name__}: {exc}", "error")
            return None

    def record(self, verdict: str, note: str = "", *, expires: str | None = None) -> dict | None:
        """Record a verdict on the shown item and move on (adjudication in adjudicate mode)."""
        if self.item is None:
            return None
        role = "adjudication" if self.mode == "adjudicate" or self.item.get("verdict") == "disputed" else "review"
        row = api.annotate(
            self.item["id"], verdict, note=note, reviewer=self.reviewer, queue=self.queue, role=role, expires=expires if verdict == "acceptable" else None
        )
        return self._after(row, f"#{row['item_id']}: {verdict}" + (f' ("{note}")' if note else ""))

    def answer(self, choice: str, note: str = "") -> dict | None:
        """A blind pairwise answer on the shown item (left_worse, same, right_worse) and move on."""
        if self.item is None:
            return None
        row = api.answer(self.item["id"], choice, note=note, reviewer=self.reviewer, queue=self.queue)
        return self._after(row, f"#{row['item_id']}: {choice.replace('_', ' ')} (recorded as {row['verdict']})")

    def _after(self, row: dict, said: str) -> dict:
        self.recorded.append(row)
        self.done += 1
        self._steps = 0
        self.next(said=f"recorded {said}")
        return row

    def skip(self) -> dict | None:
        """Put the shown item behind the others for this reviewer and show the next one."""
        if self.item is None:
            return None
        res = api.skip(self.item["id"], self.reviewer, self.queue, lease_s=self.lease_s)
        self.next(said=f"skipped #{res['item_id']}: it comes back after the others")
        return res

    def undo(self) -> dict | None:
        """Retract this reviewer's latest verdict (appended, never deleted) and show its item again."""
        done = api.answered(self.reviewer, self.queue, 1)
        if not done:
            self._say("nothing to undo: you have not given a verdict yet")
            return None
        res = api.undo(done[0], self.reviewer, self.queue)
        self.recorded.append(res)
        self.done = max(0, self.done - 1)
        self._show_item(api.claim(res["item_id"], self.reviewer, self.queue, lease_s=self.lease_s))
        self._say(f"undid your {res['undone']} on #{res['item_id']}: it is {res['state'] or 'open'} again; answer it anew")
        return res

    def back(self) -> dict | None:
        """Show the item answered before the shown one (again: further back); a new verdict replaces yours."""
        if self._steps == 0:
            self._from = self.item["id"] if self.item is not None else None
        it = api.back(self.reviewer, self.queue, steps=self._steps + 1, lease_s=self.lease_s, exclude=self._from)
        if it is None:
            self._say("no earlier item: you have not answered that many")
            return None
        if self.item is not None and self.item["id"] != it["id"] and self._steps == 0:
            api.release(self.item["id"], self.reviewer, self.queue)
        self._steps += 1
        self._show_item(it)
        self._say(f"back to #{it['id']}, which you answered: {it.get('verdict') or 'open'}; a new verdict replaces yours, z undoes it")
        return it

    def next(self, said: str = "") -> dict | None:
        """Claim the next item (highest expected impact first) and show it."""
        self.item = api.next_item(self.reviewer, lease_s=self.lease_s, queue=self.queue, adjudicate=self.mode == "adjudicate")
        self._show_item(self.item)
        self._say(said)
        return self.item

    # -- display ------------------------------------------------------------------------------

    def blind(self, item: Mapping[str, Any] | None) -> bool:
        """Whether the item is shown blind: the panel's mode, else the item's own."""
        return is_blind(item, self.mode)

    def _show_item(self, item: dict | None) -> None:
        if item is not None:
            item = api.show(item["id"], self.queue)
        self.item = item
        prog = api.progress(self.queue, self.reviewer)
        with self.hold_sync():
            self.progress = progress_line(prog, self.done)
            if item is None:
                self._empty(prog)
            else:
                self._fill(item)

    def _fill(self, item: dict) -> None:
        blind = self.blind(item)
        hist = item["history"]
        mine = any(h["reviewer"] == self.reviewer for h in hist)
        hide = item.get("reviews_needed", 1) > 1 and not mine and item.get("verdict") != "disputed"
        self.item_id = int(item["id"])
        self.header = view.header_html(item, blind)
        self.reasons = view.reasons_html(item, blind)
        self.diff = view.item_diff(item, blind)
        self.tabs = view.context_tabs(item, hist, blind=blind, hide_history=hide)
        self.tab = view.first_tab(item)
        self.buttons = (BLIND_BUTTONS if blind else VERDICT_BUTTONS[:2] if self.mode == "adjudicate" else VERDICT_BUTTONS) + MOVE_BUTTONS
        self.expiry_options = [] if blind else EXPIRY_OPTIONS

    def _empty(self, prog: Mapping[str, Any]) -> None:
        self.item_id = 0
        what = "disputed item to adjudicate" if self.mode == "adjudicate" else "item left for you"
        self.header = f"<b>no {what}</b>"
        self.reasons = ""
        self.diff = (
            f'<div class="empty">Nothing left for {html.escape(self.reviewer)}: {prog["open"]} open item(s) are claimed, skipped, or await someone else.</div>'
        )
        self.tabs = []
        self.buttons = MOVE_BUTTONS
        self.expiry_options = []

    def _say(self, text: str, kind: str = "") -> None:
        with self.hold_sync():
            self.status, self.status_kind = text, kind
            self.serial += 1
        if self.on_change is not None and kind != "error":
            self.on_change(self)


def is_blind(item: Mapping[str, Any] | None, mode: str | None) -> bool:
    """A blind pairwise review: the mode asked for, else the item's own (adjudication is never blind)."""
    if item is None or mode == "adjudicate":
        return False
    return (mode or item.get("mode")) == "pairwise"


def progress_line(prog: Mapping[str, Any], done: int) -> str:
    """`item 3 of 18 · opt 4/12 · spec 1/6 · flip 3/10 ...`: this session's place and the queue's, per variant and reason."""
    n = done + prog["open"]
    by_v = " · ".join(f"{html.escape(v)} {d}/{a}" for v, (d, a) in sorted(prog["by_variant"].items()))
    by_r = " · ".join(f"{html.escape(r)} {d}/{a}" for r, (d, a) in sorted(prog["by_reason"].items()))
    title = f"decided / all items, by variant and by reason; you decided {prog['mine_today']} item(s) today"
    return f'<span title="{title}"><b>item {min(done + 1, n) if n else 0} of {n}</b> · {by_v} · {by_r}</span>'


class ReviewDesk:
    """The panel with live views of the queue around it, refreshed after every verdict."""

    def __init__(self, queue: Any = None, reviewer: str | None = None, *, mode: str | None = None, cards: int = 3, lease_s: float = DEFAULT_LEASE_S):
        self.queue, self.n_cards, self.mode = queue, cards, mode
        self.overview = HtmlView()
        self.cards = HtmlView()
        self.panel = ReviewPanel(queue, reviewer, mode=mode, lease_s=lease_s, on_change=lambda _p: self.refresh())
        self.refresh()

    def refresh(self) -> None:
        """Redraw the overview and the open items from the queue as it is now."""
        rows = api.list_items(self.queue, status=None)
        s = api.stats(self.queue)
        head = f"<p><b>{s['items']} items</b>, {s['open']} open, {s['verdict_rows']} verdicts ({s['retractions']} undone)</p>"
        self.overview.html = head + view.counts_table(rows) + view.queue_table(rows)
        open_ids = [
            r["id"]
            for r in sorted(rows, key=lambda r: (-r["priority"], r["id"]))
            if r["verdict"] in (None, "unsure", "pending", "disputed") or r["waiver_expired"]
        ]
        shown = [api.show(i, self.queue) for i in open_ids[: self.n_cards]]
        blind = [is_blind(it, self.mode) for it in shown]
        self.cards.html = "".join(view.render_item(it, blind=b) for it, b in zip(shown, blind)) or '<p class="muted">no open item</p>'
