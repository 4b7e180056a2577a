"""``flowloom datasets``: create, list, show, rm, add (with and without --wait, a bad file
in the batch, a failed ingestion, retried by adding it again), reindex, the messages and
help texts, search in each mode, on the embedded default (SQLite
under FLOWLOOM_HOME, ingestion in the CLI process, embeddings from the scripted server);
and ``flowloom serve``'s warning on a PostgreSQL without pgvector."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app
from engine.settings import get_settings
from tests.support.cli import serve_banner
from tests.support.knowledge_files import EMBEDDING_MODEL, corpus, knowledge_models
from tests.support.openai_server import http_error

runner = CliRunner()
KEY_ENV = "FLOWLOOM_CLI_TEST_EMBED_KEY"


@pytest.fixture
def scripted_models(tmp_path, openai_server, monkeypatch) -> Any:
    """FLOWLOOM_MODELS: a registry whose embedding model is the scripted server's."""
    monkeypatch.setenv(KEY_ENV, "sk-scripted")
    path = knowledge_models(tmp_path / "models.toml", openai_server.base_url, KEY_ENV)
    monkeypatch.setenv("FLOWLOOM_MODELS", str(path))
    get_settings.cache_clear()
    return openai_server


def invoke(*args: str) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def files(tmp_path: Path, names: dict[str, bytes]) -> list[Path]:
    folder = tmp_path / "docs"
    folder.mkdir(exist_ok=True)
    paths = []
    for name, data in names.items():
        (folder / name).write_bytes(data)
        paths.append(folder / name)
    return paths


def create(*extra: str) -> str:
    result = invoke("datasets", "create", "Notes", *extra)
    assert result.exit_code == 0, result.output + result.stderr
    return result.stdout.strip()


def test_create_list_show_and_remove(scripted_models):
    made = invoke("datasets", "create", "Handbook", "--id", "handbook", "--embedding-model", EMBEDDING_MODEL,
                  "--chunk-tokens", "256", "--overlap", "16", "--description", "staff rules", "--json")
    assert made.exit_code == 0, made.stderr
    dataset = json.loads(made.stdout)
    assert dataset["id"] == "handbook" and dataset["chunking"]["chunk_tokens"] == 256
    assert dataset["chunking"]["overlap_tokens"] == 16 and dataset["embedding_model"] == EMBEDDING_MODEL
    listed = invoke("datasets", "list")
    assert listed.exit_code == 0 and "handbook" in listed.stdout and EMBEDDING_MODEL in listed.stdout
    shown = invoke("datasets", "show", "handbook")
    assert shown.exit_code == 0 and "256 tokens, overlap 16" in shown.stdout and "staff rules" in shown.stdout
    taken = invoke("datasets", "create", "Again", "--id", "handbook")
    assert taken.exit_code == 2 and "handbook" in taken.stderr and "Traceback" not in taken.output
    assert invoke("datasets", "rm", "handbook").exit_code == 0
    for command in (("show", "handbook"), ("rm", "handbook"), ("search", "handbook", "x")):
        gone = invoke("datasets", *command)
        assert gone.exit_code == 2 and "handbook" in gone.stderr, command
    assert json.loads(invoke("datasets", "list", "--json").stdout) == []


