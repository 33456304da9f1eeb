"""How many AMIP questions of a varying-intercept model with predictors the draws decide,
with and without the model recovered from them, each "reached" checked by an exact refit.

The model: ``y ~ N(alpha[g] + x . beta, sigma)``, ``alpha ~ N(mu, tau)``, flat priors; the
data 24 groups of 10, a normal and a 0/1 predictor, t(4) noise
(``tests/helpers/hierarchy_gibbs.py``: ``simulate_with_predictors``); 4 x 1000 exact Gibbs
draws saved as plain arrays (every ``alpha[g]`` a quantity, no group index). Six questions
a data set: each slope's and ``mu``'s sign and significance. A "reached" set is refitted
exactly (4 x 5000 Gibbs draws without it) and refuted where the metric does not cross; a
"not reachable" answer's set (the best of the limit's size it found) likewise, refuted
where it crosses (a check of that set, not of every set of that size). An
"undetermined" answer whose size interval starts above 1 has its set one short of that
low end refitted too, its low end refuted where that set reaches.
``--without-model`` answers as bayesij did before stop 119 (the varying-intercept model
not recovered: only the influences and their checks); ``--without-laplace`` with the
model but its removals only by reweighting the draws (the first commit of stop 119).

Run: ``python benchmarks/amip_hierarchy_slopes.py [--seeds 1 2 ...] [--without-model]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "helpers"))
from hierarchy_gibbs import metric_after, posterior_with_slopes, simulate_with_predictors  # noqa: E402

import bayesij  # noqa: E402
from bayesij.array.amip import goal_for  # noqa: E402

QUESTIONS = [(q, t) for q in ("beta[1]", "beta[2]", "mu") for t in ("sign", "significance")]


def run(seed: int) -> list:
    """Each question's line: the answer, its size interval, whether the recovered model
    decided it, seconds and, for "reached", the exact refit's metric before and after."""
    y, group, x = simulate_with_predictors(24, 10, seed)
    post = posterior_with_slopes(y, group, x, 100 + seed)
    names = list(post.quantity_names)
    draws = post.quantities.values
    rows = []
    for name, target in QUESTIONS:
        start = time.perf_counter()
        result = bayesij.amip(post, name, target)
        row = {
            "question": f"{name} {target}",
            "answer": result.answer,
            "n_drop": result.n_drop,
            "sizes": result.size_interval,
            "by_model": bool(result.decided_by),
            "decided_by": result.decided_by,
            "seconds": time.perf_counter() - start,
            "refuted": None,
        }
        if result.answer in ("reached", "not reachable"):
            goal = goal_for(draws[..., names.index(name)], target, 1.96)
            dropped = np.flatnonzero(result.kept == 0)
            after = metric_after(y, group, dropped, name, goal.sign, x=x)
            row["refit"] = (metric_after(y, group, [], name, goal.sign, x=x), after)
            crossed = goal.direction * after > 0
            row["refuted"] = crossed != (result.answer == "reached")
        elif result.size_interval[0] > 1:  # the set one short of the low end: not reaching?
            goal = goal_for(draws[..., names.index(name)], target, 1.96)
            short = np.asarray(result.drop_ids[: int(result.size_interval[0]) - 1], dtype=int)
            after = metric_after(y, group, short, name, goal.sign, x=x)
            row["refit"] = (metric_after(y, group, [], name, goal.sign, x=x), after)
            row["low_refuted"] = bool(goal.direction * after > 0)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 13)))
    parser.add_argument("--without-model", action="store_true")
    parser.add_argument("--without-laplace", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.without_model:
        from bayesij.stats import amip as stats_amip

        stats_amip.recover_hierarchy = lambda *a, **k: None
    if args.without_laplace:
        from bayesij.stats import amip as stats_amip

        stats_amip.laplace_hierarchy = lambda *a, **k: None
    totals = dict(questions=0, decided=0, by_model=0, laplace=0, refuted=0, low_checked=0)
    totals["low_refuted"] = 0
    for seed in args.seeds:
        for row in run(seed):
            line = f"seed {seed:2d} {row['question']:22s} {row['answer']:14s} {row['n_drop']:3d}"
            line += f" {row['sizes']} {'model' if row['by_model'] else '':5s} {row['seconds']:.1f}s"
            if row["refuted"] is not None:
                before, after = row["refit"]
                line += f"  refit {before:+.4f} -> {after:+.4f}"
                line += " REFUTED" if row["refuted"] else " confirmed"
                totals["laplace"] += "Laplace" in row["decided_by"]
            elif "low_refuted" in row:
                before, after = row["refit"]
                line += f"  one short of the low end: refit {before:+.4f} -> {after:+.4f}"
                line += " LOW END REFUTED" if row["low_refuted"] else " short, as said"
                totals["low_checked"] += 1
                totals["low_refuted"] += row["low_refuted"]
            print(line, flush=True)
            totals["questions"] += 1
            totals["decided"] += row["answer"] in ("reached", "not reachable")
            totals["by_model"] += row["by_model"]
            totals["refuted"] += bool(row["refuted"])
    print(bayesij.__version__, totals)


if __name__ == "__main__":
    main()
