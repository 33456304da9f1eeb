"""The report's column definitions: every column of every table an audit prints is defined,
and only the table's own columns are given."""

import warnings

import numpy as np
import pandas as pd

import bayesij
from bayesij.report.columns import COLUMNS, column_definitions


def test_every_column_of_the_audit_s_own_tables_is_defined():
    # The tables the audit builds (standard errors, convergence, AMIP, linearity) define
    # every column; the peers' own layouts (estimates, the k-hat table, ranks) are theirs.
    rng = np.random.default_rng(4)
    draws = rng.normal(0.3, 0.1, size=(4, 250, 2))
    log_lik = rng.normal(-1, 0.1, size=(4, 250, 30)) + 0.2 * draws[..., :1]
    post = bayesij.from_arrays(draws, log_lik, quantity_names=["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tables = bayesij.audit(post).tables()
    own = ["Standard errors", "Convergence", "Influential subsets", "Linearity"]
    checked = [t for t in tables if any(t.startswith(o) for o in own)]
    assert len(checked) == 4, list(tables)
    for title in checked:
        missing = [c for c in tables[title].columns if c not in COLUMNS]
        assert not missing, (title, missing)


def test_only_the_table_s_own_columns_are_defined():
    table = pd.DataFrame({"rhat": [1.0], "not a column": [2.0]})
    assert column_definitions(table) == {"rhat": COLUMNS["rhat"]}
