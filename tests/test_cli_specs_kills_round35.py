"""Mutation survivors (round 35) of draftsmith.cli.specs: where the registry cannot say whether a spec's attention
backend builds anywhere (it raises), validate still asks this machine (machine_problems says, or passes over, it)."""
import draftsmith
import draftsmith.registry
from draftsmith.cli.specs import _refusable


class Raising:
    def get(self, kind, name):
        raise RuntimeError(f"{kind} {name}: a plugin's registry failed")


# catches specs.py _refusable: except ...: return True -> return False
def test_a_backend_the_registry_cannot_look_up_is_asked_about(monkeypatch):
    spec = draftsmith.load_spec("eagle3-llama").with_decoding(graphs="off", attention="sdpa")
    assert not _refusable(spec)
    monkeypatch.setattr(draftsmith.registry, "default_registry", Raising)
    assert _refusable(spec)
