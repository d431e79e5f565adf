"""Subcommands of ``topicir`` that read model files without ranking: ``coherence``."""
from __future__ import annotations

from .cli_tables import Command

DEFAULT_20NEWS = "/work/shared/data/20news/20news-bydate.tar.gz"


def _fill(p) -> None:
    p.add_argument("--model", dest="models", action="append", required=True,
                   help="model file of any registered kind (repeatable)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--index", help="reference = this index's token stream (its models' vocabulary)")
    src.add_argument("--newsgroups", nargs="?", const=DEFAULT_20NEWS, default=DEFAULT_20NEWS,
                     help="reference = 20 Newsgroups with the AVITM-style vocabulary (default)")
    p.add_argument("--vocab", type=int, default=2000, help="20 Newsgroups vocabulary size")
    p.add_argument("--split", choices=("train", "test", "all"), default="train", help="20 Newsgroups split")
    p.add_argument("--window", default="document",
                   help="'document' (co-occurrence in a document) or a sliding window size, e.g. 20")
    p.add_argument("--top-n", type=int, default=10, help="top words of each topic")
    p.set_defaults(func=cmd_coherence)


_WHAT = "NPMI topic coherence of model files (any kind) over an index or 20 Newsgroups"
COHERENCE = Command("coherence", _WHAT, _fill, _WHAT + ". Every figure names its convention: 'document' "
                    "co-occurrence or a sliding window of W tokens.")


def cmd_coherence(args) -> int:
    from ..experiments.coherence import coherence_report

    if args.window != "document" and not args.window.isdigit():
        raise ValueError(f"--window: 'document' or a window size in tokens, got {args.window!r}")
    print(coherence_report(args.models, index=args.index, newsgroups=args.newsgroups, vocab=args.vocab,
                           split=args.split, window=args.window, top_n=args.top_n))
    return 0