def test_rm_deletes_documents_by_id_or_file_name_and_asks_before_deleting_a_full_dataset(scripted_models, tmp_path,
                                                                                        monkeypatch):
    import api.cli.datasets as datasets_cli

    create("--id", "handbook")
    paths = files(tmp_path, {"a.txt": b"alpha", "b.txt": b"beta", "c.txt": b"gamma"})
    assert invoke("datasets", "add", "handbook", *paths).exit_code == 0
    shown = json.loads(invoke("datasets", "show", "handbook", "--json").stdout)
    b_id = next(d["id"] for d in shown["documents"] if d["source_name"] == "b.txt")
    typo = invoke("datasets", "rm", "handbook", "--document", "a.txt", "--document", "c.tx")
    assert typo.exit_code == 2 and "document 'c.tx' not found in dataset 'handbook'; did you mean 'c.txt'?" in typo.stderr
    assert "flowloom datasets list" not in typo.stderr
    assert json.loads(invoke("datasets", "show", "handbook", "--json").stdout)["document_count"] == 3, "none deleted"
    removed = invoke("datasets", "rm", "handbook", "-d", "a.txt", "-d", b_id)
    assert removed.exit_code == 0, removed.output
    assert "deleted a.txt" in removed.stderr and "deleted b.txt" in removed.stderr
    assert "dataset handbook now holds 1 document(s)" in removed.stdout
    monkeypatch.setattr(datasets_cli, "_stdin_is_terminal", lambda: True)
    declined = runner.invoke(app, ["datasets", "rm", "handbook"], input="n\n")
    assert declined.exit_code == 2 and "with its 1 document(s)?" in declined.stderr
    assert "nothing was deleted" in declined.stderr and invoke("datasets", "show", "handbook").exit_code == 0
    confirmed = runner.invoke(app, ["datasets", "rm", "handbook"], input="y\n")
    assert confirmed.exit_code == 0 and invoke("datasets", "show", "handbook").exit_code == 2
    create("--id", "empty")
    assert invoke("datasets", "rm", "empty").exit_code == 0, "an empty dataset is not asked about"
    create("--id", "again")
    assert invoke("datasets", "add", "again", *paths[:1]).exit_code == 0
    assert invoke("datasets", "rm", "again", "--yes").exit_code == 0


def test_search_takes_the_api_s_ranking_options(scripted_models, tmp_path):
    create("--id", "handbook")
    [doc] = files(tmp_path, {"rules.md": b"Every employee has 28 days of paid holiday a year.\n\nLaptops are replaced."})
    assert invoke("datasets", "add", "handbook", str(doc), "--wait").exit_code == 0
    found = invoke("datasets", "search", "handbook", "paid holiday", "--mode", "full_text", "--fusion", "weighted",
                   "--json")
    assert found.exit_code == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["text"].startswith("Every employee")
    wrong = invoke("datasets", "search", "handbook", "x", "--fusion", "nope")
    assert wrong.exit_code == 2 and "fusion: must be 'rrf' or 'weighted'" in wrong.stderr
    unknown = invoke("datasets", "search", "handbook", "x", "--mode", "full_text", "--rerank-model", "nosuch")
    assert unknown.exit_code == 2 and "--rerank-model: unknown model 'nosuch'" in unknown.stderr


def test_add_with_a_refused_file_still_says_what_the_dataset_now_holds(scripted_models, tmp_path):
    dataset = create()
    result = invoke("datasets", "add", dataset, *files(tmp_path, {"a.txt": b"alpha", "empty.txt": b""}))
    assert result.exit_code == 2, result.output
    assert "empty.txt" in result.stderr
    assert f"1 added, 1 refused: dataset {dataset} now holds 1 document(s)" in result.stdout, result.output


def test_a_re_added_file_whose_ingestion_was_left_unfinished_is_said_to_continue():
    from types import SimpleNamespace

    from api.cli.datasets_add import _outcome_line, _tally

    def outcome(status: str) -> Any:
        document = SimpleNamespace(id="d1", dataset_id="ds", status=status, chunk_count=3, error=None)
        return SimpleNamespace(error=None, created=False, source_name="big.md", document=document)

    left, done = outcome("embedding"), outcome("ready")
    ready = SimpleNamespace(id="d1", dataset_id="ds", status="ready", chunk_count=3, error=None)
    line, state = _outcome_line(left, {"d1": ready}, queued=False, followed=True)
    assert state == "ok" and "continued (its ingestion had not finished): 3 chunks" in line.plain
    assert "unchanged" in _outcome_line(done, {}, queued=False, followed=True)[0].plain
    assert _tally([left, done]) == "1 continued, 1 unchanged"


