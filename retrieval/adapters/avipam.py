"""Retrieval-side extras of aviPAM: the ``coherence`` command (NPMI of any model kind's topics;
it lives here until the CLI gathers commands that belong to no single kind)."""


def add_commands(subparsers):
    from ..experiments import coherence

    p = subparsers.add_parser("coherence", help="NPMI topic coherence of model files (any kind)",
                              description=coherence.__doc__)
    coherence.add_arguments(p)
    p.set_defaults(func=coherence.run)
