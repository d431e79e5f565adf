import gzip
import io
import re
import string
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.core.trec import (
    Doc,
    Qrel,
    ScoredDoc,
    Topic,
    TrecFormatError,
    TrecFormatWarning,
    read_collection,
    read_qrels,
    read_run,
    read_topics,
    topic_query,
    write_run,
)

DATA = Path(__file__).parent / "data"

# AP88-90 layout: metadata elements to ignore, two HEADs and two TEXTs, &amp;, nested markup.
AP = """\
<DOC>
<DOCNO> AP880212-0001 </DOCNO>
<FILEID>AP-NR-02-12-88 2344EST</FILEID>
<FIRST>u i AM-Vietnam-Shipwreck 02-12 0398</FIRST>
<SECOND>AM-Vietnam-Shipwreck,0411</SECOND>
<HEAD>Survivors Say 300 Vietnamese Died</HEAD>
<HEAD>Eds: SUBS 7th graf</HEAD>
<BYLINE>By MARY KENNEDY</BYLINE>
<DATELINE>BANGKOK, Thailand (AP) </DATELINE>
<TEXT>
   Shipwreck survivors said AT&amp;T phones
were <B>not</B> used.
</TEXT>
<TEXT>
   Second part of the story.
</TEXT>
</DOC>
<DOC>
<DOCNO> AP880212-0002 </DOCNO>
<FILEID>AP-NR-02-12-88 2346EST</FILEID>
<HEAD>Rail Strike</HEAD>
<TEXT>
   Trains stopped; 3 &lt; 4 &AMP; &hyph; stays.
</TEXT>
</DOC>

<DOC>
<DOCNO> AP880212-0003 </DOCNO>
<TEXT>
   No headline here.
</TEXT>
</DOC>
<DOC>
<DOCNO>AP880212-0004</DOCNO>
<HEAD>Only a head</HEAD>
</DOC>
"""

# SJMN91 layout: LEADPARA and HEADLINE kept, ACCESS CAPTION DESCRIPT SECTION PG.COL ignored.
SJMN = """\
<DOC>
<DOCNO> SJMN91-06001001 </DOCNO>
<ACCESS> 06001001 </ACCESS>
<CAPTION> Photo; Mayor at city hall </CAPTION>
<DESCRIPT> POLITICS; CITY; BUDGET </DESCRIPT>
<LEADPARA> The city council
approved the budget. </LEADPARA>
<SECTION> Local </SECTION>
<PG.COL> 1 B </PG.COL>
<HEADLINE> COUNCIL PASSES BUDGET </HEADLINE>
<TEXT> After a long night the vote was 7 to 4. </TEXT>
</DOC>
<DOC>
<DOCNO> SJMN91-06001002 </DOCNO>
<ACCESS> 06001002 </ACCESS>
<HEADLINE> SHARKS WIN </HEADLINE>
<TEXT> The Sharks won 3-2. </TEXT>
</DOC>
"""


def docnos(docs):
    return [doc.docno for doc in docs]


def read_all(source, **kwargs):
    return list(read_collection(source, **kwargs))


# --- documents ------------------------------------------------------------------------------


def test_ap_fields_lines_and_entities():
    docs = read_all(AP)
    assert docnos(docs) == ["AP880212-0001", "AP880212-0002", "AP880212-0003", "AP880212-0004"]
    first = docs[0]
    assert first.title == "Survivors Say 300 Vietnamese Died\nEds: SUBS 7th graf"
    assert first.text == "Shipwreck survivors said AT&T phones\nwere not used.\nSecond part of the story."
    assert first.contents == first.title + "\n" + first.text
    assert "KENNEDY" not in first.contents and "BANGKOK" not in first.contents
    assert "2344EST" not in first.contents
    assert docs[1].text == "Trains stopped; 3 < 4 & &hyph; stays."
    assert (docs[2].title, docs[2].contents) == ("", "No headline here.")
    assert (docs[3].text, docs[3].contents) == ("", "Only a head")
    assert [doc.line for doc in docs] == [1, 18, 27, 33]
    assert {doc.source for doc in docs} == {"<string>"}


