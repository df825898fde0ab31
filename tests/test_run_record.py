"""The typed run record: one to_dict/from_dict pair, the index's build settings apart from the
query's, a schema that matches what is sent, and old or odd records read with one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import BUILD_ONLY_SETTINGS, Config
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from pipeline import Backends, TreeRAG, run_pipeline
from tests.conftest import TEST_PAPER, run_cli
from utils.json_out import dumps
from utils.record_json import RecordError, to_json
from utils.run_record import KEY_ORDER, RECORD_VERSION, BuildSettings, RunRecord

Q = "What is AdaRouter's accuracy on EUR/USD?"


def _record(paper_index, question: str = Q) -> RunRecord:
    config = Config()
    return run_pipeline(question, paper_index, config, Backends(make_embedder("hash", config), None, None))


@pytest.mark.parametrize("question", [Q, "the of and?"])  # a full run, and the stop-word path
def test_the_record_round_trips_through_json(paper_index, question: str) -> None:
    record = _record(paper_index, question)
    text = dumps(record.to_dict(), ensure_ascii=False)
    back = RunRecord.from_dict(json.loads(text))
    assert back == record
    assert dumps(back.to_dict(), ensure_ascii=False) == text  # byte for byte
    assert list(record.to_dict()) == list(KEY_ORDER) and record.to_dict()["record_version"] == RECORD_VERSION


def test_the_record_is_typed_all_the_way_down(paper_index) -> None:
    record = _record(paper_index)
    hit = record.retrieve.hits[0]
    assert hit.rank == 1 and hit.citation.startswith("test_paper.md:L") and isinstance(hit.scores["fused_score"], float)
    assert record.context.passages and record.context.passages[0].citation
    assert record.answer.mode == "extractive" and record.answer.quotes[0].ranks
    assert record.answer.evidence is not None and record.answer.evidence.statistic
    assert record.locate.route is not None and record.locate.route.route == "detail"
    assert record.retrieve.stages.fusion and record.retrieve.stages.fusion[0].rank == 1
    assert record.usage.tokens == 0 and record.providers.llm.provider == "mock"


def test_the_schema_describes_what_is_sent(paper_index) -> None:
    jsonschema = pytest.importorskip("jsonschema")  # installed with mcp (requirements.txt)
    schema = RunRecord.json_schema()
    for question in (Q, "the of and?"):
        jsonschema.validate(json.loads(dumps(_record(paper_index, question).to_dict())), schema)
    bad = _record(paper_index).to_dict()
    bad["step2_retrieved"][0]["rank"] = "first"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


@pytest.fixture(scope="module")
def small_chunk_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test paper built with chunks of 120 (not the default 200) and two-level sections."""
    out = tmp_path_factory.mktemp("small") / "index"
    config = Config(chunk_size=120, chunk_overlap=30, max_depth=2)
    build_index(TEST_PAPER, out, config, make_embedder("hash", config))
    return out


def test_build_settings_come_from_the_index_not_the_querying_config(small_chunk_index: Path) -> None:
    rag = TreeRAG.open(small_chunk_index, llm="mock", env={})
    assert rag.config.chunk_size == 200  # the querying process has the default
    record = rag.run(Q)
    built = record.index.build_settings
    assert built is not None
    assert built.config["chunk_size"] == 120 and built.config["chunk_overlap"] == 30 and built.config["max_depth"] == 2
    assert built.embedder["name"] == "hash" and built.summarizer == "extractive" and built.folder_mode is False
    assert built.tokenizer
    # the query's settings are only the ones a query reads: no build-time value to mistake for the index's
    assert not set(record.config) & set(BUILD_ONLY_SETTINGS)
    assert record.config["final_top_k"] == 5 and record.config["locator"] == "auto"
    as_json = json.loads(run_cli("query", "--index", str(small_chunk_index), "--query", Q, "--json", "--no-log",
                                 "--mock").stdout)
    assert as_json["index"]["build_settings"]["config"]["chunk_size"] == 120
    assert "chunk_size" not in as_json["config"] and as_json["config"]["locator"] == "keyword"  # --mock's


