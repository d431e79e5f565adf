"""The defaults topicir ships are the ones docs/results/effectiveness.md chose and measured
(rerun `topicir reproduce effectiveness` after changing one)."""
import re
from pathlib import Path

from models.registry import model_class
from retrieval.core.feedback import Settings
from retrieval.core.scoring import LAM, MU
from retrieval.core.modelfiles import shaping

PAGE = Path(__file__).resolve().parents[1] / "docs" / "results" / "effectiveness.md"


def section(title: str) -> list[dict]:
    """The rows of the page's table under the heading ``title``."""
    text = PAGE.read_text(encoding="utf-8")
    body = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]]


def settings(text: str) -> dict:
    return dict(pair.split("=", 1) for pair in text.split())


def test_every_kind_is_measured_with_the_parameters_train_uses():
    rows = section("The models: each kind at its defaults")
    assert rows
    for row in rows:
        want = {k: str(v) for k, v in shaping(row["kind"], model_class(row["kind"])().get_params()).items()}
        assert settings(row["parameters"]) == want, row["kind"]


def test_mu_lam_and_feedback_defaults_are_the_chosen_ones():
    chosen = {row["method"]: settings(row["settings"]) for row in section("Defaults chosen by the protocol")}
    assert chosen["QL"] == {"mu": str(MU)}
    kinds = [row["kind"] for row in section("The models: each kind at its defaults")]
    for kind in kinds:
        assert chosen[kind.upper()] == {"lam": str(LAM)}, kind
    for method in [m for m in chosen if m.endswith(" parameters")]:
        assert chosen[method] == {}, method  # a kind's own defaults, not one of the other candidates
    rm3 = {k: str(v) for k, v in Settings("rm3").as_dict().items()}
    for method in [m for m in chosen if m.endswith("+RM3")]:
        assert chosen[method] == rm3, method
    topics = {k: str(v) for k, v in Settings("topics").as_dict().items()}
    for method in [m for m in chosen if m.endswith("topic feedback")]:
        assert chosen[method] == topics, method


def test_the_page_says_how_it_was_made():
    head = PAGE.read_text(encoding="utf-8").splitlines()[:4]
    assert re.search(r"Command: `topicir .*reproduce effectiveness --data \S+ .*--write docs/results/effectiveness.md`",
                     "\n".join(head))