def test_sjmn_fields():
    docs = read_all(SJMN)
    assert docs[0] == Doc(
        "SJMN91-06001001",
        "COUNCIL PASSES BUDGET",
        "The city council\napproved the budget.\nAfter a long night the vote was 7 to 4.",
        "<string>",
        1,
    )
    assert docs[1].contents == "SHARKS WIN\nThe Sharks won 3-2."


def test_inline_tags_comments_and_custom_tags():
    text = (
        "<DOC><DOCNO> X-1 </DOCNO><HEAD>Tiny <i>head</i></HEAD><TEXT>body <!-- note --> "
        "<F P=102>text</F></TEXT><BYLINE>By me</BYLINE></DOC>\n"
        "<doc><docno>X-2</docno><text>lower-case tags</text></doc>\n"
    )
    docs = read_all(text)
    assert [(d.docno, d.title, d.text, d.line) for d in docs] == [
        ("X-1", "Tiny head", "body  text", 1),
        ("X-2", "", "lower-case tags", 2),
    ]
    with pytest.warns(TrecFormatWarning, match="1 document has no text, e.g. X-2"):
        docs = read_all(text, title_tags=["byline"], text_tags=["HEAD"])
    assert (docs[0].title, docs[0].text) == ("By me", "Tiny head")


BAD_DOCS = [
    # (text, message regex, line, docnos kept with on_error="warn")
    (
        "<DOC>\n<DOCNO> A </DOCNO>\n<TEXT>a</TEXT>\n<DOC>\n<DOCNO> B </DOCNO>\n</DOC>\n",
        r"<string>:1: <DOC> is not closed: a new <DOC> starts at line 4",
        1,
        ["B"],
    ),
    (
        "<DOC>\n<DOCNO> A </DOCNO>\n</DOC>\n<DOC>\n<DOCNO> B </DOCNO>\n<TEXT>b\n",
        r"<string>:4: <DOC> is not closed before the end of the file",
        4,
        ["A"],
    ),
    (
        "<DOC>\n<DOCNO> A </DOCNO>\n</DOC>\n<DOC>\n<TEXT>b</TEXT>\n</DOC>\n",
        r"<string>:4: document has no <DOCNO>",
        4,
        ["A"],
    ),
    (
        "<DOC>\n<DOCNO>   </DOCNO>\n<TEXT>a</TEXT>\n</DOC>\n<DOC><DOCNO>B</DOCNO></DOC>\n",
        r"<string>:2: empty <DOCNO>",
        2,
        ["B"],
    ),
    (
        "<DOC>\n<DOCNO> A </DOCNO>\n<TEXT>a</TEXT>\n</DOC>\n<DOC>\n<DOCNO> A </DOCNO>\n</DOC>\n",
        r"<string>:5: duplicate DOCNO 'A'; it was first used at <string>:1",
        5,
        ["A"],
    ),
    (
        "<DOC>\n<DOCNO> A </DOCNO>\n</DOC>\nstray words\nmore\n<DOC><DOCNO>B</DOCNO></DOC>\n",
        r"<string>:4: text outside <DOC>: 'stray words'",
        4,
        ["A", "B"],
    ),
    (
        "<DOC><DOCNO>A</DOCNO></DOC>\n<DOC>\n<DOCNO>B</DOCNO><TEXT>b</TEXT>\n<DOCNO>C</DOCNO>\n</DOC>\n",
        r"<string>:4: second <DOCNO> 'C' in the document 'B' that starts at line 2. Is a </DOC><DOC> missing?",
        4,
        ["A"],
    ),
    (
        "<DOC><DOCNO>A</DOCNO></DOC>\n</DOC>\n",
        r"<string>:2: '</DOC>' outside <DOC>",
        2,
        ["A"],
    ),
]


