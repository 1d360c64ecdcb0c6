"""`evalsuite init`: write a commented suite file for your own model (evalsuite.run.scaffold)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from ._app import ExitCode, app, console, err, guarded


@app.command("init")
@guarded()
def init(
    model: str = typer.Option(..., "--model", help="the baseline: a hub id (Qwen/Qwen2.5-7B-Instruct), a model directory, or 'embedded'"),
    revision: str | None = typer.Option(None, "--revision", help="the baseline's hub revision: a branch, tag or commit (default: main)"),
    variants: str = typer.Option(
        "bnb-int8,bnb-nf4,speculative:prompt-lookup",
        "--variants",
        help="comma-separated variant kinds: gptq, awq, bnb-int8, bnb-nf4, compressed-tensors:ID[@REV], llm-compressor:SCHEME, "
        "torchao-int8, torchao:SCHEME, hqq[:BITS], speculative:prompt-lookup, speculative:draft:ID, served:URL, gptq:ID, awq:ID",
    ),
    out: Path = typer.Option(Path("suites/mine.yaml"), "--out", help="the suite file to write"),
    casesets: Path = typer.Option(Path("casesets"), "--casesets", help="the case sets the suite runs"),
    rubric: Path = typer.Option(Path("rubrics/default.yaml"), "--rubric", help="the gate's rubric"),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when available), cuda or cpu"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing suite file"),
    shipped: bool = typer.Option(
        False, "--shipped", help="refer to the case sets and rubric shipped with evalsuite (shipped:NAME) instead of copying them into the project"
    ),
) -> None:
    """Write a commented suite for your model: baseline, a noise rerun, one variant per kind, stage and rubric."""
    from ..errors import EvalsuiteError
    from ..run.scaffold import InitRequest, scaffold, write_starter

    if out.exists() and not force:
        raise EvalsuiteError(f"{out} exists: pass --force to overwrite it, or --out another file")
    req = InitRequest(
        model=model,
        revision=revision,
        variants=tuple(v.strip() for v in variants.split(",")),
        out=out,
        casesets=casesets,
        rubric=rubric,
        device=device,
        shipped=shipped,
    )
    res = scaffold(req)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(res.text, encoding="utf-8")
    copied = write_starter(req)
    console.print(f"wrote {escape(str(out))}: baseline, baseline-rerun and {len(req.variants)} variant(s)", highlight=False)
    if copied:
        sets = sum(1 for p in copied if p.suffix in (".yaml", ".yml") and p != rubric)
        console.print(
            f"copied the starter case sets into {escape(str(casesets))}/ ({sets} files) and the default rubric to {escape(str(rubric))}: yours to edit",
            highlight=False,
        )
    for r in res.resolutions:
        mark = "[green]ok[/green]" if r["ok"] else "[red]missing[/red]"
        where = f"{r['where']}" + (f" @ {r['commit'][:12]}" if r.get("commit") else "")
        console.print(f"  {mark} {escape(r['variant'])}: {escape(r['field'])} {escape(r['name'])} ({where})", highlight=False)
    for w in res.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False, soft_wrap=True)
    console.print("next:")
    for c in res.next_commands:
        console.print(f"  {escape(c)}", highlight=False)
    raise typer.Exit(int(ExitCode.OK))
