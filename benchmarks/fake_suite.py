"""A kb_qa suite on the fake backend at any size (bench_scaling, child_bookkeeping): standalone, so a
child process can import it with another version of evalsuite on its path."""

from __future__ import annotations

from pathlib import Path

CASES = """schema_version: 1
defaults: {{scenario: kb_qa, kind: grounded, lang: en}}
documents:
  - {{id: d1, text: The VPN session lasts 12 hours and then asks for the token again.}}
cases:
{cases}
"""

SUITE = """schema_version: 1
name: scaling
casesets: [cases.yaml]
generation: {{max_new_tokens: 16, samples: {samples}, batch_size: 8, temperature: {temperature}}}
output_dir: out
cache: out/cache.sqlite
variants:
{variants}
"""


def suite_file(tmp: Path, cases: int, samples: int, variants: int) -> Path:
    lines = "\n".join(f"  - {{id: q{i:04d}, prompt: 'How long does session {i} last?', context: [d1], expect: {{citations: [d1], required_terms: [hours]}}}}" for i in range(cases))
    (tmp / "cases.yaml").write_text(CASES.format(cases=lines))
    vs = ["  - {name: base, baseline: true, backend: fake, options: {default: 'The session lasts 12 hours [d1].'}}"]
    for j in range(1, variants):
        vs.append(f"  - {{name: v{j}, backend: fake, model: m{j}, options: {{default: 'It lasts 12 hours [d1].'}}}}")
    p = tmp / "suite.yaml"
    p.write_text(SUITE.format(samples=samples, temperature=0.7 if samples > 1 else 0, variants="\n".join(vs)))
    return p