@pytest.mark.parametrize("text, message, line, kept", BAD_DOCS)
def test_bad_documents_raise(text, message, line, kept):
    with pytest.raises(TrecFormatError, match=re.escape(message)) as info:
        read_all(text)
    assert (info.value.source, info.value.line) == ("<string>", line)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("text, message, line, kept", BAD_DOCS)
def test_bad_documents_warn_and_skip(text, message, line, kept):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = read_all(text, on_error="warn")
    assert docnos(docs) == kept
    problems = [str(w.message) for w in caught if "no text" not in str(w.message)]
    assert len(problems) == 1
    assert re.match(re.escape(message), problems[0])
    assert problems[0].endswith("Skipped.")


def test_empty_documents_warn_once_with_examples():
    text = "".join(f"<DOC><DOCNO>E{i}</DOCNO><TEXT> </TEXT></DOC>\n" for i in range(5))
    text += "<DOC><DOCNO>F</DOCNO><TEXT>full</TEXT></DOC>\n"
    with pytest.warns(TrecFormatWarning) as caught:
        docs = read_all(text)
    assert docnos(docs) == ["E0", "E1", "E2", "E3", "E4", "F"]
    assert len(caught) == 1
    assert str(caught[0].message).startswith(
        "<string>: 5 documents have no text, e.g. E0 (<string>:1), E1 (<string>:2), E2 (<string>:3)."
    )


def test_error_message_prefix():
    error = TrecFormatError("empty <DOCNO>.", "a.trec", 3)
    assert (str(error), error.source, error.line) == ("a.trec:3: empty <DOCNO>.", "a.trec", 3)
    assert str(TrecFormatError("a.trec:3: empty <DOCNO>.", source="a.trec", line=3)) == str(error)
    assert str(TrecFormatError("no topics.", "t.txt")) == "t.txt: no topics."


def test_bad_arguments():
    with pytest.raises(ValueError, match="on_error"):
        read_collection(AP, on_error="ignore")
    with pytest.raises(ValueError, match="TEXT"):
        read_collection(AP, title_tags=["TEXT"])


