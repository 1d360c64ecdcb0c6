"""One table of fault kinds: each entry names its probe, classifier, options and report words."""

from __future__ import annotations

import importlib

from evalsuite.cases.fault_options import FAULT_KINDS, FAULTS, FaultSettings
from evalsuite.report.faults import FAULT_TITLES
from evalsuite.run import fault_probes


def _resolve(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def test_every_fault_kind_is_one_entry_with_a_probe_a_classifier_options_and_words():
    assert FAULT_KINDS == tuple(f.name for f in FAULTS) and len(set(FAULT_KINDS)) == len(FAULTS)
    settings = set(FaultSettings.__dataclass_fields__)
    for f in FAULTS:
        assert callable(_resolve(f.probe)) and callable(_resolve(f.classifier)), f.name
        assert set(f.options) <= settings and f.title, f.name
        assert fault_probes.PROBES[f.name] is _resolve(f.probe) and FAULT_TITLES[f.name] == f.title


def test_a_load_failure_is_classified_from_the_servers_typed_start_error(monkeypatch, tmp_path):
    from evalsuite.backends import http_serve
    from evalsuite.states import FAILED, REJECTED_AS_DESIGNED

    class Broken(http_serve.LocalServer):
        hung = False

        def start(self):
            raise http_serve.ServerStartError("did not come up (words the probe does not read)", hung=self.hung, log_tail="Traceback\nValueError: no architecture")

    class Served:
        def served_weights(self):
            return tmp_path / "model.gguf"

        def server_like_its_own(self, weights, timeout_s):
            return Broken("transformers", weights, startup_timeout_s=timeout_s)

    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    monkeypatch.setattr(fault_probes, "_served", lambda ctx: Served())
    ctx = type("Ctx", (), {"settings": FaultSettings(timeout_s=5), "scratch": tmp_path / "scratch", "variant": None})()
    (outcome, evidence), _ = fault_probes.probe_load_failure(ctx)
    assert outcome == REJECTED_AS_DESIGNED and "ValueError: no architecture" in evidence
    Broken.hung = True
    (outcome, evidence), _ = fault_probes.probe_load_failure(ctx)
    assert outcome == FAILED and "neither came up nor exited" in evidence
