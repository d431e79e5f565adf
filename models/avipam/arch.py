"""aviPAM's architectures: the DAG descriptions ("4pam:12,100", "molda:10:50", "ctm:50") parsed
into the masks that join each level of nodes to the next, and the Laplace prior of a level."""
import re
from typing import NamedTuple

import numpy as np


class Arch(NamedTuple):
    """A parsed DAG: ``masks[l]`` (bool, (P_l, C_l)) joins level l to level l + 1, root first;
    ``groups`` are the sub-topic ranges [start, stop) of the mixture components (one range for a
    layered PAM); ``levels`` the node counts below the root; ``full_cov``: the root's logistic
    normal has a full, learned covariance (CTM)."""

    masks: list
    groups: list
    levels: list
    full_cov: bool = False


def parse_arch(desc):
    """Parse a DAG description.

    ``"Lpam:n_1,...,n_{L-2}"``: a layered L-PAM: root -> n_1 -> ... -> n_{L-2} sub-topics ->
    words, every node joined to every node of the next level ("3pam:50" is LDA, "4pam:2,50" has 2
    super-topics over 50 sub-topics, "5pam:2,2,50" adds 2 super-duper topics).
    ``"molda:K_1:K_2:..."``: a mixture of LDAs: root -> M components -> component m's own K_m
    topics ("molda:10:50").
    ``"ctm:K"``: the correlated topic model, root -> K topics with a full-covariance logistic
    normal (Blei & Lafferty 2006).
    """
    if not isinstance(desc, str):
        raise ValueError(f"arch must be a string such as '4pam:50,100' or 'molda:10:50', got {desc!r}")
    s = desc.strip().lower()
    m = re.fullmatch(r"ctm:(\d+)", s)
    if m:
        K = int(m.group(1))
        if K < 2:
            raise ValueError(f"arch {desc!r}: a CTM needs at least 2 topics, e.g. 'ctm:50'")
        return Arch([np.ones((1, K), dtype=bool)], [(0, K)], [K], full_cov=True)
    m = re.fullmatch(r"(\d+)pam:(\d+(?:,\d+)*)", s)
    if m:
        L = int(m.group(1))
        sizes = [int(x) for x in m.group(2).split(",")]
        if L < 3 or len(sizes) != L - 2:
            raise ValueError(f"arch {desc!r}: an {L}-PAM needs {L - 2} level sizes (root and words "
                             f"excluded), got {len(sizes)}; e.g. '4pam:50,100'")
        if min(sizes) < 2:
            raise ValueError(f"arch {desc!r}: every level needs at least 2 nodes")
        nodes = [1] + sizes
        masks = [np.ones((nodes[i], nodes[i + 1]), dtype=bool) for i in range(len(sizes))]
        return Arch(masks, [(0, sizes[-1])], sizes)
    m = re.fullmatch(r"molda((?::\d+)+)", s)
    if m:
        ks = [int(x) for x in m.group(1)[1:].split(":")]
        if len(ks) < 2 or min(ks) < 2:
            raise ValueError(f"arch {desc!r}: a mixture of LDAs needs >= 2 components of >= 2 "
                             f"topics each, e.g. 'molda:10:50'")
        bounds = np.concatenate([[0], np.cumsum(ks)])
        comp = np.zeros((len(ks), int(bounds[-1])), dtype=bool)
        for i in range(len(ks)):
            comp[i, bounds[i]:bounds[i + 1]] = True
        groups = [(int(bounds[i]), int(bounds[i + 1])) for i in range(len(ks))]
        return Arch([np.ones((1, len(ks)), dtype=bool), comp], groups, [len(ks), int(bounds[-1])])
    raise ValueError(f"cannot parse arch {desc!r}: use 'Lpam:n1,...' (e.g. '3pam:50', '4pam:50,100', "
                     f"'5pam:10,50,100'), 'molda:K1:K2:...' (e.g. 'molda:10:50') or 'ctm:K'")


def laplace_prior(alpha, n_children):
    """Mean and variance, in the softmax basis, of the Laplace approximation of a symmetric
    Dirichlet(alpha) over ``n_children`` (MacKay 1998; AVITM): mu = 0 and
    var = (1/alpha)(1 - 2/K) + (1/K^2) K/alpha = (1/alpha)(1 - 1/K)."""
    K = n_children
    return 0.0, (1.0 / alpha) * (1.0 - 2.0 / K) + (1.0 / K ** 2) * (K / alpha)