def test_search_takes_the_quote_budget_that_cuts_its_hits(scripted_models, tmp_path):
    create("--id", "handbook", "--chunk-tokens", "64", "--overlap", "0")
    text = "\n\n".join(f"Holiday rule {i}: " + "paid holiday days are counted per year. " * 8 for i in range(6))
    [doc] = files(tmp_path, {"rules.md": text.encode()})
    assert invoke("datasets", "add", "handbook", str(doc), "--wait").exit_code == 0

    def hits(*budget: str) -> tuple[int, str]:
        found = invoke("datasets", "search", "handbook", "paid holiday", "--mode", "full_text", "--top-k", "6",
                       *budget, "--json")
        assert found.exit_code == 0, found.stderr
        answer = json.loads(found.stdout)
        return len(answer["hits"]), " ".join(answer["notes"])

    few, note = hits("--max-quote-tokens", "100")
    assert few < 6 and "left out by max_quote_tokens (100)" in note
    assert hits("--max-quote-tokens", "0") == (6, "")  # no budget: every one of --top-k


def test_search_of_several_datasets_merges_their_hits_and_names_each_hit_s_dataset(scripted_models, tmp_path):
    create("--id", "faq")
    create("--id", "rules")
    faq, rules = files(tmp_path, {"faq.md": b"The warranty lasts two years.", "rules.md": b"Holiday: 28 paid days."})
    assert invoke("datasets", "add", "faq", str(faq), "--wait").exit_code == 0
    assert invoke("datasets", "add", "rules", str(rules), "--wait").exit_code == 0
    both = invoke("datasets", "search", "faq,rules", "warranty holiday", "--mode", "full_text")
    assert both.exit_code == 0, both.stderr
    assert "faq: faq.md #0" in both.stdout and "rules: rules.md #0" in both.stdout
    missing = invoke("datasets", "search", "rules,nope", "x")
    assert missing.exit_code == 2 and "dataset 'nope' not found" in missing.stderr
    assert "did you mean" not in missing.stderr, "'nope' is close to no dataset id (the list 'rules,nope' is)"
    typo = invoke("datasets", "search", "faq, rulez", "x")
    assert typo.exit_code == 2 and "dataset 'rulez' not found; did you mean 'rules'?" in typo.stderr


def test_a_mistyped_dataset_or_a_folder_is_answered_with_what_to_type(scripted_models, tmp_path):
    create("--id", "handbook")
    typo = invoke("datasets", "search", "handbok", "holiday")
    assert typo.exit_code == 2 and "did you mean 'handbook'?" in typo.stderr
    elsewhere = invoke("datasets", "show", "handbook", "--tenant", "acme")
    assert elsewhere.exit_code == 2 and "flowloom datasets list --tenant acme" in elsewhere.stderr
    folder = tmp_path / "docs"
    folder.mkdir()
    given = invoke("datasets", "add", "handbook", str(folder))
    assert given.exit_code == 2 and f"a folder: give its files (e.g. {folder}/*)" in given.stderr


def test_create_warns_when_the_embedding_models_key_is_not_set(scripted_models, monkeypatch):
    made = invoke("datasets", "create", "Keyed", "--id", "keyed", "--embedding-model", EMBEDDING_MODEL)
    assert made.exit_code == 0 and "warning" not in made.stderr, made.stderr
    monkeypatch.delenv(KEY_ENV)
    get_settings.cache_clear()
    made = invoke("datasets", "create", "Unkeyed", "--id", "unkeyed", "--embedding-model", EMBEDDING_MODEL)
    assert made.exit_code == 0 and made.stdout.strip() == "unkeyed", made.output
    warning = " ".join(made.stderr.split())
    assert f"needs an API key in {KEY_ENV}" in warning and "flowloom datasets reindex unkeyed --failed" in warning
    assert "warning" not in invoke("datasets", "create", "Plain", "--id", "plain").stderr


def test_an_id_that_is_a_name_is_told_the_form_in_words_and_a_name_taken_is_warned(scripted_models):
    named = invoke("datasets", "create", "My KB", "--id", "My KB")
    assert named.exit_code == 2 and "pattern" not in named.stderr, named.stderr
    assert "use only letters, digits, '_', '.' and '-' (no spaces); e.g. 'my-kb'" in " ".join(named.stderr.split())
    first = invoke("datasets", "create", "Office", "--id", "office")
    assert first.exit_code == 0 and "warning" not in first.stderr
    second = invoke("datasets", "create", "office ", "--id", "office-2")
    assert second.exit_code == 0 and second.stdout.strip() == "office-2"
    assert "warning: another dataset of this tenant is named 'office ' too (office)" in " ".join(second.stderr.split())


