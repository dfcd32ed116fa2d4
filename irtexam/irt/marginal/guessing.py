"""The marginal estimator's guessing diagnostics and the rule of ``guessing_centre="auto"``.

How much the responses say about the 3PL's lower asymptotes c, as the data's share of the precision of each
item's logit c (1 - prior precision x posterior variance): from the fit's covariance
(:func:`guessing_data_share`, the warning for exams that barely inform c) or from the expected complete-data
information (:func:`guessing_complete_data_share`, no covariance needed, the fallback of "auto"); and the size rule
that holds the c prior's centre at 1 / n_choices where items have few responses (:func:`guessing_centre_by_size`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import em
from .. import model as mdl


def free_item_variances(result: em.MarginalResult) -> np.ndarray:
    """The posterior variances of the free items' unconstrained parameters, (free items, columns), from a result
    with a covariance (the item block leads the Layout order)."""
    layout = result.layout
    n_free = int(layout.free_rows.sum())
    return np.asarray(em.variances(result))[:n_free * layout.n_columns].reshape(n_free, layout.n_columns)


# Below this mean data share of the guessing parameters' precision (guessing_data_share) a fit says that the exam
# barely informs c. Measured (40 items x 1000, true c 0.2, experiments/easy_exam_guessing.py): proportion correct
# 0.93-0.96, mean share 0.002-0.012 with the fixed c prior and 0.022-0.048 with a learned centre (which then drifts
# to 0.28-0.52); 0.82-0.87: 0.054-0.119; exams of simulate's shape 0.20-0.65; 200 items x 60 examinees 0.146-0.147
# fixed, 0.036 and 0.088 learned (c 0.066 and 0.17 for a true 0.25: there the learned centre runs away before the
# share shows it).
GUESSING_SHARE_MIN = 0.06


def guessing_message(share: np.ndarray, spec: mdl.ModelSpec, proportion_correct: float) -> str:
    """The warning for an exam that barely informs the guessing parameters (mean data share ``share``,
    :func:`guessing_data_share`, below :data:`GUESSING_SHARE_MIN`)."""
    head = (f"the responses carry little information on the guessing parameters c (on average "
            f"{100 * share.mean():.1f}% of their precision, about {share.sum():.1f} items' worth; proportion "
            f"correct {proportion_correct:.2f})")
    if spec.guessing_centre == "learned":
        return (head + ": the learned centre of the c prior follows noise here; refit with guessing_centre='fixed' "
                "(--guessing-centre fixed) to centre c on 1/n_choices, or fix c with guessing=")
    return (head + f": the reported c's are the prior's (centred on 1/{spec.n_choices}); fix c with guessing= "
            "(--guessing) where it is known")


def guessing_data_share(result: em.MarginalResult, spec: mdl.ModelSpec) -> np.ndarray | None:
    """Per free item, the data's share of the precision of its logit c: w_i = 1 - tau_i v_i, with v_i the
    posterior variance of logit c_i (the inverse of the marginal posterior's information, the other parameters
    integrated out) and tau_i = kappa c_i (1 - c_i) the c prior's precision there (Beta(kappa m, kappa (1 - m)) on
    logit c), clipped to [0, 1]. 0: the estimate is the prior's; 1: the data's alone. In the normal-normal
    model sum_i w_i is the number of items' worth of information the exam holds about the guessing level. None
    without free guessing or without a covariance (``se=False``)."""
    if not spec.free_guessing or result.covariance is None or spec.item_prior == "none":
        return None
    rows = np.flatnonzero(result.layout.free_rows)
    if rows.size == 0:
        return None
    column = result.columns.index("c")
    variance = free_item_variances(result)
    items = {name: np.asarray(result.X[rows, j], dtype=np.float64) for j, name in enumerate(result.columns)}
    hyper = {k: float(np.asarray(v)) for k, v in result.hyper.items()}
    precision = mdl.item_prior_terms(items, spec, xp=np, hyper=hyper)[1]["c"]
    return np.clip(1.0 - np.asarray(precision) * variance[:, column], 0.0, 1.0)


def expected_node_counts(mask: np.ndarray, rows: np.ndarray, weights: np.ndarray,
                         cells_per_chunk: int = 1 << 23) -> np.ndarray:
    """n_iq = sum over the examinees m who answered item i of w_mq, (len(rows), Q), for the items ``rows``.

    A complete matrix needs one column sum; otherwise items go in chunks of about ``cells_per_chunk`` cells, so no
    float copy of the whole mask is made (at 10^8 cells it would take 800 MB; the fit holds a byte a cell)."""
    weights = np.asarray(weights, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool)
    if mask.all():
        return np.broadcast_to(weights.sum(axis=0), (len(rows), weights.shape[1])).copy()
    step = max(1, cells_per_chunk // max(mask.shape[1], 1))
    return np.concatenate([mask[rows[start:start + step]].astype(np.float64) @ weights
                           for start in range(0, len(rows), step)], axis=0)


def guessing_complete_data_share(result: em.MarginalResult, spec: mdl.ModelSpec, mask: np.ndarray) -> np.ndarray | None:
    """Per free item, the complete-data share of the precision of its logit c (cheap: no covariance needed):
    w_i = 1 - tau_i [(J_i + T_i)^{-1}]_cc, with J_i the expected complete-data (Fisher) information of the item's
    (log a, d, logit c) at its estimate, with the abilities at the nodes weighted by the examinees' posteriors,

        J_i = sum_q n_iq g_iq g_iq' / (P_iq (1 - P_iq)),  n_iq = sum_{m answered i} w_mq,
        g = dP/d(log a, d, logit c) = ((1 - c) s (1 - s) a theta_q, (1 - c) s (1 - s), c (1 - c) (1 - s)),

    P = c + (1 - c) s, s = sigmoid(a theta_q + d), T_i the item prior's precisions (diagonal) and tau_i = T_i,cc.
    Larger than :func:`guessing_data_share` (it knows each examinee's ability to the posterior over the nodes,
    not to the uncertainty that adds). None without free guessing or item priors."""
    if not spec.free_guessing or spec.item_prior == "none" or "c" not in result.columns:
        return None
    rows = np.flatnonzero(result.layout.free_rows)
    if rows.size == 0:
        return None
    X = np.asarray(result.X, dtype=np.float64)[rows]
    columns = result.columns
    nodes = np.asarray(result.nodes, dtype=np.float64)
    n = expected_node_counts(mask, rows, result.weights)                                             # (I, Q)
    log_a = X[:, columns.index("a")] if "a" in columns else np.zeros(len(rows))
    a, d, c = np.exp(log_a), X[:, columns.index("d")], 1.0 / (1.0 + np.exp(-X[:, columns.index("c")]))
    s = 1.0 / (1.0 + np.exp(-(a[:, None] * nodes[None, :] + d[:, None])))                          # (I, Q)
    p = c[:, None] + (1.0 - c[:, None]) * s
    slope = (1.0 - c[:, None]) * s * (1.0 - s)
    gradients = {"a": slope * a[:, None] * nodes[None, :], "d": slope, "c": (c * (1.0 - c))[:, None] * (1.0 - s)}
    g = np.stack([gradients[name] for name in columns], axis=-1)                                      # (I, Q, p)
    information = np.einsum("iq,iqj,iqk->ijk", n / np.maximum(p * (1.0 - p), 1e-300), g, g)
    items = {name: X[:, j] for j, name in enumerate(columns)}
    hyper = {k: float(np.asarray(v)) for k, v in result.hyper.items()}
    precision = mdl.item_prior_terms(items, spec, xp=np, hyper=hyper)[1]
    prior = np.stack([np.broadcast_to(np.asarray(precision[name], dtype=np.float64), (len(rows),)) for name in columns],
                     axis=-1)
    total = information + prior[:, :, None] * np.eye(len(columns))[None]
    total = np.where(np.isfinite(total), total, 0.0) + 1e-9 * np.eye(len(columns))[None]
    variance = np.linalg.pinv(total, hermitian=True)[:, columns.index("c"), columns.index("c")]
    return np.clip(1.0 - prior[:, columns.index("c")] * variance, 0.0, 1.0)


# guessing_centre="auto" (the default of em under item_prior="hierarchical"): the c prior's centre is learned only
# where the data can inform it, else held at 1 / n_choices. Measured (simulate's c, around 1/4; 3 replications,
# seed 300, experiments/marginal_recovery.py with guessing_centre="learned"): the learned centre's mean c bias is
# -0.11 at 60 responses per item (200 x 60), -0.065 at 150, -0.017 at 300, -0.008 at 500, 0.00 from 800, while a
# centre held at 1/4 is off by +0.057-0.061 wherever the true guessing averages 0.175 (c ~ U(0.05, 0.3)). On exams
# nearly everyone gets right the learned centre drifts (40 x 1000, true c 0.2, proportion correct 0.91-0.96: mean c
# 0.26-0.40 with complete-data shares 0.03-0.06; 0.78-0.87: 0.185-0.239, shares 0.07-0.19). A 10% share threshold
# held the form of an abler linking group (share under 0.10 learned, 0.19 held) and split two forms' treatment; 5% does
# not, and still holds the exams where the centre drifted furthest (0.40 at 0.04).
GUESSING_CENTRE_MIN_RESPONSES = 300
GUESSING_CENTRE_MIN_SHARE = 0.05


def guessing_centre_by_size(spec: mdl.ModelSpec, mask: np.ndarray) -> tuple[mdl.ModelSpec, str | None]:
    """The first half of guessing_centre="auto": the c prior's centre stays learned when the median item has at
    least :data:`GUESSING_CENTRE_MIN_RESPONSES` observed responses, else it is held at 1 / n_choices. Returns the
    spec and the reason (None where there is no learned c centre to decide on)."""
    if not spec.free_guessing or spec.guessing_centre != "learned":
        return spec, None
    median = float(np.median(np.asarray(mask).sum(axis=1)))
    if median < GUESSING_CENTRE_MIN_RESPONSES:
        return (replace(spec, learn_c_centre=False),
                f"held at 1/{spec.n_choices}: a median of {median:.0f} responses per item, fewer than "
                f"{GUESSING_CENTRE_MIN_RESPONSES} (guessing_centre='auto')")
    return spec, f"learned: a median of {median:.0f} responses per item (guessing_centre='auto')"
