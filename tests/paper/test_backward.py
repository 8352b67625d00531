"""The report's backward section (§7): its numpy reference checked by finite differences, and the comparison plot.
Its claims are read from the run of ``napkin reproduce`` that tests/paper/test_reproduce.py makes (§7 at the same
small sizes, with its pictures): running the section again here derived the same two passes a second time."""
import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.paper import backward
from napkin_cat.render.curves import compare_derivations


def test_the_chain_rule_reference_agrees_with_central_differences():
    rng = np.random.default_rng(3)
    Q, K, V, dO = (rng.normal(size=s) for s in ((3, 4), (5, 4), (5, 4), (3, 4)))

    def loss(Q, K, V):
        S = Q @ K.T / 2.0                                  # √d = 2
        P = np.exp(S - S.max(1, keepdims=True))
        return float(np.sum(dO * ((P / P.sum(1, keepdims=True)) @ V)))
    grads, eps = backward.chain_rule(Q, K, V, dO), 1e-6
    for i, x in enumerate((Q, K, V)):
        v = rng.normal(size=x.shape)
        shifted = [[y + t * v if j == i else y for j, y in enumerate((Q, K, V))] for t in (eps, -eps)]
        fd = (loss(*shifted[0]) - loss(*shifted[1])) / (2 * eps)
        assert float(np.sum(grads[i] * v)) == pytest.approx(fd, rel=1e-6, abs=1e-8)


def test_compare_draws_each_derivation_in_one_colour(tmp_path):
    sizes = {"a": 32, "b": 32, "c": 32}
    fwd = nc.derive(nc.library.matmul(), memory=[2 ** 8, 2 ** 10], sizes=sizes)
    bwd = nc.derive(nc.grad(nc.library.matmul()), memory=[2 ** 8, 2 ** 10], sizes=sizes)
    fig = compare_derivations({"forward": fwd, "backward": bwd}, str(tmp_path / "c.png"))
    labels = dict(fig.napkin_summary["curves"])
    assert labels["forward: H* (envelope)"] == labels["backward: H* (envelope)"] == 2
    assert "forward: lower bound" in labels                 # Hong-Kung: structural
    assert "backward: lower bound" not in labels            # compulsory only: not drawn, as plot_derivation does
    colours = {line.get_label(): line.get_color() for line in fig.axes[0].get_lines()}
    assert colours["forward: H* (envelope)"] == colours["forward: unfused"] != colours["backward: H* (envelope)"]
    assert (tmp_path / "c.png").stat().st_size > 1000
    with pytest.raises(nc.NapkinError, match="extension"):
        compare_derivations({"forward": fwd}, str(tmp_path / "c.pdf"))