def test_gzip_directory_and_open_files(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.trec").write_text(SJMN)
    with gzip.open(tmp_path / "b" / "ap880212.gz", "wt") as out:  # gzip found by its bytes
        out.write(AP)
    (tmp_path / "README").write_text("not a collection")
    (tmp_path / "ReadMe.txt").write_text("nor this")
    (tmp_path / ".hidden").write_text("skipped")
    (tmp_path / ".git" / "HEAD").write_text("skipped")

    gz_docs = read_all(tmp_path / "b" / "ap880212.gz")
    assert gz_docs == [doc._replace(source=str(tmp_path / "b" / "ap880212.gz")) for doc in read_all(AP)]

    docs = read_all(tmp_path)
    assert docnos(docs) == docnos(read_all(SJMN)) + docnos(read_all(AP))
    assert docs[0].source == str(tmp_path / "a.trec")
    assert docs[-1].line == 33

    assert docnos(read_all(str(tmp_path / "a.trec"))) == docnos(read_all(SJMN))
    with open(tmp_path / "a.trec") as text_file:
        assert read_all(text_file)[0].source == str(tmp_path / "a.trec")
    with open(tmp_path / "a.trec", "rb") as byte_file:
        assert docnos(read_all(byte_file)) == docnos(read_all(SJMN))
    assert read_all(io.StringIO(SJMN))[1].source == "<file>"


def test_duplicate_docno_across_files_names_both(tmp_path):
    (tmp_path / "1.trec").write_text("<DOC>\n<DOCNO>D</DOCNO>\n</DOC>\n")
    (tmp_path / "2.trec").write_text("\n<DOC>\n<DOCNO>D</DOCNO>\n</DOC>\n")
    with pytest.raises(TrecFormatError) as info:
        read_all(tmp_path)
    assert str(info.value).startswith(
        f"{tmp_path / '2.trec'}:2: duplicate DOCNO 'D'; it was first used at {tmp_path / '1.trec'}:1."
    )


def test_latin1_file_warns_once_and_decodes(tmp_path):
    path = tmp_path / "sjmn.trec"
    path.write_bytes(
        b"<DOC>\n<DOCNO> L1 </DOCNO>\n<TEXT>caf\xe9 \xe0 la cr\xe8me</TEXT>\n</DOC>\n"
        b"<DOC>\n<DOCNO> L2 </DOCNO>\n<TEXT>na\xefve</TEXT>\n</DOC>\n"
    )
    with pytest.warns(TrecFormatWarning) as caught:
        docs = read_all(path)
    assert [str(w.message) for w in caught] == [
        f"{path}: line 3: not valid UTF-8; decoded as latin-1"
    ]
    assert [doc.text for doc in docs] == ["café à la crème", "naïve"]


def test_utf8_is_decoded_without_warning(tmp_path):
    path = tmp_path / "u.trec"
    path.write_bytes("\ufeff<DOC><DOCNO>U</DOCNO><TEXT>naïve ≤ 2</TEXT></DOC>\n".encode())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_all(path)[0].text == "naïve ≤ 2"


def test_unix_compress_is_named(tmp_path):
    path = tmp_path / "AP880212.Z"
    path.write_bytes(b"\x1f\x9d\x90<DOC>")
    with pytest.raises(TrecFormatError, match=r"AP880212\.Z: compressed with Unix compress"):
        read_all(path)


def test_fixture_collection_topics_and_qrels():
    """tests/data holds the 4-doc collection, 2 topics and 6 qrels lines other tests use."""
    docs = read_all(DATA / "docs.trec")
    topics = read_topics(DATA / "topics.trec")
    qrels = read_qrels(DATA / "qrels.txt")
    assert docnos(docs) == [f"AP880212-000{i}" for i in range(1, 5)]
    assert docs[1].text == "Boeing asked Washington to act against Airbus subsidies & loans."
    assert [(t.qid, t.title) for t in topics] == [("1", "Airbus Subsidies"), ("2", "Rail Strikes")]
    assert len(qrels) == 6
    assert {q.docno for q in qrels} <= set(docnos(docs))
    assert [q.docno for q in qrels if q.rel > 0] == ["AP880212-0001", "AP880212-0002", "AP880212-0003"]


# --- topics ---------------------------------------------------------------------------------

TREC1_TOPICS = """\
<top>
<head> Tipster Topic Description
<num> Number:  051
<dom> Domain:  International Economics
<title> Topic:  Airbus Subsidies

<desc> Description:
Document will discuss government assistance to Airbus Industrie, or mention a
trade dispute.
<smry> Summary:
Document will discuss government assistance.
<narr> Narrative:
A relevant document will cite or discuss assistance
to Airbus &amp; others.
<con> Concept(s):
1. Airbus Industrie
<fac> Factor(s):
<nat> Nationality: U.S.</nat>
</fac>
<def> Definition(s):
</top>

<top>
<num> Number: 087
<title> Topic: Criminal Actions Against Officers of Failed
               Financial Institutions
<desc> Description:
Document will report R&D on criminal actions.
</top>
"""


def test_trec1_topics():
    topics = read_topics(TREC1_TOPICS)
    assert read_topics(io.StringIO(TREC1_TOPICS)) == topics
    assert topics == [
        Topic(
            "51",
            "Airbus Subsidies",
            "Document will discuss government assistance to Airbus Industrie, or mention a "
            "trade dispute.",
            "A relevant document will cite or discuss assistance to Airbus & others.",
        ),
        Topic(
            "87",
            "Criminal Actions Against Officers of Failed Financial Institutions",
            "Document will report R&D on criminal actions.",
            "",
        ),
    ]


def test_robust04_topics_and_closing_tags():
    text = """\
<top>
<num> Number: 301
<title>
International Organized Crime

<desc> Description:
Identify organizations that participate in international criminal activity.

<narr> Narrative:
A relevant document must as a minimum identify the organization.
</top>
<TOP><NUM>MB01</NUM><TITLE>wikileaks   hacker</TITLE><DESC>who?</DESC></TOP>
"""
    topics = read_topics(text)
    assert [(t.qid, t.title, t.narr) for t in topics] == [
        ("301", "International Organized Crime",
         "A relevant document must as a minimum identify the organization."),
        ("MB01", "wikileaks hacker", ""),
    ]
    assert topics[1].desc == "who?"


def test_tsv_topics(tmp_path):
    path = tmp_path / "topics.tsv"
    path.write_text("051\tairbus  subsidies\n\nq2\trail strikes\n")
    assert read_topics(path) == [
        Topic("51", "airbus subsidies", "", ""),
        Topic("q2", "rail strikes", "", ""),
    ]
    path.write_text("1\tone\n2 two\n")
    with pytest.raises(TrecFormatError, match=re.escape(f"{path}:2: expected 'qid<TAB>query', got '2 two'")):
        read_topics(path)


def test_topic_errors(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("51 0 AP880212-0001 1\n")
    with pytest.raises(TrecFormatError, match=re.escape(
        f"{path}: no <top> blocks and no qid<TAB>text lines; is this a topics file?"
    )):
        read_topics(path)
    with pytest.raises(TrecFormatError, match=r"^<string>:4: topic '2' has no title"):
        read_topics("<top><num> 1 <title> a </top>\n\n\n<top><num> 2 <desc> b </top>\n")
    with pytest.raises(TrecFormatError, match=r"^<string>:2: duplicate topic '1'; it was first defined at line 1"):
        read_topics("<top><num> 1 <title> a </top>\n<top><num> 001 <title> b </top>\n")
    with pytest.raises(TrecFormatError, match=r"^<string>:1: topic has no usable <num>"):
        read_topics("<top><title> a </top>\n")
    with pytest.raises(TrecFormatError, match=r"^<string>:2: duplicate topic 'q'"):
        read_topics("q\ta\nq\tb\n")


def test_topic_query():
    topic = Topic("51", "Airbus Subsidies", "Government aid.", "Relevant: aid.")
    assert topic_query(topic) == "Airbus Subsidies"
    assert topic_query(topic, "desc") == "Government aid."
    assert topic_query(topic, "narr") == "Relevant: aid."
    assert topic_query(topic, "title+desc") == "Airbus Subsidies Government aid."
    assert topic_query(topic._replace(desc=""), "title+desc") == "Airbus Subsidies"
    with pytest.raises(ValueError, match="'concepts'"):
        topic_query(topic, "concepts")


def test_trec_adhoc_51_150(shared_data):
    folder = shared_data / "trec-adhoc-51-150"
    topics = read_topics(folder / "topics.adhoc.51-100.txt") + read_topics(folder / "topics.adhoc.101-150.txt")
    assert [t.qid for t in topics] == [str(q) for q in range(51, 151)]
    titles = {t.qid: t.title for t in topics}
    assert titles["51"] == "Airbus Subsidies"
    assert titles["71"] == "Border Incursions"  # "<title>  Topic:" with two spaces
    assert titles["87"] == "Criminal Actions Against Officers of Failed Financial Institutions"
    assert titles["102"] == "Laser Research Applicable to the U.S.'s Strategic Defense Initiative"
    assert titles["122"] == "RDT&E of New Cancer Fighting Drugs"  # bare '&' in the file
    assert titles["150"] == "U.S. Political Campaign Financing"
    assert all(t.desc and t.narr for t in topics)
    assert topics[0].desc.startswith("Document will discuss government assistance to Airbus")

    qrels = read_qrels(folder / "qrels.adhoc.51-100.txt") + read_qrels(folder / "qrels.adhoc.101-150.txt")
    assert len(qrels) == 89179 + 62620
    assert {q.qid for q in qrels} == set(titles)
    assert {q.rel for q in qrels} == {0, 1}


# docs and topics columns of the table in ../shared/data/README.md
SHARED = {"adi": (82, 35), "med": (1033, 30), "cran": (1400, 225), "cisi": (1460, 112),
          "cacm": (3204, 64), "scifact": (5183, 300), "npl": (11429, 93), "nfcorpus": (3633, 323),
          "aila2019": (2914, 50), "checkthat2020": (10375, 1197)}


def test_shared_readme_table_matches(shared_data):
    table = {}
    for row in (shared_data / "README.md").read_text().splitlines():
        match = re.match(r"\| (\w+) \| ([\d,]+) \| ([\d,]+) \(", row)
        if match:
            table[match[1]] = (int(match[2].replace(",", "")), int(match[3].replace(",", "")))
    assert table == SHARED


@pytest.mark.parametrize("name", SHARED)
def test_shared_collections(shared_data, name):
    n_docs, n_topics = SHARED[name]
    folder = shared_data / name
    topics = read_topics(folder / "topics.trec")
    qrels = read_qrels(folder / "qrels.txt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = read_all(folder / "docs")
    assert len(topics) == n_topics
    assert all(t.title for t in topics)
    assert len(docs) == n_docs
    assert {q.qid for q in qrels} <= {t.qid for t in topics}
    assert {q.docno for q in qrels} <= set(docnos(docs))
    # Cranfield documents 471 and 995 are empty in the original distribution.
    expected = ["2 documents have no text, e.g. CRAN-471"] if name == "cran" else []
    assert [str(w.message).split(": ", 1)[1][:39] for w in caught] == expected


# --- qrels and runs -------------------------------------------------------------------------


def test_read_qrels():
    text = "051 0 AP880212-0001 1\n\n51 0 AP880212-0002 0\nq7 Q0 D-1 -1\n1 0 CRAN-4 4\n"
    assert read_qrels(text) == [
        Qrel("51", "AP880212-0001", 1),
        Qrel("51", "AP880212-0002", 0),
        Qrel("q7", "D-1", -1),
        Qrel("1", "CRAN-4", 4),
    ]
    assert read_qrels("") == []


def test_qrels_errors(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("301 0 FBIS3-10081 1\n301 0 FBIS3-10082\n")
    with pytest.raises(TrecFormatError, match=re.escape(
        f"""{path}:2: expected 4 fields "qid iter docno rel", got 3: '301 0 FBIS3-10082'."""
    )):
        read_qrels(path)
    with pytest.raises(TrecFormatError, match=r"^<string>:1: .* got 6: .*Is this a run file\?"):
        read_qrels("301 Q0 FBIS3-1 1 12.5 run\n")
    with pytest.raises(TrecFormatError, match=r"^<string>:2: relevance must be an integer, got '0.5'"):
        read_qrels("1 0 a 1\n1 0 b 0.5\n")


def test_qrels_duplicates_warn_and_last_wins():
    text = "1 0 a 1\n1 0 b 0\n001 0 a 2\n1 0 b 3\n"
    with pytest.warns(TrecFormatWarning, match=re.escape(
        "<string>: 2 repeated judgments, e.g. line 3 judges topic '1', doc 'a' again (first at line 1); "
        "the last one wins."
    )):
        qrels = read_qrels(text)
    assert qrels == [Qrel("1", "a", 2), Qrel("1", "b", 3)]


def test_read_run_and_errors():
    text = "051 Q0 d1 1 -4.25 tag\n51 Q0 d2 2 -5 tag\n\nq9 Q0 d1 1 1e-05 other\n"
    assert read_run(text) == [ScoredDoc("51", "d1", -4.25), ScoredDoc("51", "d2", -5.0),
                              ScoredDoc("q9", "d1", 1e-05)]
    with pytest.raises(TrecFormatError, match=r'^<string>:2: expected 6 fields "qid Q0 docno rank score tag", '
                                              r"got 4: '1 0 d 1'\. Is this a qrels file\?"):
        read_run("1 Q0 a 1 2.0 t\n1 0 d 1\n")
    with pytest.raises(TrecFormatError, match=r"^<string>:1: rank must be an integer and score a number, "
                                              r"got rank '1', score 'high'"):
        read_run("1 Q0 a 1 high t\n")


def test_write_run_order_ties_depth_and_tag():
    run = [ScoredDoc("10", "b", 1.0), ScoredDoc("2", "z", 0.5), ScoredDoc("10", "a", 1.0),
           ScoredDoc("10", "c", 3.0), ScoredDoc("2", "y", np.float64(0.75)), ScoredDoc("10", "d", -1.0)]
    out = io.StringIO()
    write_run(out, run, tag="lda", depth=3)
    assert out.getvalue() == (
        "2 Q0 y 1 0.75 lda\n"
        "2 Q0 z 2 0.5 lda\n"
        "10 Q0 c 1 3.0 lda\n"
        "10 Q0 a 2 1.0 lda\n"
        "10 Q0 b 3 1.0 lda\n"
    )
    out = io.StringIO()
    write_run(out, [ScoredDoc("b", "x", 1.0), ScoredDoc("10", "x", 1.0), ScoredDoc("9", "x", 1.0)])
    assert [line.split()[0] for line in out.getvalue().splitlines()] == ["10", "9", "b"]


def test_write_run_rejects_bad_values():
    for bad in ([ScoredDoc("1", "d", float("nan"))], [ScoredDoc("1", "a doc", 1.0)], [ScoredDoc("", "d", 1.0)]):
        with pytest.raises(ValueError):
            write_run(io.StringIO(), bad)
    with pytest.raises(ValueError, match="depth"):
        write_run(io.StringIO(), [], depth=0)
    with pytest.raises(ValueError, match="tag"):
        write_run(io.StringIO(), [], tag="two words")


def test_write_run_to_path_is_atomic(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("old\n")
    write_run(path, [ScoredDoc("1", "d", 2.0)])
    assert path.read_text() == "1 Q0 d 1 2.0 topicir\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.txt"]

    def failing():
        yield ScoredDoc("1", "e", 1.0)
        raise RuntimeError("scorer crashed")

    with pytest.raises(RuntimeError):
        write_run(str(path), failing())
    assert path.read_text() == "1 Q0 d 1 2.0 topicir\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.txt"]


def expected_ranking(run, depth):
    """Slow twin of write_run's ordering: two stable sorts instead of one tuple sort."""
    by_qid = {}
    for doc in run:
        by_qid.setdefault(doc.qid, []).append(doc)
    numeric = all(qid.isdigit() for qid in by_qid)
    ranking = []
    for qid in sorted(by_qid, key=int if numeric else str):
        docs = sorted(by_qid[qid], key=lambda doc: doc.docno)
        docs.sort(key=lambda doc: doc.score, reverse=True)
        ranking += docs[:depth]
    return ranking


NAME = string.ascii_letters + string.digits + "-_."
QIDS = st.one_of(
    st.integers(0, 500).map(str),
    st.text(NAME, min_size=1, max_size=4).filter(lambda qid: not qid.isdigit()),
)
RUNS = st.lists(
    st.builds(ScoredDoc, QIDS, st.text(NAME, min_size=1, max_size=6), st.floats(allow_nan=False, allow_infinity=False)),
    max_size=40, unique_by=lambda doc: (doc.qid, doc.docno),  # a run ranks a document once per topic
)


@settings(max_examples=200, deadline=None)
@given(run=RUNS, depth=st.one_of(st.none(), st.integers(1, 5)))
def test_run_round_trip(run, depth):
    out = io.StringIO()
    write_run(out, run, depth=depth)
    assert read_run(out.getvalue()) == expected_ranking(run, depth)


@settings(max_examples=100, deadline=None)
@given(run=RUNS, data=st.data())
def test_reordering_docs_does_not_change_the_run(run, data):
    shuffled = data.draw(st.permutations(run))
    first, second = io.StringIO(), io.StringIO()
    write_run(first, run)
    write_run(second, shuffled)
    assert first.getvalue() == second.getvalue()
