#!/usr/bin/env python3
"""Where the joint mode puts a 3PL with thousands of models (issue 42): a weakly identified ridge, not a solver fault.

The default fit of a leaderboard-shaped 3PL (``method="auto"``: the joint mode, c centre learned by the
empirical-Bayes equation) recovers slopes x1.04 and b slopes 0.97 with 2,211 models, although with the abilities
given (``--known-theta``) the same item step recovers the items (12,032 x 2,211: x1.006, c +0.0002). This script runs
the package's own alternating sweeps (``irtexam.irt.alternating.item_step`` / ``theta_step``, no extrapolation) for a
fixed number of sweeps and prints the recovery on the sample-standardised truth scale (true abilities standardised by
their sample mean and sd, a* = a s, b* = (b - m) / s), so that each suspect can be switched on and off:

* ``--start truth``: the sweeps start at the generating values; if they drift away, the joint posterior's mode is
  not at the truth (it is not the solver stopping early);
* ``--kappa K``: the Beta prior's concentration on c (the model's c_concentration, 20 = simulate's Beta(5, 15));
* ``--log-a-scale S``: the sd of the prior on log a (the joint mode's 0.5; the marginal estimator uses 1.0);
* ``--ability-nodes Q``: the item step integrates each ability over N(mode, 1 / (Fisher + 1)) by Q Gauss-Hermite
  nodes (the option ``ModelSpec.ability_nodes``; with ``--log-a-scale 1`` it matches the marginal estimator)
  instead of plugging the mode in;
* ``--known-theta``: item steps only, the abilities held at the truth;
* ``--c-range LO,HI``: c ~ U(LO, HI) instead of simulate's Beta(5, 15) (a prior that is not the generating one);
* ``--learn-kappa R``: after every ``--sweeps`` sweeps kappa is re-set to the spread of the fitted c's (R rounds);
* ``--adjusted-score``: the item step's gradient gets the mean-bias-reducing adjustment of Kosmidis & Firth (2009)
  in (log a, d, logit c), A_r = 1/2 tr(G (P_r + Q_r)) with G the inverse of the item's Fisher information plus its
  prior precision; for a Bernoulli cell P_r + Q_r = p_r H / (p (1 - p)), H the Hessian of p in the parameters
  (:func:`adjusted_score`), so A_r = 1/2 sum_m w_m p_r,m tr(G H_m).

    python experiments/leaderboard_3pl_ridge.py --shape 12032x2211 --seed 0 --start truth --every 20
    python experiments/leaderboard_3pl_ridge.py --shape 12032x2211 --seed 0 --kappa 10     # 20, 40
    python experiments/leaderboard_3pl_ridge.py --shape 2000x1000 --seed 0 --log-a-scale 1 --ability-nodes 2
    python experiments/leaderboard_3pl_ridge.py --shape 2000x1000 --seed 0 --c-range 0,0.5 --kappa 40 --sweeps 150
    python experiments/leaderboard_3pl_ridge.py --shape 3000x200 --seed 1 --known-theta --sweeps 60 --adjusted-score

Results (2026-11-28) are in benchmarks/results/leaderboard_3pl_ridge.txt.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from marginal_recovery import true_on_sample_scale  # noqa: E402


def recovery(items: dict, theta: np.ndarray, star: dict) -> str:
    """Geometric-mean a ratio, slope of b_hat on b*, mean c error, slope of theta_hat on theta*, the c centre."""
    a = np.exp(np.asarray(items["a"], float))
    c = 1.0 / (1.0 + np.exp(-np.asarray(items["c"], float)))
    b = -np.asarray(items["d"], float) / a
    centre = 1.0 / (1.0 + np.exp(-float(items["mu_c"]))) if "mu_c" in items else float("nan")
    return (f"a x{np.exp(np.mean(np.log(a / star['a']))):.4f}  b slope {np.polyfit(star['b'], b, 1)[0]:.4f}  "
            f"c {np.mean(c - star['c']):+.4f}  theta slope {np.polyfit(star['theta'], np.asarray(theta, float), 1)[0]:.4f}"
            f"  c centre {centre:.4f}")


HESSIAN_PAIRS = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))


def adjusted_score(items: dict, theta, blocks, spec, prior_terms):
    """The bias-reducing adjustment (module doc) of every 3PL item's score in (log a, d, logit c), (I, 3).

    Per cell, with s = sigmoid(a theta + d), s1 = s (1 - s), s2 = s1 (1 - 2 s): p_loga = (1 - c) s1 a theta,
    p_d = (1 - c) s1, p_logitc = c (1 - c) (1 - s); H_aa = (1 - c)(s2 a^2 theta^2 + s1 a theta), H_ad = (1 - c) s2 a theta,
    H_dd = (1 - c) s2, H_ac = -c (1 - c) s1 a theta, H_dc = -c (1 - c) s1, H_cc = c (1 - c)(1 - 2 c)(1 - s)."""
    import jax
    import jax.numpy as jnp
    from irtexam.irt import cell_blocks as cb
    from irtexam.irt import model as mdl

    theta = theta[0] if theta.ndim == 2 else theta
    a, c = mdl.item_slopes_and_floors(items, spec)
    n_blocks, rows = blocks.shape[:2]

    def one(block):
        a_, c_, d_, y = block
        s, _, w, _ = cb._cell_terms(a_, c_, d_, theta, y)
        big_a, big_c, t = a_[:, None], c_[:, None], theta[None, :]
        s1 = s * (1 - s)
        s2 = s1 * (1 - 2 * s)
        p = [(1 - big_c) * s1 * big_a * t, (1 - big_c) * s1, big_c * (1 - big_c) * (1 - s)]
        h = [(1 - big_c) * (s2 * big_a * big_a * t * t + s1 * big_a * t), (1 - big_c) * s2 * big_a * t,
             (1 - big_c) * s2, -big_c * (1 - big_c) * s1 * big_a * t, -big_c * (1 - big_c) * s1,
             big_c * (1 - big_c) * (1 - 2 * big_c) * (1 - s)]
        sums = jnp.stack([jnp.stack([(w * p[r] * h[k]).sum(1) for k in range(6)], -1) for r in range(3)], -2)
        fisher = jnp.stack([jnp.stack([(w * p[r] * p[q]).sum(1) for q in range(3)], -1) for r in range(3)], -2)
        return sums, fisher

    sums, fisher = jax.lax.map(one, tuple(cb.blocked(x, n_blocks, rows) for x in (a, c, items["d"])) + (blocks,))
    sums, fisher = cb.unblocked(sums, a.shape[0]), cb.unblocked(fisher, a.shape[0])
    _, precision = prior_terms(items, spec)
    inverse = jnp.linalg.inv(fisher + jax.vmap(jnp.diag)(jnp.stack([precision[r] for r in ("a", "d", "c")], -1)))
    weights = jnp.stack([inverse[:, i, j] * (1.0 if i == j else 2.0) for i, j in HESSIAN_PAIRS], -1)
    return 0.5 * jnp.einsum("irk,ik->ir", sums, weights)


def em_kappa(items: dict, theta, blocks, spec) -> float:
    """The EM update of the c prior's concentration kappa, its mean m = sigmoid(mu_c) held: maximise
    sum_i kappa m E[log c_i] + kappa (1 - m) E[log(1 - c_i)] - I log B(kappa m, kappa (1 - m)) with the expectations
    under each item's Laplace posterior of u_i = logit c_i (mean u_i, variance V_i = [(F_i + P_i)^-1]_cc):
    E[log sigmoid(u)] ~ log s - V s (1 - s) / 2, E[log(1 - s)] ~ log(1 - s) - V s (1 - s) / 2. Newton in log kappa."""
    from scipy.special import betaln, digamma, polygamma
    from irtexam.irt import alternating as alt
    from irtexam.irt import cell_blocks as cb
    from irtexam.irt import model as mdl

    names = ("a", "d", "c")
    a, c = mdl.item_slopes_and_floors(items, spec)
    sums = cb.item_moments_over_abilities(a, c, items["d"], theta, blocks, True, spec.ability_nodes)
    info = alt.information_from_moments(a, c, sums.by_slope, sums.by_mixed, sums.by_guess, names)
    _, precision = mdl.item_prior_terms(items, spec)
    info = info + jax.vmap(jnp.diag)(jnp.stack([precision[r] for r in names], axis=-1))
    variance = np.asarray(jnp.linalg.inv(info)[:, 2, 2], float)
    s = 1.0 / (1.0 + np.exp(-np.asarray(items["c"], float)))
    half = 0.5 * variance * s * (1 - s)
    log_c, log_1c = np.mean(np.log(s) - half), np.mean(np.log1p(-s) - half)
    m = 1.0 / (1.0 + np.exp(-float(items["mu_c"])))
    kappa = spec.c_concentration
    for _ in range(50):
        g = m * log_c + (1 - m) * log_1c - (m * digamma(kappa * m) + (1 - m) * digamma(kappa * (1 - m)) - digamma(kappa))
        h = -(m * m * polygamma(1, kappa * m) + (1 - m) ** 2 * polygamma(1, kappa * (1 - m)) - polygamma(1, kappa))
        step = np.clip(g * kappa / (-(h * kappa * kappa) - g * kappa), -1.0, 1.0)   # Newton in log kappa (concave)
        kappa = float(kappa * np.exp(step))
        if abs(step) < 1e-8:
            break
    return kappa


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="2000x1000", help="items x models")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sweeps", type=int, default=120)
    parser.add_argument("--every", type=int, default=0, help="print every N sweeps (0: the last only)")
    parser.add_argument("--start", choices=("default", "truth"), default="default")
    parser.add_argument("--kappa", type=float, default=20.0)
    parser.add_argument("--log-a-scale", type=float, default=0.5)
    parser.add_argument("--ability-nodes", type=int, default=1)
    parser.add_argument("--known-theta", action="store_true")
    parser.add_argument("--fixed-c-centre", action="store_true",
                        help="hold the centre of the c prior at 1 / n_choices (0.25) instead of learning it")
    parser.add_argument("--c-centre-scale", type=float, default=1.0,
                        help="sd of the hyperprior of the c prior's centre, N(logit(1/4), sd^2) (the joint mode's 1)")
    parser.add_argument("--learn-a-centre", action="store_true",
                        help="learn the centre of the log a prior (mu_a), as the marginal estimator does")
    parser.add_argument("--learn-kappa", type=int, default=0, metavar="ROUNDS",
                        help="after each --sweeps sweeps set kappa to the spread of the fitted c's, m (1 - m) / var(c) - 1, "
                             "ROUNDS times (a moment estimate from the modes, as a joint mode learns a variance)")
    parser.add_argument("--em-kappa", type=int, default=0, metavar="ROUNDS",
                        help="after each --sweeps sweeps set kappa by an EM step under the items' Laplace posteriors "
                             "(expected log c and log (1 - c) with each logit c's posterior variance), ROUNDS times")
    parser.add_argument("--polish", type=int, default=0, metavar="SWEEPS",
                        help="after the joint sweeps, SWEEPS item steps with the abilities held and the log a centre "
                             "learned (the abilities' standardised scale then sets the slopes' level)")
    parser.add_argument("--polish-nodes", type=int, default=1, help="ability nodes of the polishing item steps")
    parser.add_argument("--adjusted-score", action="store_true",
                        help="add Kosmidis & Firth's bias-reducing adjustment to the item step's gradient")
    parser.add_argument("--c-range", default=None, metavar="LO,HI",
                        help="draw each item's c from U(LO, HI) (seed + 10,000, as marginal_recovery.py) instead of "
                             "simulate's Beta(5, 15)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    import irtexam
    from irtexam.irt import alternating as alt
    from irtexam.irt import cell_blocks as cb
    from irtexam.irt import model as mdl

    n_items, n_models = (int(x) for x in args.shape.split("x"))
    c_true = (np.random.default_rng(args.seed + 10_000).uniform(*map(float, args.c_range.split(",")), n_items)
              if args.c_range else None)
    responses, truth = irtexam.simulate(n_items, n_models, model="3pl", seed=args.seed, c=c_true)
    star = true_on_sample_scale(truth)
    spec = mdl.ModelSpec(kind="3pl", c_centre_rule="empirical", c_concentration=args.kappa,
                         log_a_scale=args.log_a_scale, learn_a_centre=args.learn_a_centre, ability_nodes=args.ability_nodes,
                         learn_c_centre=not args.fixed_c_centre, c_centre_scale=args.c_centre_scale)
    design = mdl.build_design(responses, spec)
    if list(design.items) != list(responses.items):
        raise SystemExit("the design reorders the items; this script compares them with the truth by position")
    init = mdl.initial_params(spec, design)
    dtype = jnp.float32
    blocks = jax.device_put(cb.response_blocks(design.y, design.mask, cb.rows_per_block(n_items, n_models)))
    items = {k: np.asarray(init[k], dtype) for k in ("a", "d", "c") + tuple(mdl.hyper_names(spec)) if k in init}
    raw = np.asarray(init["theta_raw"], float)
    theta = np.asarray((raw - raw.mean()) / raw.std(), dtype)
    if args.start == "truth" or args.known_theta:
        theta = np.asarray(star["theta"], dtype)
    if args.start == "truth":
        a, b, c = star["a"], star["b"], star["c"]
        items.update(a=np.log(a).astype(dtype), d=(-a * b).astype(dtype), c=np.log(c / (1 - c)).astype(dtype))
        items.update({k: dtype(np.mean(items[name])) for k, name in (("mu_c", "c"), ("mu_d", "d")) if k in items})

    if args.adjusted_score:
        plain_step, plain_prior_terms = alt.item_step, alt.item_prior_terms

        def adjusted_step(items, theta, blocks, spec, damping, previous):
            extra = adjusted_score(items, theta, blocks, spec, plain_prior_terms)

            def prior_terms(items_, spec_):
                gradient, precision = plain_prior_terms(items_, spec_)
                return {**gradient, **{n: gradient[n] + extra[:, k] for k, n in enumerate(("a", "d", "c"))}}, precision

            alt.item_prior_terms = prior_terms   # read while this step is traced
            try:
                return plain_step(items, theta, blocks, spec, damping, previous)
            finally:
                alt.item_prior_terms = plain_prior_terms

        alt.item_step = adjusted_step
    def compile_steps(spec):
        return (jax.jit(lambda i, t, b, d, p: alt.item_step(i, t, b, spec, d, p)),
                jax.jit(lambda i, t, b, d, p: alt.theta_step(i, t, b, spec, d, p)))

    item_step, theta_step = compile_steps(spec)

    damping, previous = np.ones(n_items, dtype), np.zeros((n_items, 3), dtype)
    theta_damping, theta_previous = np.ones(n_models, dtype), np.zeros(n_models, dtype)
    label = (f"{args.shape} seed {args.seed}{', c ~ U(' + args.c_range + ')' if args.c_range else ''}, start {args.start}, "
             f"kappa {args.kappa:g}{' learned' if args.learn_kappa else ''}, log a sd {args.log_a_scale:g}, "
             f"{args.ability_nodes} ability node(s){', abilities known' if args.known_theta else ''}"
             f"{', adjusted score' if args.adjusted_score else ''}")
    print(f"{label}\n  sweep 0: {recovery(items, theta, star)}", flush=True)
    started = time.perf_counter()
    sweep = 0
    for round_ in range(max(args.learn_kappa, args.em_kappa) + 1):
        if round_ and args.em_kappa:
            kappa = em_kappa(items, theta, blocks, spec)
            spec = replace(spec, c_concentration=kappa)
            item_step, theta_step = compile_steps(spec)
            print(f"  round {round_}: kappa {kappa:.2f}", flush=True)
        elif round_:
            c_hat = 1.0 / (1.0 + np.exp(-np.asarray(items["c"], float)))
            centre = float(np.mean(c_hat))
            spec = replace(spec, c_concentration=float(centre * (1 - centre) / np.var(c_hat) - 1.0))
            item_step, theta_step = compile_steps(spec)
            print(f"  round {round_}: kappa {spec.c_concentration:.1f}", flush=True)
        for _ in range(args.sweeps):
            sweep += 1
            items, damping, previous, moved = item_step(items, theta, blocks, damping, previous)
            largest = float(np.max(np.asarray(moved)))
            if not args.known_theta:
                items, theta, theta_damping, theta_previous, moved_theta = theta_step(items, theta, blocks,
                                                                                     theta_damping, theta_previous)
                largest = max(largest, float(moved_theta))
            if (args.every and sweep % args.every == 0) or sweep == args.sweeps * (round_ + 1):
                print(f"  sweep {sweep}: {recovery(items, theta, star)}  (largest move {largest:.4f} SE)", flush=True)
    if args.polish:
        polish_spec = replace(spec, learn_a_centre=True, ability_nodes=args.polish_nodes)
        polish_step = jax.jit(lambda i, t, b, d, p: alt.item_step(i, t, b, polish_spec, d, p))
        items = {**items, "mu_a": dtype(np.mean(np.asarray(items["a"], float)))}
        damping, previous = np.ones(n_items, dtype), np.zeros((n_items, 3), dtype)
        for k in range(args.polish):
            items, damping, previous, moved = polish_step(items, theta, blocks, damping, previous)
        print(f"  polished ({args.polish} item steps, abilities held, log a centre learned, {args.polish_nodes} node(s)):"
              f" {recovery(items, theta, star)}  mu_a {float(items['mu_a']):+.4f}  (largest move "
              f"{float(np.max(np.asarray(moved))):.4f} SE)", flush=True)
    print(f"  {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