def test_bad_settings_and_unknown_models_exit_2_naming_the_field(scripted_models):
    overlap = invoke("datasets", "create", "x", "--chunk-tokens", "64", "--overlap", "64")
    assert overlap.exit_code == 2 and "overlap_tokens" in overlap.stderr
    chat = invoke("datasets", "create", "x", "--embedding-model", "default")
    assert chat.exit_code == 2 and "embedding_model" in chat.stderr and "Traceback" not in chat.output
    mode = invoke("datasets", "search", "any", "q", "--mode", "fuzzy")
    assert mode.exit_code == 2 and "mode" in mode.stderr
    for nothing in ("", "  "):  # as the API's 422
        empty = invoke("datasets", "search", "any", nothing)
        assert empty.exit_code == 2 and "query: required" in empty.stderr, empty.output


def test_add_with_wait_ingests_the_good_files_and_reports_each_bad_one(scripted_models, tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWLOOM_KNOWLEDGE_MAX_DOCUMENT_BYTES", str(64 * 1024))
    get_settings.cache_clear()
    dataset = create("--embedding-model", EMBEDDING_MODEL)
    paths = files(tmp_path, {**corpus(), "fake.pdf": b"plain text, not a PDF", "big.txt": b"word " * 20_000})
    result = invoke("datasets", "add", dataset, *paths, tmp_path / "missing.txt", "--wait")
    assert result.exit_code == 2, result.output + result.stderr
    assert "fake.pdf" in result.stderr and "type_mismatch" in result.stderr
    assert "missing.txt" in result.stderr and "cannot read it" in result.stderr
    assert "big.txt" in result.stderr and "too large: 100000 bytes, the limit is 65536" in result.stderr
    for name in corpus():
        assert name in result.stderr
    shown = json.loads(invoke("datasets", "show", dataset, "--json").stdout)
    assert {d["source_name"]: d["status"] for d in shown["documents"]} == {name: "ready" for name in corpus()}
    assert all(d["chunks_done"] == d["chunk_count"] > 0 for d in shown["documents"])
    table = invoke("datasets", "show", dataset)
    assert "rockets.txt" in table.stdout and "ready" in table.stdout


def test_add_without_wait_on_the_embedded_default_ingests_before_it_returns(scripted_models, tmp_path):
    dataset = create("--embedding-model", EMBEDDING_MODEL)
    result = invoke("datasets", "add", dataset, *files(tmp_path, {"tea.md": corpus()["tea.md"]}), "--json")
    assert result.exit_code == 0, result.stderr
    (item,) = json.loads(result.stdout)["documents"]
    assert item["outcome"] == "created" and item["document"]["status"] == "ready"
    again = invoke("datasets", "add", dataset, *files(tmp_path, {"tea.md": corpus()["tea.md"]}), "--json")
    assert json.loads(again.stdout)["documents"][0]["outcome"] == "unchanged"


def test_add_says_what_it_did_and_how_many_documents_the_dataset_now_holds(scripted_models, tmp_path):
    dataset = create()
    first = invoke("datasets", "add", dataset, *files(tmp_path, {"a.txt": b"alpha", "b.txt": b"beta"}))
    assert f"2 added: dataset {dataset} now holds 2 document(s)" in first.stdout, first.output
    paths = files(tmp_path, {"a.txt": b"alpha", "b.txt": b"beta, edited", "c.txt": b"gamma"})
    again = invoke("datasets", "add", dataset, *paths)
    assert again.exit_code == 0, again.output
    assert f"1 added, 1 changed, 1 unchanged: dataset {dataset} now holds 3 document(s)" in again.stdout
    assert "b.txt" in again.stderr and "changed: 1 chunk" in again.stderr


def test_a_failed_ingestion_exits_1_with_its_reason(scripted_models, tmp_path):
    dataset = create("--embedding-model", EMBEDDING_MODEL)
    scripted_models.script_embeddings(http_error(400, "input too long for this model"))
    result = invoke("datasets", "add", dataset, *files(tmp_path, {"rockets.txt": corpus()["rockets.txt"]}))
    assert result.exit_code == 1, result.output + result.stderr
    assert "rockets.txt" in result.stderr and "ingestion failed" in result.stderr
    assert "search with" not in result.stdout, "a document that failed is not there to search"
    shown = json.loads(invoke("datasets", "show", dataset, "--json").stdout)
    assert shown["documents"][0]["status"] == "failed" and shown["documents"][0]["error"]


def test_adding_a_failed_file_again_retries_it_once_the_cause_is_fixed(scripted_models, tmp_path):
    dataset = create("--embedding-model", EMBEDDING_MODEL)
    scripted_models.script_embeddings(http_error(400, "no such key"))
    paths = files(tmp_path, {"rockets.txt": corpus()["rockets.txt"]})
    assert invoke("datasets", "add", dataset, *paths).exit_code == 1
    again = invoke("datasets", "add", dataset, *paths, "--wait")
    assert again.exit_code == 0, again.output + again.stderr
    assert "retried" in again.stderr and "ingestion failed" not in again.stderr
    shown = json.loads(invoke("datasets", "show", dataset, "--json").stdout)
    assert [(d["status"], d["error"]) for d in shown["documents"]] == [("ready", None)]
    unchanged = invoke("datasets", "add", dataset, *paths, "--json")
    assert json.loads(unchanged.stdout)["documents"][0]["outcome"] == "unchanged"


def test_reindex_ingests_again_the_failed_documents_or_the_ones_named(scripted_models, tmp_path):
    dataset = create("--embedding-model", EMBEDDING_MODEL)
    assert invoke("datasets", "add", dataset, *files(tmp_path, {"tea.md": corpus()["tea.md"]})).exit_code == 0
    scripted_models.script_embeddings(http_error(400, "no such key"))
    rockets = files(tmp_path, {"rockets.txt": corpus()["rockets.txt"]})
    assert invoke("datasets", "add", dataset, *rockets).exit_code == 1
    shown = json.loads(invoke("datasets", "show", dataset, "--json").stdout)
    documents = {d["source_name"]: d for d in shown["documents"]}
    assert documents["rockets.txt"]["status"] == "failed"
    result = invoke("datasets", "reindex", dataset, "--failed", "--wait", "--json")
    assert result.exit_code == 0, result.output + result.stderr
    ended = json.loads(result.stdout)["documents"]
    assert [(d["source_name"], d["status"]) for d in ended] == [("rockets.txt", "ready")]
    none = invoke("datasets", "reindex", dataset, "--failed")
    assert none.exit_code == 0 and "none failed" in none.stderr
    named = invoke("datasets", "reindex", dataset, documents["tea.md"]["id"])
    assert named.exit_code == 0 and "tea.md" in named.stderr and "rockets.txt" not in named.stderr
    scripted_models.script_embeddings(http_error(400, "no such key"))
    everything = invoke("datasets", "reindex", dataset, "--wait")  # unchanged chunks keep their vectors
    assert everything.exit_code == 0 and "tea.md" in everything.stderr and "rockets.txt" in everything.stderr
    unknown = invoke("datasets", "reindex", dataset, "no-such-document")
    assert unknown.exit_code == 2 and "no-such-document" in unknown.stderr
    assert invoke("datasets", "reindex", "no-such-dataset").exit_code == 2


def test_messages_name_a_file_once_count_chunks_in_words_and_help_shows_plain_metavars(scripted_models, tmp_path):
    dataset = create()
    paths = files(tmp_path, {"fake.pdf": b"plain text, not a PDF", "x.xlsx": b"cells", "one.txt": b"a short note"})
    result = invoke("datasets", "add", dataset, *paths)
    assert result.exit_code == 2
    assert "fake.pdf: fake.pdf" not in result.stderr and "x.xlsx: x.xlsx" not in result.stderr
    assert "fake.pdf" in result.stderr and "x.xlsx" in result.stderr and "unsupported file type" in result.stderr
    assert "1 chunk\n" in result.stderr.replace(" \n", "\n") and "1 chunks" not in result.stderr
    for command in ("add", "reindex", "search", "show", "create"):
        text = invoke("datasets", command, "--help").stdout
        assert "{dataset_id}" not in text and "{name}" not in text and "module's notes" not in text
    add_help = invoke("datasets", "add", "--help").stdout
    assert "{ID} {FILE}..." in add_help and "ingestion failed: it is ingested again" in " ".join(add_help.split())
    assert "[DOC_ID]..." in invoke("datasets", "reindex", "--help").stdout


@pytest.mark.parametrize("mode", ["semantic", "full_text", "hybrid"])
def test_search_in_each_mode(scripted_models, tmp_path, mode):
    dataset = create("--embedding-model", EMBEDDING_MODEL)
    assert invoke("datasets", "add", dataset, *files(tmp_path, corpus())).exit_code == 0
    result = invoke("datasets", "search", dataset, "suspension bridge cables", "--mode", mode, "--top-k", "2",
                    "--json")
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["mode"] == mode and 1 <= len(found["hits"]) <= 2
    assert found["hits"][0]["source_name"] == "bridges.pdf"
    text = invoke("datasets", "search", dataset, "rocket kerosene", "--mode", mode)
    assert text.exit_code == 0 and text.stdout.startswith("1. ") and "rockets.txt" in text.stdout


@pytest.mark.slow
def test_serve_warns_when_postgresql_has_no_pgvector(make_postgres_database, tmp_path):
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home"), "FLOWLOOM_DATABASE_URL": make_postgres_database()}
    banner = serve_banner(env, "pgvector", "--no-login-url", "--no-examples")
    assert "no 'vector' extension" in banner and "full-text" in banner


def test_validate_warns_about_a_searched_dataset_that_does_not_exist_yet(scripted_models):
    flow = Path(__file__).resolve().parents[2] / "examples" / "knowledge_qa.json"
    before = invoke("validate", flow, "--json")
    assert before.exit_code == 0, before.output
    [problem] = [p for p in json.loads(before.stdout) if p["code"] == "unknown_dataset"]
    assert (problem["node_id"], problem["path"], problem["severity"]) == ("search", "config.datasets[0]", "warning")
    assert "flowloom datasets create NAME --id handbook" in problem["message"]
    assert invoke("datasets", "create", "Handbook", "--id", "handbook").exit_code == 0
    after = invoke("validate", flow, "--json")
    assert after.exit_code == 0 and [p for p in json.loads(after.stdout) if p["code"] == "unknown_dataset"] == []


def test_validate_warns_about_a_semantic_search_of_a_dataset_without_an_embedding_model(scripted_models, tmp_path):
    flow = json.loads((Path(__file__).resolve().parents[2] / "examples" / "knowledge_qa.json").read_text())
    search = next(n for n in flow["nodes"] if n["type"] == "knowledge_retrieval")
    search["config"]["mode"] = "semantic"
    path = tmp_path / "semantic.json"
    path.write_text(json.dumps(flow))
    assert invoke("datasets", "create", "Handbook", "--id", "handbook").exit_code == 0  # full text only
    checked = invoke("validate", path, "--json")
    assert checked.exit_code == 0, checked.output
    [problem] = [p for p in json.loads(checked.stdout) if p["code"] == "retrieval_degraded"]
    assert (problem["node_id"], problem["path"], problem["severity"]) == (search["id"], "config.mode", "warning")
    assert "dataset 'handbook' has no embedding model" in problem["message"] and "'full_text'" in problem["message"]
    assert invoke("datasets", "rm", "handbook").exit_code == 0
    create("--id", "handbook", "--embedding-model", EMBEDDING_MODEL)
    after = json.loads(invoke("validate", path, "--json").stdout)
    assert [p for p in after if p["code"] == "retrieval_degraded"] == []


def test_another_tools_word_for_a_command_is_answered_with_this_clis_word(scripted_models):
    for argv, said in ((("datasets", "delete", "x"), "Did you mean 'rm'?"),
                       (("datasets", "ls"), "Did you mean 'list'?"),
                       (("keys", "delete", "k1"), "Did you mean 'revoke'?"),
                       (("secrets", "remove", "S"), "Did you mean 'rm'?")):
        refused = invoke(*argv)
        assert refused.exit_code == 2 and f"No such command {argv[1]!r}. {said}" in refused.stderr, refused.stderr
    unknown = invoke("datasets", "frobnicate")
    assert unknown.exit_code == 2 and "Did you mean" not in unknown.stderr
