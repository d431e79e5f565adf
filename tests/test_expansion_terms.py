"""Which terms may expand a query: no stopword of the standard list (as the index analyses it),
no term in more than fb_max_df of the documents, only word shapes; and the weight of the
expansion against long queries (fb_length)."""
import numpy as np
import pytest

from retrieval.core.expansion_terms import allowed, stop_words
from retrieval.core.feedback import FeedbackQuery, Settings

CAR = "car automobile engine motor vehicle driver road wheel traffic speed".split()
RIVER = "river stream water bank flood lake rain shore boat fish".split()
CHATTER = "his from who were have".split()  # Lucene's 33-word list keeps them


@pytest.fixture(scope="module")
def chatty(tmp_path_factory):
    """20 documents, car (0-9) or river (10-19), each with function words; 'common' in 16 of
    them; 'x' and a 21-letter word in the first."""
    from retrieval.core.index import build_index

    root = tmp_path_factory.mktemp("chatty")
    rng = np.random.default_rng(3)
    docs = []
    for d in range(20):
        text = list(rng.choice(CAR if d < 10 else RIVER, size=25)) + CHATTER * 2
        text += ["common"] * 5 * (d < 16) + (["x", "abcdefghijklmnopqrstu"] if d == 0 else [])
        docs.append(f"<DOC>\n<DOCNO> C{d:02d} </DOCNO>\n<TEXT>\n{' '.join(text)}.\n</TEXT>\n</DOC>\n")
    (root / "docs.trec").write_text("".join(docs))
    return build_index([root / "docs.trec"], root / "index")


def ids(index, words):
    return [index.stats.term_index[index.analyze(w)[0]] for w in words]


def test_stop_list_is_the_standard_one():
    words = stop_words()
    assert len(words) == 318 and {"his", "from", "who", "were", "have", "be", "the"} <= words


def test_stopwords_as_analysed_rare_shapes_and_frequent_terms_are_left_out(chatty):
    ok = allowed(chatty, 1.0)
    assert not ok[ids(chatty, CHATTER)].any()  # "his" is the stem "hi" in the index
    assert ok[ids(chatty, CAR + RIVER + ["common"])].all()
    term = chatty.stats.term_index
    assert "x" not in term or not ok[term["x"]]
    assert not ok[term["abcdefghijklmnopqrstu"]]
    by_df = allowed(chatty, 0.5)  # 'common' is in 16 of the 20 documents, a theme's words in 10 or fewer
    assert not by_df[term["common"]] and by_df[ids(chatty, CAR + RIVER)].all()
    assert allowed(chatty, 0.5) is by_df and not by_df.flags.writeable  # once per index and share


@pytest.mark.parametrize("method", ["rm3"])
def test_expansions_hold_allowed_terms_and_the_query_keeps_its_own(chatty, method):
    fq = FeedbackQuery(chatty, "engine from", mu=1000.0)
    _, ex = fq.scores(Settings(method, fb_docs=5, fb_terms=8, fb_max_df=0.6))
    expansion = {t for t, _ in ex.feedback}
    assert expansion and expansion <= {chatty.analyze(w)[0] for w in CAR}
    weights = dict(ex.terms)
    assert weights["from"] > 0  # a query's own words are never filtered
    _, plain = fq.scores(Settings(method, fb_docs=5, fb_terms=8, fb_max_df=1.0))
    assert "common" in {t for t, _ in plain.feedback}


def test_long_queries_weigh_the_expansion_less():
    s = Settings(original_weight=0.5, fb_length=8)
    assert s.query_weight(8) == 0.5 and s.query_weight(3) == 0.5
    assert s.query_weight(32) == pytest.approx(1 / (1 + 8 / 32))  # the odds 1 shrink by 8/32
    assert Settings(original_weight=0.5, fb_length=None).query_weight(300) == 0.5
    assert Settings(original_weight=1.0, fb_length=4).query_weight(40) == 1.0
    with pytest.raises(ValueError, match="fb_length"):
        Settings(fb_length=0)
    with pytest.raises(ValueError, match="fb_max_df"):
        Settings(fb_max_df=0.0)


def test_the_expanded_query_keeps_the_weight_its_length_gives(chatty):
    text = " ".join(["engine"] * 4 + ["road"] * 4 + ["car"] * 4)  # 12 tokens
    fq = FeedbackQuery(chatty, text, mu=1000.0)
    for length, kept in ((None, 0.5), (3, 1 / (1 + 3 / 12))):
        _, ex = fq.scores(Settings(fb_docs=5, fb_terms=4, original_weight=0.5, fb_max_df=1.0, fb_length=length))
        own = sum(w for t, w in ex.terms if t in {"engin", "road", "car"})
        added = sum(w for t, w in ex.feedback if t in {"engin", "road", "car"})
        assert own == pytest.approx(kept + (1 - kept) * added)