def test_every_config_field_is_a_query_or_a_build_setting() -> None:
    fields = set(Config().to_dict())
    assert set(BUILD_ONLY_SETTINGS) <= fields  # a renamed field must not silently drop out of both
    assert fields - set(BUILD_ONLY_SETTINGS)  # and the query keeps its own
    # what only an index copy or update reads is build-only too (derived from the fields' metadata)
    assert {"store_vector_index", "store_copy_sessions", "delta_max_share", "delta_max_segments",
            "kg_llm_max_tokens", "chunk_units", "ann_min_rows"} <= set(BUILD_ONLY_SETTINGS)
    assert not {"final_top_k", "store_prewarm", "ann", "kg_channel", "context_leaf_share"} & set(BUILD_ONLY_SETTINGS)


def test_an_index_that_records_no_settings_says_none() -> None:
    assert BuildSettings.from_metadata({"counts": {}}, BUILD_ONLY_SETTINGS) is None
    old = BuildSettings.from_metadata({"config": {"chunk_size": 150, "final_top_k": 9}, "embedder": {"name": "onnx"}},
                                      BUILD_ONLY_SETTINGS)
    assert old is not None and old.config == {"chunk_size": 150} and old.embedder == {"name": "onnx"}
    assert old.tokenizer is None  # not recorded: left unknown, never defaulted


def test_a_first_version_record_reads_without_build_settings(paper_index) -> None:
    first = _record(paper_index).to_dict()
    del first["record_version"], first["graph"]
    first["config"] = {**Config().to_dict()}  # the first version kept the querying process's whole config
    record = RunRecord.from_dict(first)
    assert record.record_version == 1 and record.index.build_settings is None
    assert "chunk_size" not in record.config and record.config["final_top_k"] == 5


@pytest.mark.parametrize("data, message", [
    ({"run_id": "r", "created_at": "t", "query": "q", "record_version": RECORD_VERSION + 1}, "newer TreeRAG"),
    ({"run_id": "r", "created_at": "t", "query": "q", "record_version": "2"}, "not a version number"),
    ({"run_id": "r", "created_at": "t"}, "no 'query'"),
    ({"run_id": "r", "created_at": "t", "query": "q", "usage": {"calls": 1.5}}, "record.usage.calls is float"),
    ({"run_id": "r", "created_at": "t", "query": "q", "step1_nodes": [{"score": "high"}]}, "step1_nodes[0].score"),
    ("not a record", "JSON object"),
])
def test_a_record_that_is_not_one_is_a_one_line_error(data, message: str) -> None:
    with pytest.raises(RecordError) as excinfo:
        RunRecord.from_dict(data)
    assert message in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_unknown_keys_are_ignored_and_missing_ones_default() -> None:
    record = RunRecord.from_dict({"run_id": "r", "created_at": "t", "query": "q", "a_later_key": [1],
                                  "step2_retrieved": [{"rank": 1, "text": "x", "later": True}]})
    assert record.retrieve.hits[0].text == "x" and record.retrieve.hits[0].citation == ""
    assert record.answer.text == "" and record.retrieve.stages.fusion == []


def test_step_parts_are_the_record_keys(paper_index) -> None:
    parts: dict[str, dict] = {}
    config = Config()
    record = run_pipeline(Q, paper_index, config, Backends(make_embedder("hash", config), None, None),
                          on_step=lambda step, part: parts.setdefault(step, part))
    flat = record.to_dict()
    for step in ("step2", "context", "answer"):
        assert parts[step] == {k: flat[k] for k in parts[step]} and parts[step]
    assert parts["step1"]["step1_nodes"] == flat["step1_nodes"] == to_json(record.locate.nodes)
