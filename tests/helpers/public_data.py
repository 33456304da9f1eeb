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


def design(file: str, response: str, covariates: list) -> tuple[np.ndarray, np.ndarray]:
    """A data set's design (an intercept and ``covariates``, in that order) and response."""
    import pandas as pd

    frame = pd.read_csv(FOLDER / file)
    X = np.column_stack([np.ones(len(frame)), frame[covariates].to_numpy(dtype=float)])
    return X, frame[response].to_numpy(dtype=float)


def row_of(file: str, label: str, column: str = "state") -> int:
    """The position of the row whose ``column`` is ``label``."""
    import pandas as pd

    return int(np.flatnonzero(pd.read_csv(FOLDER / file)[column].to_numpy() == label)[0])
