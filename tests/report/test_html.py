"""The HTML report: the verdict before the detail, every section collapsible, each table's
columns defined, names from the data escaped, figures closed after rendering."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import bayesij  # noqa: E402
from bayesij.report.html import html_page  # noqa: E402


def test_the_page_reads_top_down_and_escapes_names(tmp_path):
    rng = np.random.default_rng(2)
    names = ["<script>alert(1)</script>", "$\\undefined{x_$"]  # markup, broken mathtext
    draws = rng.normal(0.3, 0.1, size=(4, 250, 2))
    log_lik = rng.normal(-1, 0.1, size=(4, 250, 30)) + 0.2 * draws[..., :1]
    post = bayesij.from_arrays(draws, log_lik, quantity_names=names)
    result = bayesij.audit(post)
    page = html_page(result)
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.index('class="verdict"') < page.index("<details")
    # a phone's browser lays it out at its own width; wide tables scroll in their box
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page
    assert page.count("<table") == page.count('<div class="scroll"><table')
    # open: the first table and the AMIP answers; the rest folded
    assert page.count("<details open>") == 1 + ("Influential subsets (AMIP)" in result.tables())
    if "Influential subsets (AMIP)" in result.tables():
        assert "<details open><summary>Influential subsets (AMIP)" in page
    assert page.count("<details") >= len(result.tables()) + 2  # + the figure sections
    assert page.count('<dl class="columns">') >= 3
    assert "split_change</dt><dd>the set chosen on half the draws" in page
    text = page.split("<details><summary>Influence (figures)")[0]  # before the images
    assert "nan" not in text.lower()
    assert not plt.get_fignums()
    markdown = result.to_markdown()
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown
    path = result.to_html(tmp_path / "a.html")
    assert path.endswith("a.html")


def test_a_table_has_one_header_row_and_cards_on_a_narrow_screen():
    """The AMIP table's index (quantity, target) as its first columns under one header row
    (the labels sat in two rows and columns, 'sign' right-aligned under nothing); numbers
    right, text left; every cell labelled with its column for the card layout a narrow
    screen gets (no column off a 420 px page); names escaped in the labels too."""
    import re

    import pandas as pd

    from bayesij.report.html import STYLE, table_html

    index = pd.MultiIndex.from_tuples([("<b>", "sign"), ("<b>", "significance")])
    table = pd.DataFrame(
        {"answer": ["reached", "undetermined"], "n_drop": [3.0, np.nan], "dropped": ["a", ""]},
        index=index.set_names(["quantity", "target"]),
    )
    page = table_html(table)
    assert page.count("<tr>") == 3 and page.count("<thead>") == 1
    header = re.findall(r"<th class=\"[nt]\">(.*?)</th>", page)
    assert [h.replace("<wbr>", "") for h in header] == [
        "quantity",
        "target",
        "answer",
        "n_drop",
        "dropped",
    ]
    assert '<td class="t" data-label="target">significance</td>' in page
    assert '<td class="n" data-label="n_drop">3</td>' in page
    assert '<td class="n" data-label="n_drop"></td>' in page  # NaN: blank
    assert "&lt;b&gt;" in page and "<b>" not in page
    assert "@media (max-width:700px)" in STYLE and "content:attr(data-label)" in STYLE
    # an unnamed index keeps its labels (PSIS-LOO's elpd_loo, p_loo, looic), as column 'row'
    loo = pd.DataFrame({"Estimate": [-10.5, 2.1]}, index=["elpd_loo", "p_loo"])
    assert '<td class="t" data-label="row">elpd_loo</td>' in table_html(loo)
    assert 'data-label="row"' not in table_html(pd.DataFrame({"a": [1.0]}))  # 0, 1, ...


def test_names_cannot_inject_markdown():
    """Quantity names, observation ids and group labels with a javascript: link, a
    newline starting a heading, a remote image (a tracking pixel in a CI comment) or raw
    HTML render as text in the Markdown report: a CommonMark parser finds no link, image,
    injected heading or HTML in it."""
    import re

    from markdown_it import MarkdownIt

    hostile = [
        "[x](javascript:alert(1))",
        "b\n# Injected\n![](http://track.example/p.png)",
        "![pixel](http://track.example/q.png)",
    ]
    rng = np.random.default_rng(3)
    draws = rng.normal(0.3, 0.1, size=(4, 250, 3))
    log_lik = rng.normal(-1, 0.1, size=(4, 250, 6)) + 0.2 * draws[..., :1]
    ids = [f"# obs {i}" if i % 2 else f"<img src=x>[{i}](http://x.example)" for i in range(6)]
    post = bayesij.from_arrays(draws, log_lik, quantity_names=hostile, obs_names=ids)
    labels = ["\r\n## g1 [a](http://a.example)", "-g2\u2028> quote", "1. g3"]
    for result in (
        bayesij.audit(post, settings={"amip": False}),
        bayesij.audit(
            post.with_groups([labels[i // 2] for i in range(6)]), settings={"amip": False}
        ),
    ):
        markdown = result.to_markdown()
        rendered = MarkdownIt("commonmark").enable("table").render(markdown)
        assert "<a " not in rendered and "<img" not in rendered
        assert "<blockquote" not in rendered and "<ol" not in rendered
        headings = re.findall(r"<h(\d)>(.*?)</h\1>", rendered)
        expected = ["Model audit", "Summary", *result.tables()]
        assert [text for _, text in headings] == [
            e.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for e in expected
        ]
        assert "Injected" in rendered  # the names are still shown, as text


def test_long_names_are_shortened_in_figures(tmp_path):
    """A 20,000-character observation id made matplotlib run out of memory, and a long
    quantity name took 20-28 s to lay out: figures show the first 40 characters."""
    import time

    from bayesij.report.plots import _plain

    rng = np.random.default_rng(4)
    draws = rng.normal(0.3, 0.1, size=(4, 250, 1))
    log_lik = rng.normal(-1, 0.1, size=(4, 250, 5)) + 0.2 * draws[..., :1]
    ids = ["x" * 20_000, *"abcd"]
    post = bayesij.from_arrays(draws, log_lik, quantity_names=["q" * 5000], obs_names=ids)
    result = bayesij.audit(post, settings={"amip": False})
    start = time.perf_counter()
    result.to_html(tmp_path / "long.html")
    assert time.perf_counter() - start < 15
    assert "x" * 20_000 in (tmp_path / "long.html").read_text()  # tables keep the whole id
    assert _plain("a\nb  c$" + "z" * 60) == "a b c\\$" + "z" * 33 + "\u2026"
    assert not plt.get_fignums()
