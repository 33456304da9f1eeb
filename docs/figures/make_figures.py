"""Draw the figures of the workflow plots into docs/figures/ (run from the
repository root: ``python docs/figures/make_figures.py``; about 10 s). The same calls are
in docs/guide/plots.md; tests/report/test_plots.py checks what each figure shows."""

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.stats import norm  # noqa: E402

import bayesij  # noqa: E402
from bayesij import plots  # noqa: E402

HERE = Path(__file__).parent


def main() -> None:
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    n = 150
    y = rng.normal(0, 1.5, n)  # the model below predicts with sd 1: too narrow
    mu = rng.normal(0, 0.1, (4, 500, 1))
    log_lik = norm.logpdf(y, mu, 1.0)
    y_rep = mu + rng.normal(size=(4, 500, n))
    fig, axes = plt.subplots(2, 2, figsize=(15, 8))
    plots.plot_loo_pit(bayesij.loo_pit(log_lik, y, y_rep), ax=axes[0, 0])
    low, high = (
        bayesij.loo_expectation(log_lik, y_rep, kind="quantile", prob=p)["value"]
        for p in (0.05, 0.95)
    )
    plots.plot_loo_intervals(y, low, high, ax=axes[0, 1])
    fits = {f"sd {s}": bayesij.loo(norm.logpdf(y, mu, s)) for s in (1.0, 1.3, 1.5, 1.7)}
    plots.plot_compare(bayesij.compare(fits), ax=axes[1, 0])
    prob = rng.uniform(size=400)
    outcome = (rng.uniform(size=400) < prob**1.5).astype(float)  # overconfident forecasts
    plots.plot_calibration(bayesij.calibration(outcome, prob), ax=axes[1, 1])
    fig.tight_layout()
    fig.savefig(HERE / "workflow_plots.png", dpi=80)


if __name__ == "__main__":
    main()
