"""Hierarchies refitted as hierarchies: leave-one-group-out scored by the group's joint
predictive density, and the bootstrap that draws new clusters, each against exact
mathematics (a normal hierarchy with known variances: closed-form posteriors)."""

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from normal_hierarchy import simulate

import bayesij
from bayesij import refit
from bayesij.array.hierarchy import normal_group_log_lik


def test_leave_one_group_out_refits_score_the_group_s_joint_density():
    """refit.loo(groups=) gives a group's observations weight 0 and scores their joint
    log predictive density; with the group's effect drawn from its population in the refit
    that is log p(y_g | y_-g) in closed form (within 3 Monte Carlo SEs)."""
    model = simulate(n_groups=8, per_group=5, seed=1)
    post = model.fit()
    backend = refit.CallableBackend(lambda w: model.fit(w, seed=7), n_obs=model.y.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = refit.loo(
            post, backend, points=[2, 5], groups=model.codes, executor="sequential", progress=False
        )
    table = report.comparisons[report.comparisons["method"] == "psis"].set_index("group")
    for g in (2, 5):
        exact = model.logo_exact(g)
        assert abs(table.loc[g, "exact"] - exact) < 3 * table.loc[g, "exact_se"] + 1e-3
        assert table.loc[g, "exact_se"] < 0.1
    observation = pytest.raises(
        ValueError, match=r"points: found labels \['s1'\] not among the group"
    )
    with observation:
        refit.loo(post, backend, points=["s1"], groups=model.codes, progress=False)


def test_the_cluster_bootstrap_draws_new_clusters_and_the_marginal_ij_approximates_it():
    """Equal clusters and a flat prior: the posterior mean of mu is the mean of the cluster
    means, so resampling clusters has the exact variance sum_g (ybar_g - ybar)^2 / G^2.
    The cluster bootstrap finds it (within 3 of its SEs), the IJ over the clusters'
    marginal log-likelihoods (effects integrated out) equals it to the draws' Monte Carlo
    error, and the IJ over the conditional ones (each cluster keeps its one effect: the
    weight bootstrap) is far below it."""
    model = simulate(n_groups=12, per_group=4, tau=1.0, seed=3)
    post = model.fit(draws=2000)
    means = np.bincount(model.codes, model.y) / np.bincount(model.codes)
    exact = np.sum((means - means.mean()) ** 2) / means.size**2
    mu = post.quantities.values[..., :1]
    marginal = normal_group_log_lik(model.y - mu, model.codes, tau=model.tau, sigma=model.sigma)
    report = refit.cluster_bootstrap(
        post,
        model.resampled_fit,
        B=300,
        groups=model.codes,
        quantities="mu",
        marginal_log_lik=marginal,
        executor="sequential",
        progress=False,
    )
    rows = report.comparisons.set_index("method")
    boot, boot_se = rows.loc["posterior", "exact"], rows.loc["posterior", "exact_se"]
    assert abs(boot - exact) < 3 * boot_se
    np.testing.assert_allclose(rows.loc["ij (marginal)", "approximation"], exact, rtol=0.1)
    assert rows.loc["ij (weights)", "approximation"] < 0.6 * exact
    assert report.n_refits == 300 and report.summary["clusters"] == 12


def test_a_resample_lays_out_each_drawn_copy_as_a_new_cluster():
    codes = np.array([0, 0, 1, 2, 2, 2])
    backend = refit.ClusterResampling(lambda rows, groups: None, codes)
    rows, groups = backend.resampled(np.array([2.0, 2.0, 0.0, 1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(rows, [0, 1, 0, 1, 3, 4, 5])
    np.testing.assert_array_equal(groups, [0, 0, 1, 1, 2, 2, 2])
    with pytest.raises(ValueError, match=r"weights: found \[1.0, 2.0\] in one cluster"):
        backend.resampled(np.array([1.0, 2.0, 1.0, 1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match=r"model: found a callable that returned a NoneType"):
        backend.fit(np.ones(6))


def test_cluster_labels_with_gaps_negatives_or_strings_are_clusters_and_fractions_refused():
    # Issue 67: a gap raised a raw IndexError, -1 dropped an observation from every
    # resample, 0.5 was truncated into cluster 0, strings gave NumPy's message.
    def layout(labels):
        backend = refit.ClusterResampling(lambda rows, groups: None, labels)
        return backend.resampled(np.ones(len(labels)))

    for labels in ([0, 0, 5, 7, 7], [-1, -1, 2, 3, 3], ["b", "b", "a", "c", "c"]):
        rows, groups = layout(labels)
        assert sorted(rows.tolist()) == [0, 1, 2, 3, 4]  # nothing dropped
        assert len(set(groups.tolist())) == 3
    for bad in ([0.0, 0.5, 1.0], [0.0, np.nan, 1.0], [[0, 1]]):
        with pytest.raises(ValueError, match="codes: found"):
            refit.ClusterResampling(lambda rows, groups: None, bad)


def test_one_cluster_or_bad_integrated_terms_are_refused_before_any_refit():
    model = simulate(n_groups=6, per_group=3, tau=1.0, seed=2)
    post = model.fit(draws=200)
    calls = []

    def counted(rows, groups):
        calls.append(1)
        return model.resampled_fit(rows, groups)

    options = {"B": 3, "executor": "sequential", "progress": False}
    with pytest.raises(ValueError, match="groups: found 1 cluster"):
        refit.cluster_bootstrap(post, counted, groups=np.zeros(18, dtype=int), **options)
    with pytest.raises(ValueError, match=r"marginal_log_lik: found shape"):
        refit.cluster_bootstrap(
            post, counted, groups=model.codes, marginal_log_lik=np.zeros((4, 200, 5)), **options
        )
    nan = np.zeros((4, 200, 6))
    nan[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"marginal_log_lik: found a value that is not finite"):
        refit.cluster_bootstrap(post, counted, groups=model.codes, marginal_log_lik=nan, **options)
    assert not calls  # no refit ran


def test_the_audit_does_not_judge_a_hierarchy_s_global_sd_by_the_weight_ij():
    """On the fit as a DataTree (a over 'school', the index in constant_data) the unit is the
    school and a is its effect; mu's IJ-vs-posterior verdict is "undetermined" by the
    hierarchy reason (checked before the linearity check, which leaving a school out with
    its own intercept also fails: the hierarchy's advice is the cluster bootstrap, the
    linearity check's the weight bootstrap), never "misspecified" off the weight IJ's
    smaller sd."""
    model = simulate(n_groups=12, per_group=4, tau=1.0, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = bayesij.audit(model.tree(), settings={"targets": ("sign",)})
    assert audit.units.name == "school" and audit.unit_effects == ["a"]
    row = audit.comparison_table.loc["mu"]
    assert row["verdict"] == "undetermined" and row["why"] == "hierarchy"
    assert "cluster_bootstrap" in row["reason"]
    assert audit.ij.linearity.verdict["mu"] in ("doubtful", "unreliable")
    assert not any("misspecified" in line for line in audit.summary())
    assert not any("refit.bootstrap" in line for line in audit.summary())


def test_a_kfold_of_whole_groups_scores_each_group_jointly():
    """refit.kfold(groups=) keeps groups whole (kfold_split_grouped) and scores each held-out
    group by its joint predictive density given the data outside the fold, which here is
    sum_g log p(y_g | y_-F) in closed form (within 3 Monte Carlo SEs per fold); a fold
    split that cuts a group is refused."""
    model = simulate(n_groups=9, per_group=4, seed=5)
    post = model.fit()
    backend = refit.CallableBackend(lambda w: model.fit(w, seed=11), n_obs=model.y.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = refit.kfold(
            post, backend, K=3, groups=model.codes, executor="sequential", progress=False
        )
    table = report.comparisons[report.comparisons["method"] == "psis"].set_index("fold")
    pointwise = report.result.pointwise
    assert pointwise.index.name == "group" and len(pointwise) == 9
    for fold, rows in pointwise.groupby("fold"):
        exact = model.kfold_exact(rows.index.to_numpy())
        assert abs(table.loc[fold, "exact"] - exact) < 3 * table.loc[fold, "exact_se"] + 1e-9
    np.testing.assert_allclose(report.result.elpd, table["exact"].sum(), rtol=1e-12)
    split = np.arange(model.y.size) % 3  # cuts every group
    with pytest.raises(ValueError, match=r"^folds: found groups split across folds"):
        refit.kfold(post, backend, folds=split, groups=model.codes, progress=False)


def _schools_with_integrated_terms(seed: int, draws: int, shuffled: bool = False):
    """The normal hierarchy's fit as a DataTree and its schools' integrated
    log-likelihoods (closed form, columns in school order as normal_group_log_lik lays
    them out); ``shuffled``: the observations stored in another order than the schools'
    (the units then come in another order than the columns)."""
    from bayesij.array.hierarchy import normal_group_log_lik

    model = simulate(n_groups=12, per_group=4, tau=1.0, seed=seed)
    tree = model.tree(draws=draws)
    if shuffled:
        order = np.random.default_rng(seed).permutation(model.y.size)
        tree = xr.DataTree.from_dict(
            {
                "posterior": tree["posterior"].to_dataset(),
                "log_likelihood": tree["log_likelihood"].to_dataset().isel(obs=order),
                "constant_data": tree["constant_data"].to_dataset().isel(obs=order),
            }
        )
    mu = tree["posterior"]["mu"].values[..., None]
    marginal = normal_group_log_lik(model.y - mu, model.codes, tau=model.tau, sigma=model.sigma)
    return model, tree, marginal


def _audit(data, marginal):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bayesij.audit(
            data, marginal_log_lik=marginal, settings={"targets": ("sign",), "amip": False}
        )


@pytest.mark.parametrize("seed, verdict", [(2, "agree"), (3, "posterior smaller")])
def test_the_audit_judges_a_hierarchy_by_the_ij_over_integrated_group_terms(seed, verdict):
    """Given the schools' integrated log-likelihoods (closed form), the audit's verdict on
    mu is decided by the IJ over them, which equals the cluster bootstrap's exact variance
    sum_g (ybar_g - ybar)^2 / G^2 (10 %), and it is the verdict of that exact variance
    against the closed-form posterior variance (sd ratio 1.005 and 1.42 on these data)."""
    model, tree, marginal = _schools_with_integrated_terms(seed, draws=2000)
    audit = _audit(tree, marginal)
    means = np.bincount(model.codes, model.y) / np.bincount(model.codes)
    exact = np.sum((means - means.mean()) ** 2) / means.size**2
    _, cov = model.posterior()
    np.testing.assert_allclose(audit.ij_integrated.variance_corrected["mu"], exact, rtol=0.1)
    ratio = np.sqrt(exact / cov[0, 0])
    expected = "agree" if 0.8 <= ratio <= 1.25 else "posterior smaller"
    row = audit.comparison_table.loc["mu"]
    assert expected == verdict == row["verdict"] and row["why"] == "integrated"
    assert "integrated" in row["reason"]
    np.testing.assert_allclose(row["ratio"], ratio, rtol=0.1)
    # the report's table shows the sds the verdict read, not the conditional IJ's
    shown = audit.tables()["Standard errors (posterior vs IJ)"].loc["mu"]
    np.testing.assert_allclose(shown["sd_ratio"], row["ratio"], rtol=1e-12)
    np.testing.assert_allclose(
        shown["ij_sd"] ** 2, audit.ij_integrated.variance_corrected["mu"], rtol=1e-12
    )


def test_integrated_terms_of_the_wrong_shape_or_without_groups_are_refused():
    _, tree, _ = _schools_with_integrated_terms(2, draws=500)
    with pytest.raises(ValueError, match=r"marginal_log_lik: found shape \(4, 500, 11\)"):
        bayesij.audit(tree, marginal_log_lik=np.zeros((4, 500, 11)), settings={"amip": False})
    with pytest.raises(ValueError, match="marginal_log_lik: found integrated terms"):
        bayesij.audit(
            tree, groups=False, marginal_log_lik=np.zeros((4, 500, 12)), settings={"amip": False}
        )
    with pytest.raises(ValueError, match="marginal_log_lik: found a value that is not finite"):
        bayesij.audit(
            tree, marginal_log_lik=np.full((4, 500, 12), np.nan), settings={"amip": False}
        )
    labelled = xr.DataArray(np.zeros((4, 500, 12)), dims=("chain", "draw", "school"))
    labelled = labelled.assign_coords(school=[f"x{g}" for g in range(12)])
    with pytest.raises(ValueError, match=r"marginal_log_lik: found no term for the units"):
        bayesij.audit(tree, marginal_log_lik=labelled, settings={"amip": False})


@pytest.mark.parametrize("shuffled", [False, True])
def test_leave_one_group_out_over_integrated_terms_equals_the_closed_form(shuffled):
    """The audit's LOO over the schools' integrated log-likelihoods (marginal_log_lik)
    estimates the same log p(y_g | y_-g) as over the conditional ones, in closed form here
    (NormalHierarchy.logo_exact): every school within 0.05 of it with k-hat below 0.5,
    where the conditional terms' PSIS has k-hat above 0.7 for most schools and misses by
    up to 1.6; the verdict's sentence reads the integrated one and says so. With the
    observations stored out of the schools' order the terms are paired with the schools
    by label (the units come in order of first appearance, the columns in school order),
    and as a labelled DataArray in any order."""
    model, tree, marginal = _schools_with_integrated_terms(3, draws=1000, shuffled=shuffled)
    exact = pd.Series([model.logo_exact(g) for g in range(12)], [f"s{g}" for g in range(12)])
    labelled = xr.DataArray(marginal[..., ::-1], dims=("chain", "draw", "school"))
    labelled = labelled.assign_coords(school=[f"s{g}" for g in range(12)][::-1])
    for terms in (marginal, labelled):
        audit = _audit(tree, terms)
        integrated = audit.loo_integrated.pointwise["elpd_loo"]
        np.testing.assert_allclose(integrated, exact[integrated.index], atol=0.05)
        assert (audit.loo_integrated.pointwise["pareto_k"] < 0.5).all()
    conditional = audit.loo.pointwise
    assert (conditional["pareto_k"] > 0.7).sum() > len(conditional) / 2  # most schools
    assert np.max(np.abs(conditional["elpd_loo"] - exact[conditional.index])) > 1.0
    sentence = next(s for s in audit.summary() if s.startswith("PSIS-LOO"))
    assert "integrated log-likelihoods is reliable" in sentence
    assert "over the conditional terms" in sentence


def test_integrated_terms_give_the_same_verdicts_lazily_and_from_arviz_0_23(tmp_path):
    """The same fit loaded from a file, and as an ArviZ 0.23 InferenceData where that
    generation is installed: the same integrated IJ and LOO. Opened lazily (chunks=) the
    grouped audit is refused by name, integrated terms or not (summing each group's
    terms needs the matrix in memory)."""
    _, tree, marginal = _schools_with_integrated_terms(3, draws=500)
    eager = _audit(tree, marginal)
    path = tmp_path / "schools.nc"
    tree.to_netcdf(path)
    others = []
    with xr.open_datatree(path) as opened:
        others.append(_audit(opened.load(), marginal))
    with xr.open_datatree(path, chunks={}) as lazy:
        with pytest.raises(ValueError, match="groups: found the fit's grouping by school"):
            _audit(lazy, marginal)
    from peers import ARVIZ_1

    if not ARVIZ_1:  # ArviZ 0.23 (Python 3.11)
        import arviz

        groups = {name: tree[name].to_dataset() for name in tree.children}
        others.append(_audit(arviz.InferenceData(**groups), marginal))
    for other in others:
        pd.testing.assert_frame_equal(other.comparison_table, eager.comparison_table)
        pd.testing.assert_frame_equal(
            other.loo_integrated.pointwise, eager.loo_integrated.pointwise, rtol=1e-12
        )


def test_the_audit_answers_amip_over_groups_from_the_integrated_terms():
    # 30 schools x 4, known variances: every set of 3 schools is refitted in closed form.
    # Over the conditional terms the draws cannot answer (a school's term moves with its
    # own effect: undetermined); over the integrated terms mu's sign and its sign and
    # significance are "not reachable" (the exact refits agree), each predicted change's
    # interval holds the closed-form change of its set, and a significance 4 % short of
    # its target stays undetermined rather than guessed.
    model = simulate(n_groups=30, per_group=4, tau=1.0, seed=5)
    post = model.fit(draws=1000)
    mu = post.quantities.values[..., :1]
    terms = normal_group_log_lik(model.y - mu, model.codes, tau=model.tau, sigma=model.sigma)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        options = {"groups": model.codes, "quantities": ["mu"]}
        targets = ("sign", "significance", "sign_and_significance")
        settings = {"targets": targets, "loo": False}
        bare = bayesij.audit(post, **options, settings=settings)
        given = bayesij.audit(post, marginal_log_lik=terms, **options, settings=settings)
    assert {r.answer for r in bare.amip.values()} == {"undetermined"}
    answers = {target: r.answer for (_, target), r in given.amip.items()}
    assert answers == {
        "sign": "not reachable",
        "significance": "undetermined",
        "sign_and_significance": "not reachable",
    }
    full = model.posterior(np.ones(model.y.size))
    for result in given.amip.values():
        sign = {"mean": 0, "lower end": -1, "upper end": 1}[result.metric]
        dropped = np.isin(model.codes, np.asarray(result.drop_ids, dtype=int), invert=True)
        mean, cov = model.posterior(dropped.astype(float))
        change = mean[0] + sign * 1.96 * np.sqrt(cov[0, 0])
        change -= full[0][0] + sign * 1.96 * np.sqrt(full[1][0, 0])
        low, high = result.change_interval
        assert low <= change <= high, (result.target, change, low, high)


def test_amip_over_integrated_terms_agrees_with_exact_refits_of_unknown_variances():
    # Varying intercepts with tau and sigma unknown (24 schools x 10, t(4) noise), drawn
    # by the exact Gibbs sampler: over the integrated terms the draws answer all three of
    # mu's questions. "Not reachable": no set of 2 schools (every pair ranked in closed
    # form at the posterior's tau and sigma, the best refitted exactly) moves mu's sign;
    # "reached": the long exact refit without the schools crosses.
    from hierarchy_gibbs import GibbsHierarchyBackend, group_reference, metric_after
    from hierarchy_gibbs import simulate as simulate_gibbs

    y, codes = simulate_gibbs(24, 10, 3)
    post = GibbsHierarchyBackend(y, codes, seed=1).fit(np.ones(y.size))
    draws = {q: post.quantities.sel(quantity=q).values for q in ("mu", "tau", "sigma")}
    terms = normal_group_log_lik(y - draws["mu"][..., None], codes, draws["tau"], draws["sigma"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = bayesij.audit(
            post,
            groups=codes,
            marginal_log_lik=terms,
            quantities=["mu"],
            settings={"targets": ("sign", "significance", "sign_and_significance")},
        )
    answers = {target: r for (_, target), r in report.amip.items()}
    assert {t: r.answer for t, r in answers.items()} == {
        "sign": "not reachable",
        "significance": "reached",
        "sign_and_significance": "not reachable",
    }
    assert "dropping up to 2 groups" in str(answers["sign"])  # the units are the schools
    assert group_reference(y, codes, 0, -1.0, 2) is None
    assert group_reference(y, codes, 1, -1.0, 2) is None
    reached = answers["significance"]
    dropped = np.flatnonzero(np.isin(codes, np.asarray(reached.drop_ids, dtype=int)))
    before, after = metric_after(y, codes, [], "mu", -1), metric_after(y, codes, dropped, "mu", -1)
    assert before > 0 > after
    # Reached by reweighting every school of the set: its change interval is that
    # estimate give or take 1.96 of its errors, past the target at both ends (the
    # influences' band, beside it, ended short of it), and it holds the exact change.
    assert reached.reached_by_reweighting
    low, high = reached.change_interval
    assert high <= -reached.original_value and low <= after - before <= high


class _Recording(refit.Backend):
    """The schools' closed-form refits, recording each refit's observation weights."""

    def __init__(self, model):
        self.model, self.n_obs, self.weights = model, model.y.size, []

    def fit(self, weights):
        self.weights.append(np.asarray(weights, dtype=float))
        return self.model.fit(weights, draws=4000, seed=7)


def test_a_set_of_schools_is_verified_by_the_refit_without_their_observations(tmp_path):
    """An audit's answer over the schools' integrated terms (one unit per school) reached
    by dropping a school: refit.verify given the fit refits without exactly that school's
    observations, and the refit confirms the answer and the closed form's change, whether
    the fit is the DataTree in memory, opened lazily (chunks=) or, where ArviZ 0.23 is
    installed, its InferenceData. Without the fit the refusal names fit=."""
    from peers import ARVIZ_1

    model, tree, marginal = _schools_with_integrated_terms(3, draws=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = bayesij.audit(tree, marginal_log_lik=marginal, settings={"targets": (0.2,)})
    result = audit.amip[("mu", 0.2)]
    assert result.answer == "reached" and result.kept.size == 12
    schools = np.array([f"s{g}" for g in model.codes])
    kept = (~np.isin(schools, [str(s) for s in result.drop_ids])).astype(float)
    exact = model.posterior(kept)[0][0] - model.posterior()[0][0]
    assert exact >= 0.2  # the closed form reaches the target too
    path = tmp_path / "schools.nc"
    tree.to_netcdf(path)
    fits = [tree, xr.open_datatree(path, chunks={})]
    if not ARVIZ_1:  # ArviZ 0.23 (Python 3.11)
        import arviz

        fits.append(arviz.InferenceData(**{n: tree[n].to_dataset() for n in tree.children}))
    for fit in fits:
        backend = _Recording(model)
        checked = refit.verify(result, backend, fit=fit, progress=False).verification
        np.testing.assert_array_equal(backend.weights, [kept])
        assert checked["reached"] and abs(checked["change"] - exact) < 0.05
    fits[1].close()
    with pytest.raises(ValueError, match=r"^fit: found None for an AMIP result over 12 groups"):
        refit.verify(result, _Recording(model), progress=False)
