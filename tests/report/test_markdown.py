"""report.md: the short summary for a CI job or a pull request."""

from __future__ import annotations


def test_markdown_summary(report):
    md = report.markdown.read_text("utf-8")
    lines = md.splitlines()
    assert lines[0] == "## evalsuite: ❌ **REGRESSION**"
    assert "| variant | verdict | brand | code | kb_qa | run-level |" in lines
    row = next(ln for ln in lines if ln.startswith("| `nocite`"))
    assert "❌ regression" in row and "❌ FAIL (kb-citations)" in row
    rule = next(ln for ln in lines if "**kb-citations**" in ln)
    viol = next(v for v in report.data.verdict.violations if v.rule == "kb-citations")
    assert rule.startswith("- ❌") and "; top cases " + ", ".join(f"`{c}`" for c in viol.cases[:3]) in rule
    assert any(ln.startswith("- ⚠️ **code-tests**") for ln in lines)
    assert any(ln.startswith("| variant | engine | weights / decoding |") for ln in lines), "the engine and the variant matrix in words, per variant"
    perf = [ln for ln in lines if ln.startswith("| `") and ln.count("|") == 14]  # 13 columns (compile s: issue 42)
    assert {ln.split("`")[1] for ln in perf} == {"baseline", "rerun", "clean", "nocite", "badjson", "badcode"}
    assert str(report.html) in md and "<" not in md.replace("<script", "")  # no HTML in the summary
    assert len(lines) < 40
