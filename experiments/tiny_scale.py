"""Why held-out abilities scored from a whole calibrated bank have slope below 1 on the truth (issue 40).

On the simulated leaderboards of docs/guide/tiny.md the five folds of ``irtexam tiny validate --splits 5``
(200 models calibrate with ``--method map``, 50 are held out) are checked step by step against the generating
parameters on the **sample-standardised scale** of the calibrating models, the scale the joint mode reports
(their fitted abilities have mean 0 and sd 1): m, s the mean and sd (ddof 0) of the calibrating models' true
abilities, theta* = (theta - m) / s, a* = a s, b* = (b - m) / s, c* = c.

(a) the calibrating models: slope of their fitted abilities on theta* (OLS, fitted on true), and the line
    ``truth_on_bank_scale`` uses against plain standardisation (its slope beta times s; 1 = the same map);
(b) the items: geometric-mean ratio a_hat / a* of the fit's slopes (``fit``) and of the empirical-Bayes slopes
    that ``irtexam tiny`` scores with (``EB``), the slope of b_hat on b*, mean c_hat - c; and ``a_ML|theta*``:
    the same ratio for each item's own maximum-likelihood slope given the calibrating models' TRUE abilities
    theta* (c fixed at the truth; a logistic regression on 200 points per item: its small-sample bias), and the
    fit's ratio within quartiles of a* (a prior on log a pulls the imprecise low slopes up the most);
(c) scoring: the slope on theta* of abilities scored (EAP, N(0, 1) prior, as ``score_models``) from all the
    bank's items, for the held-out models and for the calibrating models themselves (in-sample), with the
    fit's items, the EB items, and the true items on the sample scale (no calibration error); the held-out
    slope also with the true b (c) and, as slopes, the fit's, the true ones times the fit's mean ratio (its
    uniform part), the fit's divided by it (its noise and spread), or the ML ones given theta*; ``in-sample
    MLE/fit``: the slope of the calibrating models' maximum-likelihood abilities given the fit's own items on
    their fitted abilities (1 if the joint mode's abilities were the likelihood's given its items);
(d) direction: the code regresses the estimate on the truth (unbiased for an unbiased estimator whatever its
    noise); the reverse regression, truth on estimate, is printed for comparison.

    python experiments/tiny_scale.py --model 2pl            # 250 x 3,000, five folds
    python experiments/tiny_scale.py --model 3pl --examinees 1000 --items 5000 --folds 1
    python experiments/tiny_scale.py --model 3pl --method auto      # the c prior's centre held (fit's leaderboard rule)
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd


def item_ml_slopes(y: np.ndarray, theta: np.ndarray, c: np.ndarray | None, steps: int = 50) -> np.ndarray:
    """Each item's maximum-likelihood slope a given known abilities ``theta`` (E,) and guessing ``c`` (I,) or
    None: P = c + (1 - c) sigma(a theta + d), Fisher scoring on (a, d) for all items at once (y: (E, I), 0/1).
    Items whose fit diverges (|a| > 20) come back NaN."""
    n_items = y.shape[1]
    guess = np.zeros(n_items) if c is None else np.asarray(c, float)
    a, d = np.ones(n_items), np.zeros(n_items)
    x = np.stack([theta, np.ones_like(theta)], axis=1)                     # (E, 2)
    for _ in range(steps):
        s = 1.0 / (1.0 + np.exp(-(theta[:, None] * a + d)))
        p = np.clip(guess + (1 - guess) * s, 1e-9, 1 - 1e-9)
        dp = (1 - guess) * s * (1 - s)                                      # dP / d eta
        r = (y - p) * dp / (p * (1 - p))                                    # score per cell, d / d eta
        w = dp ** 2 / (p * (1 - p))                                         # Fisher weight per cell
        g = x.T @ r                                                         # (2, I)
        h = np.einsum("ek,el,ei->ikl", x, x, w)                             # (I, 2, 2)
        step = np.linalg.solve(h, g.T[..., None])[..., 0]
        a, d = a + np.clip(step[:, 0], -1, 1), d + np.clip(step[:, 1], -1, 1)
    return np.where(np.abs(a) < 20, a, np.nan)


def slope(y: np.ndarray, x: np.ndarray) -> float:
    """OLS slope of y on x."""
    xc = x - x.mean()
    return float(xc @ (y - y.mean()) / (xc @ xc))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="2pl", choices=("2pl", "3pl"))
    parser.add_argument("--examinees", type=int, default=250)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--folds", type=int, default=5, help="how many of the five folds to run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--method", default="map", choices=("map", "auto"),
                        help="the calibration's estimator: map (as the guide's commands) or auto (the joint mode too on "
                             "these shapes, with the 3PL's c prior centre held at 1 / n_choices)")
    args = parser.parse_args()

    import irtexam
    from irtexam.bank.tiny import TinyBank, score_models
    from irtexam.bank.tiny_check import split_models, truth_on_bank_scale
    from irtexam.irt import kinds
    from irtexam.irt.simulate import simulate

    rm, truth = simulate(args.items, args.examinees, model=args.model, seed=args.seed)   # `irtexam simulate`'s table
    theta = pd.Series(np.asarray(truth["theta"]), index=list(rm.examinees))
    position = {item: j for j, item in enumerate(rm.items)}
    rows = []
    for r, (train, test) in enumerate(split_models(list(rm.examinees), 0.2, 0, 5)[:args.folds]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = irtexam.fit(rm.subset(examinees=train), model=args.model, method=args.method, seed=0,
                                 progress=False, draws=50)
        raw, bank = TinyBank.coerce(fitted, shrink=False), TinyBank.coerce(fitted)
        order = [position[i] for i in bank.ids]
        t_train, t_test = theta.reindex(train).to_numpy(), theta.reindex(test).to_numpy()
        m, s = t_train.mean(), t_train.std()
        z_train, z_test = (t_train - m) / s, (t_test - m) / s
        a_star = np.asarray(truth["a"])[order] * s
        b_star = (np.asarray(truth["b"])[order] - m) / s
        c_true = None if truth.get("c") is None else np.asarray(truth["c"])[order]
        fit_theta = fitted.examinees["theta"].reindex(train).to_numpy(float)

        def answers(models: list[str]) -> pd.DataFrame:
            held = rm.subset(items=list(bank.ids), examinees=models)
            return pd.DataFrame(held.values.T, index=list(held.examinees), columns=list(held.items))

        w_train, w_test = answers(train), answers(test)
        y_train = w_train.to_numpy(float)
        ml = item_ml_slopes(y_train, z_train, c_true)
        ratio = {name: float(np.exp(np.nanmean(np.log(np.asarray(a) / a_star))))
                 for name, a in (("fit", raw.params.a), ("EB", bank.params.a), ("ML|theta*", ml))}
        true_bank = TinyBank(bank.ids, kinds.ItemParams(a_star, b_star, c_true))
        row = {"fold": r,
               "(a) calibrating: fitted on theta*": slope(fit_theta, z_train),
               "(a) truth_on_bank_scale beta x s": slope(fit_theta, t_train) * s,
               "(a) truth_on_bank_scale vs theta*, max |diff|":
                   float(np.max(np.abs(truth_on_bank_scale(theta, fitted.examinees["theta"], test).to_numpy()
                                       - z_test))),
               "(b) a ratio fit": ratio["fit"], "(b) a ratio EB": ratio["EB"],
               "(b) a ratio ML|theta*": ratio["ML|theta*"],
               "(b) b slope fit": slope(np.asarray(raw.params.b), b_star)}
        if args.model == "3pl":
            row["(b) c bias fit"] = float(np.mean(np.asarray(raw.params.c) - c_true))
        quartile = np.asarray(pd.qcut(a_star, 4, labels=False))
        for q in range(4):
            row[f"(b) a ratio fit, a* quartile {q + 1}"] = float(np.exp(np.mean(np.log(np.asarray(raw.params.a)
                                                                                      / a_star)[quartile == q])))
        g = ratio["fit"]
        ml_a = np.where(np.isfinite(ml), ml, a_star)
        scorings = {"fit items": raw, "EB items": bank, "true items": true_bank}
        for name, a_used in (("fit a, true b c", raw.params.a), ("true a x fit's ratio, true b c", a_star * g),
                             ("fit a / its ratio, true b c", np.asarray(raw.params.a) / g),
                             ("ML|theta* a, true b c", ml_a)):
            scorings[name] = TinyBank(bank.ids, kinds.ItemParams(np.asarray(a_used, float), b_star, c_true))
        for name, scoring in scorings.items():
            held = score_models(scoring, w_test, misfit=False)["theta"].reindex(test).to_numpy()
            row[f"(c) held-out, {name}"] = slope(held, z_test)
            if name in ("fit items", "EB items", "true items"):
                own = score_models(scoring, w_train, misfit=False)["theta"].reindex(train).to_numpy()
                row[f"(c) in-sample, {name}"] = slope(own, z_train)
        mle = score_models(raw, w_train, misfit=False, estimator="wle", prior_sd=1.0)["theta"].reindex(train)
        row["(c) in-sample WLE/fit, fit items"] = slope(mle.to_numpy(), fit_theta)
        eap = score_models(bank, w_test, misfit=False)["theta"].reindex(test).to_numpy()
        row["(d) reverse: theta* on held-out EAP"] = slope(z_test, eap)
        rows.append(row)
        print(f"fold {r + 1}: held-out slope (EB items) {row['(c) held-out, EB items']:.4f}", flush=True)
    table = pd.DataFrame(rows).drop(columns="fold")
    print(f"{args.examinees} x {args.items} {args.model.upper()}, --method {args.method} ({fitted.method}), {len(rows)} fold(s) of "
          f"{len(train)} calibrating / {len(test)} held-out models; mean (min, max) over folds")
    print(pd.DataFrame({"mean": table.mean(), "min": table.min(), "max": table.max()}).round(4).to_string())


if __name__ == "__main__":
    main()
