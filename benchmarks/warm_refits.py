"""Warm-started short refits against cold full refits (PyStan).

A refit in an AMIP or LOO campaign is the same model on nearly the same data, so its chains
could start where the full fit's ended (``refit.stan_inits``) and adapt in a short
warm-up. This measures what that saves and whether it agrees:

- ``schools``: eight schools (non-centred: tau's funnel), each of three schools left out;
- ``wells``: a wells-like logistic regression (N = 400), without the set AMIP finds for
  education's significance and without 5 % and 10 % of the households at random.

Each set is refitted cold twice (Stan's random starts, 1000 warm-up iterations, two
seeds: the Monte Carlo spread to expect) and warm (the full fit's last draws, 100 and 200
warm-up iterations), 4 chains x 1000 draws each. Columns: seconds per refit; the largest
difference of a posterior mean from the first cold refit's, in posterior sds; the range
of the sd ratios (the backend refuses a refit with divergent transitions in more than 1 %
of its draws).

PyStan keeps every fit in httpstan's cache and returns the cached fit for the same
program, data, seed and settings: a run draws its seeds from the clock (``--seed`` to
fix them), so that a second run times sampling, not the cache.

Run: ``python benchmarks/warm_refits.py [--models schools wells] [--seed S]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import bayesij
from bayesij import refit
from bayesij.stan_models import example_data

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "helpers"))
import logistic_amip as logistic  # noqa: E402

WARM_UPS = (100, 200)


def schools():
    data = example_data("eight_schools")
    sets = {f"school {j + 1}": [j] for j in (0, 2, 6)}
    return "eight_schools", data, ["mu", "tau", "theta[1]"], sets, None


def wells():
    X, y = logistic.wells_like(400, 3)
    data = {"N": y.size, "K": 3, "X": X[:, 1:], "y": y.astype(int), "weights": np.ones(y.size)}
    rng = np.random.default_rng(0)
    sets = {
        f"random {share:.0%}": rng.choice(y.size, int(share * y.size), False)
        for share in (0.05, 0.10)
    }
    return "logistic_regression", data, ["alpha", "beta[1]", "beta[2]", "beta[3]"], sets, "beta[3]"


MODELS = {"schools": schools, "wells": wells}


def _refit(backend, weights):
    start = time.perf_counter()
    post = backend.fit(weights)
    seconds = time.perf_counter() - start
    return post, seconds


def _draws(post, names):
    return np.column_stack([post.quantities.sel(quantity=n).values.reshape(-1) for n in names])


def _row(label, size, reference, other, seconds):
    shift = np.abs(other.mean(0) - reference.mean(0)) / reference.std(0)
    ratio = other.std(0) / reference.std(0)
    return (
        f"| {label} | {size} | {seconds:.2f} | {shift.max():.3f} | "
        f"{ratio.min():.2f}-{ratio.max():.2f} |"
    )


def run(name: str, seed: int) -> None:
    model, data, names, sets, amip_quantity = MODELS[name]()
    n_obs = len(data["weights"])
    full = refit.PyStanBackend(model, data, seed=seed).fit(np.ones(n_obs))
    if amip_quantity is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = bayesij.amip(full, amip_quantity, "significance")
        positions = {label: i for i, label in enumerate(full.obs_names)}
        sets = {"AMIP set": [positions[i] for i in found.drop_ids], **sets}
    inits = refit.stan_inits(full)
    print(f"\n{name} ({model}, N = {n_obs})")
    print("| refit | dropped | s | max |Δmean| / sd | sd ratio |")
    print("|---|---|---|---|---|")
    for label, dropped in sets.items():
        weights = np.ones(n_obs)
        weights[np.asarray(dropped, dtype=int)] = 0.0
        runs = {
            "cold": refit.PyStanBackend(model, data, seed=seed + 1),
            "cold, other seed": refit.PyStanBackend(model, data, seed=seed + 2),
        }
        for warm_up in WARM_UPS:
            runs[f"warm, {warm_up} warm-up"] = refit.PyStanBackend(
                model, data, seed=seed + 3, init=inits, num_warmup=warm_up
            )
        reference = None
        for kind, backend in runs.items():
            post, seconds = _refit(backend, weights)
            draws = _draws(post, names)
            reference = draws if reference is None else reference
            print(_row(f"{label}: {kind}", len(dropped), reference, draws, seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=sorted(MODELS))
    parser.add_argument("--seed", type=int, default=None, help="default: from the clock")
    args = parser.parse_args()
    seed = int(time.time()) % 100_000 if args.seed is None else args.seed
    print(f"bayesij {bayesij.__version__}, seeds from {seed}")
    for name in args.models:
        run(name, seed)


if __name__ == "__main__":
    main()
