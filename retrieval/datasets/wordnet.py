"""WordNet 3.0 synsets read straight from its ``data.{noun,verb,adj,adv}`` files (wndb(5)).

Only synset members are needed for the tree prior, so this reads them and nothing else: a data
line is ``offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt ...`` with
``w_cnt`` in hex; license lines start with two spaces. Debian's ``wordnet-base`` installs the
files in ``/usr/share/wordnet`` (``make wordnet``); ``--wordnet DIR`` names another directory.
"""
import os
import re

DEFAULT_DIR = "/usr/share/wordnet"
POS_FILES = ("noun", "verb", "adj", "adv")
_ADJ_MARKER = re.compile(r"\([a-z]+\)$")  # adjective position markers: "galore(ip)"


def wordnet_dir(path=None):
    """The WordNet directory to read: ``path``, else $WORDNET_DIR, else Debian's; None when the
    data files are missing."""
    d = path or os.environ.get("WORDNET_DIR") or DEFAULT_DIR
    ok = all(os.path.exists(os.path.join(d, "data." + p)) for p in POS_FILES)
    return d if ok else None


def read_synsets(path=None, pos=POS_FILES):
    """Every synset as a list of lowercased lemma strings (underscores kept: multi-word
    lemmas), in file order of ``pos``. Raises FileNotFoundError naming the directory."""
    d = wordnet_dir(path)
    if d is None:
        raise FileNotFoundError(
            f"WordNet 3.0 data files (data.noun, ...) not found in {path or DEFAULT_DIR}; "
            f"install Debian's wordnet-base (make wordnet) or pass --wordnet DIR")
    out = []
    for p in pos:
        with open(os.path.join(d, "data." + p), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                parts = line.split()
                n = int(parts[3], 16)
                words = [_ADJ_MARKER.sub("", parts[4 + 2 * i]).lower() for i in range(n)]
                out.append(words)
    return out


def synsets_as_terms(synsets, term_of):
    """Map lemma synsets to term-id synsets with ``term_of(lemma) -> id or None`` (e.g. the
    index's analyzer then its vocabulary); multi-word lemmas are mapped as written by
    ``term_of``. Returns the list of distinct-id tuples with at least two ids."""
    out = []
    for s in synsets:
        ids = {t for t in (term_of(w) for w in s) if t is not None}
        if len(ids) >= 2:
            out.append(tuple(sorted(ids)))
    return out
