"""``scripts/reporting/keys.py``: a saved row's key, the revisions it carries, the inputs it records."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_revised_names_carry_the_revision_and_the_shipped_checkpoint(tmp_path, monkeypatch, load_script):
    from gnplace.rl.zeroshot import PolicyPlacer

    keys = load_script("reporting.keys")
    assert keys.revised("single") == "single" and keys.revised("no_such_placer") == "no_such_placer"
    ckpt = tmp_path / "shipped.ckpt"
    ckpt.write_bytes(b"old weights")
    monkeypatch.setattr(PolicyPlacer, "default_checkpoint", ckpt)
    built = tmp_path / "construct.ckpt"
    built.write_bytes(b"old constructor")
    monkeypatch.setattr(PolicyPlacer, "default_files", {"constructor": built})
    first = keys.revised("policy")
    uses = r"\+uses expert@1,heft@1,m_etf@3,m_sct@3,metis@1"  # auto's candidates (policy samples around auto's placement) since 2026-12-04
    assert re.fullmatch(rf"policy@{PolicyPlacer.revision}\+[0-9a-f]{{8}}\+[0-9a-f]{{8}}{uses}", first)
    ckpt.write_bytes(b"new weights")
    assert keys.revised("policy") != first  # a new checkpoint: the report runs the policy's rows again
    second = keys.revised("policy")
    built.write_bytes(b"new constructor")
    assert keys.revised("policy") != second  # so does a new constructor


def test_report_keys_of_today_stand(load_script, monkeypatch, revisions_of_before):
    """auto's candidates are at today's revisions, exact at 5 and placeto at 1, finetune's policy as before: today's keys.

    2026-11-30: m_etf and m_sct revision 2 (the ETF fix) moved every key over auto; 2026-12-04: the memory repair's
    last resort (expert, heft, metis 1, m_etf and m_sct 3) did again, and exact's descent by the simulator and
    placeto's repair gave those two revision 1; 2026-12-06: exact's CP-SAT parameters gave it 2, its descent from auto
    3, its wide descent where nothing is proved 4 and its wall-clock net far past the deterministic limit 5. Without
    those revisions, no placer used or measured against declares one (finetune's policy as before) and the keys are those
    of before.
    """
    from gnplace.placers.exact import ExactPlacer
    from gnplace.rl.placeto import PlacetoPlacer
    from gnplace.rl.search import FineTunePlacer, PPOSearchPlacer
    from gnplace.rl.zeroshot import PolicyPlacer

    keys = load_script("reporting.keys")
    assert keys.revised("ppo") == f"ppo@{PPOSearchPlacer.revision}+uses expert@1,heft@1,m_etf@3,m_sct@3,metis@1"
    assert keys.revised("finetune").startswith(f"finetune@{FineTunePlacer.revision}+")
    assert keys.revised("finetune").endswith("+uses expert@1,heft@1,m_etf@3,m_sct@3,metis@1,policy@13")
    policy = keys.revised("policy")
    assert policy.endswith("+uses expert@1,heft@1,m_etf@3,m_sct@3,metis@1")
    graph = str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg")
    against = "|against expert@1,heft@1,m_etf@3,m_sct@3,metis@1"
    assert keys.learned_key(graph, "k80x4", "rnn_pg", 64) == f"ptb_002|k80x4|{keys.revised('rnn_pg')}|64{against}"
    assert keys.placeto_zero_shot_key(graph, "k80x4", 400) == f"ptb_002|k80x4|placeto_zs@1|400{against}"
    assert keys.exact_key(graph, 12, "k80x2", 20.0) == f"ptb_002@12|k80x2|20.0|{policy}|against exact@6,expert@1,heft@1,m_etf@3,m_sct@3,metis@1"
    revisions_of_before()  # as before 2026-11-30
    monkeypatch.setattr(ExactPlacer, "revision", "")
    monkeypatch.setattr(PlacetoPlacer, "revision", "")
    monkeypatch.setattr(PolicyPlacer, "revision", "12")
    monkeypatch.setattr(FineTunePlacer, "uses", ("auto", "policy"))  # not pinned before 2026-11-30
    assert keys.revised("ppo") == f"ppo@{PPOSearchPlacer.revision}" and "uses" not in keys.revised("finetune")
    assert keys.revised("finetune").startswith(f"finetune@{FineTunePlacer.revision}+")
    assert keys.learned_key(graph, "k80x4", "rnn_pg", 64) == f"ptb_002|k80x4|{keys.revised('rnn_pg')}|64"
    assert keys.placeto_zero_shot_key(graph, "k80x4", 400) == "ptb_002|k80x4|placeto_zs|400"
    assert keys.exact_key(graph, 12, "k80x2", 20.0) == f"ptb_002@12|k80x2|20.0|{keys.revised('policy')}"


def test_a_new_revision_of_a_placer_used_or_measured_against_changes_the_keys(load_script, monkeypatch):
    """m_etf's new revision changes auto: ppo (which starts from it) and every step over auto's run again."""
    from gnplace.placers.exact import ExactPlacer
    from gnplace.placers.m_etf import METFPlacer
    from gnplace.rl.placeto import PlacetoPlacer
    from gnplace.rl.search import FineTunePlacer
    from gnplace.rl.zeroshot import PolicyPlacer

    keys = load_script("reporting.keys")
    graph = str(ROOT / "datasets" / "ptb" / "ptb_002.gnpg")
    before = {"ppo": keys.revised("ppo"), "finetune": keys.revised("finetune"),
              "rnn_pg": keys.learned_key(graph, "k80x4", "rnn_pg", 64),
              "placeto_zs": keys.placeto_zero_shot_key(graph, "k80x4", 400),
              "exact": keys.exact_key(graph, 12, "k80x2", 20.0)}
    monkeypatch.setattr(METFPlacer, "revision", "4")  # the next one (3 since 2026-12-04)
    revised = {"ppo": keys.revised("ppo"), "finetune": keys.revised("finetune"),
               "rnn_pg": keys.learned_key(graph, "k80x4", "rnn_pg", 64),  # over auto's
               "placeto_zs": keys.placeto_zero_shot_key(graph, "k80x4", 400)}
    for name, key in revised.items():  # "+uses ...,m_etf@3,..." and "|against ...,m_etf@3,..." of today: m_etf@4
        assert key == before[name].replace("m_etf@3", "m_etf@4") != before[name], name
    assert keys.exact_key(graph, 12, "k80x2", 20.0) != before["exact"]
    monkeypatch.undo()
    monkeypatch.setattr(PolicyPlacer, "revision", "99")  # finetune pins the revision of its zero-shot candidates
    assert keys.revised("finetune") == before["finetune"]
    monkeypatch.setattr(FineTunePlacer, "uses", ("auto", "policy@98"))  # their next one
    assert keys.revised("finetune") == before["finetune"].replace("policy@13", "policy@98") != before["finetune"]
    monkeypatch.setattr(ExactPlacer, "revision", "6", raising=False)  # its next one (5 since 2026-12-06)
    assert keys.exact_key(graph, 12, "k80x2", 20.0).endswith("|against exact@6,expert@1,heft@1,m_etf@3,m_sct@3,metis@1")  # and auto's
    monkeypatch.setattr(PlacetoPlacer, "revision", "2", raising=False)
    assert "|placeto_zs@2|" in keys.placeto_zero_shot_key(graph, "k80x4", 400)


def test_rows_of_the_other_learned_placers_stand_as_before_beside_the_train_split(tmp_path, load_script):
    """They record no train split (None in their tasks): a row that recorded :data:`IDENTITY` alone still stands."""
    common = load_script("benchmarks.common")
    store = common.Store(tmp_path / "learned.jsonl")
    identity = {"graph_sha256": "abc", "cluster_fingerprint": "def"}
    store.add({"key": "g|k80x4|rnn_pg|64", **identity, "vs_auto": 0.9})
    assert store.saved("g|k80x4|rnn_pg|64", {**identity, "placeto_train_sha256": None}) is not None
    assert store.saved("g|k80x4|rnn_pg|64", {**identity, "placeto_train_sha256": "0123"}) is None
