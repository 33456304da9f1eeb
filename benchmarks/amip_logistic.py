"""AMIP beyond first order on a logistic regression: the answers against exact refits.

Data: a wells-like logistic regression (N = 3020, an intercept and three covariates;
tests/helpers/logistic_amip.py), the flat-prior posterior drawn exactly in distribution
(4 x 1000 draws per set, independence Metropolis-Hastings) several times. References: the
estimating-equation AMIP iterated over exact (weighted-MLE) refits, and the exact refit
along each reported ranking. For each question and set of draws: the draws-only answer
(plain influences and control variates from the log posterior's gradient), its set and
95 % size interval, whether the exact refit confirms a "reached" set, whether a "not
reachable" target is in fact reachable, whether the size interval holds the smallest
refit-confirmed set; then refits in the loop (a backend of the same model, 6 refits).
No peer library runs AMIP in Python (zaminfluence is R and OLS/IV only).

Run: ``python benchmarks/amip_logistic.py [--seeds 4] [--refits]``. Runs on older bayesij
versions too (fields they lack are shown as "-"), for before/after tables.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import bayesij
from common import amip_gradient

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "helpers"))
from logistic_amip import (  # noqa: E402
    NAMES,
    QUESTIONS,
    LogisticBackend,
    crosses,
    ee_amip,
    exact_prefix,
    log_lik,
    sample,
    wells_like,
)

SHORT = {"sign": "sign", "significance": "signif", "sign_and_significance": "sign&signif"}


def _size(value) -> str:
    return "inf" if not np.isfinite(value) else f"{value:.0f}"


def _answer(result) -> str:
    low, high = result.size_interval if result.size_interval else (np.nan, np.nan)
    bound = " (bound)" if getattr(result, "upper_bound", 0) else ""
    return f"{result.answer} {result.n_drop}{bound} [{_size(low)}-{_size(high)}]"


def _defects(result, X, y, k, target, reference) -> list[str]:
    """What an exact refit says is wrong with an answer."""
    ids = np.array(result.drop_ids, dtype=int)
    out = []
    if result.answer == "reached" and not crosses(X, y, ids, k, target):
        out.append("REFUTED")
    if result.answer == "not reachable" and reference is not None:
        out.append("FALSE NOT REACHABLE")
    if result.answer == "reached":
        exact = exact_prefix(X, y, ids, k, target)
        smallest = min(v for v in (reference, exact) if v is not None)
        low, high = result.size_interval
        if not (low <= smallest and exact <= high):
            out.append(f"INTERVAL MISSES {smallest}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--refits", action="store_true", help="also refits in the loop")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    X, y = wells_like(3020, seed=0)
    references = {}
    for k, target in QUESTIONS:
        found, _ = ee_amip(X, y, k, target)
        greedy, _ = ee_amip(X, y, k, target, iterate=False)
        references[(k, target)] = (
            None if found is None else len(found),
            None if greedy is None else len(greedy),
        )
    print(f"bayesij {bayesij.__version__}; N = {y.size}, 4 x 1000 draws per set")
    print("question        | EE-AMIP iterated / greedy | seed | plain | control variates")
    defects = {"plain": 0, "control variates": 0}
    counts = {"plain": {}, "control variates": {}}
    for seed in range(1, args.seeds + 1):
        beta, grad = sample(X, y, seed=seed)
        post = bayesij.from_arrays(beta, log_lik(X, y, beta), quantity_names=NAMES)
        for k, target in QUESTIONS:
            iterated, greedy = references[(k, target)]
            cells = []
            for how, extra in (
                ("plain", {}),
                ("control variates", amip_gradient(grad, beta)),
            ):
                result = bayesij.amip(post, NAMES[k], target, **extra)
                found = _defects(result, X, y, k, target, iterated)
                defects[how] += len(found)
                counts[how][result.answer] = counts[how].get(result.answer, 0) + 1
                cells.append(_answer(result) + (" " + ", ".join(found) if found else ""))
            print(
                f"{NAMES[k]} {SHORT[target]:11s} | {iterated} / {greedy} | {seed} | "
                + " | ".join(cells)
            )
    print(f"answers: {counts}")
    print(f"defects (refuted, false not reachable, interval misses): {defects}")
    if args.refits:
        _refits(X, y, references)


def _refits(X, y, references) -> None:
    """Refits in the loop from the first set of draws (control variates), 6 refits."""
    beta, grad = sample(X, y, seed=1)
    post = bayesij.from_arrays(beta, log_lik(X, y, beta), quantity_names=NAMES)
    backend = LogisticBackend(X, y, seed=101)
    print("refits in the loop (6): question | EE-AMIP iterated | set | +% | refits | s")
    for k, target in QUESTIONS:
        start = time.perf_counter()
        result = bayesij.amip(
            post,
            NAMES[k],
            target,
            backend=backend,
            max_refits=6,
            **amip_gradient(grad, beta),
        )
        seconds = time.perf_counter() - start
        iterated = references[(k, target)][0]
        excess = 100 * (result.n_drop / iterated - 1) if iterated else float("nan")
        print(
            f"{NAMES[k]} {SHORT[target]:11s} | {iterated} | {result.answer} {result.n_drop} | "
            f"{excess:+.1f} | {len(result.refits)} | {seconds:.0f}"
        )


if __name__ == "__main__":
    main()
