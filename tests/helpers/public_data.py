"""Real data sets (public domain, as statsmodels 0.15 ships them: tests/reference/public_data)
as a regression's design and response, for AMIP answers checked against exact refits."""

from __future__ import annotations

from pathlib import Path

import numpy as np

FOLDER = Path(__file__).parents[1] / "reference" / "public_data"

#: The RAND Health Insurance Experiment's covariates (Cameron & Trivedi 2005).
RANDHIE = ["lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp"]
#: State crime 2009: the murder rate against these (and an intercept).
STATECRIME = ["poverty", "hs_grad", "urban", "single"]
#: Travel mode choice (Greene): whether a traveller chose the mode, against its terminal
#: time, in-vehicle cost, generalised cost, the household's income and the party's size.
MODECHOICE = ["ttme", "invc", "gc", "hinc", "psize"]
#: Brownlee's stack loss: an ammonia plant's loss against air flow, cooling water
#: temperature and acid concentration (21 days).
STACKLOSS = ["AIRFLOW", "WATERTEMP", "ACIDCONC"]
#: Longley's employment regression (1947-1962), NIST's test of least squares' accuracy:
#: total employment against the GNP deflator, GNP, unemployment, armed forces, population
#: and the year, nearly collinear.
LONGLEY = ["GNPDEFL", "GNP", "UNEMP", "ARMED", "POP", "YEAR"]


def design(file: str, response: str, covariates: list) -> tuple[np.ndarray, np.ndarray]:
    """A data set's design (an intercept and ``covariates``, in that order) and response."""
    import pandas as pd

    frame = pd.read_csv(FOLDER / file)
    X = np.column_stack([np.ones(len(frame)), frame[covariates].to_numpy(dtype=float)])
    return X, frame[response].to_numpy(dtype=float)


def autoregression(file: str, column: str, lags: int) -> tuple[np.ndarray, np.ndarray]:
    """A series' autoregression of order ``lags`` as a regression (conditional on the
    first ``lags`` values): the design (an intercept and the lagged values, lag 1 first)
    and the response, one row per later value."""
    import pandas as pd

    series = pd.read_csv(FOLDER / file)[column].to_numpy(dtype=float)
    lagged = [series[lags - j : series.size - j] for j in range(1, lags + 1)]
    return np.column_stack([np.ones(series.size - lags), *lagged]), series[lags:]


def row_of(file: str, label: str, column: str = "state") -> int:
    """The position of the row whose ``column`` is ``label``."""
    import pandas as pd

    return int(np.flatnonzero(pd.read_csv(FOLDER / file)[column].to_numpy() == label)[0])
