"""Each split selection is one object (protocol/selections.py) that the parameters, the client,
the server, the accountant and the simulator consult instead of branching on its name.

Proves: the parameter table offers exactly the selections there are; each selection's
accounting is the accountant's (ε, δ) with the zCDP composition for ``"dp"``; a selection
refuses the role it does not play (a round selection never grows alone, a server selection
never decides a round); the parameter rules follow the objects.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from cipherforest.privacy import PrivateForestClient
from cipherforest.privacy.dp import LabelPrivacyAccountant
from cipherforest.privacy.protocol.params import (
    CLASSIFIER_SELECTIONS,
    PARAMETERS,
    SPLIT_SELECTIONS,
    check_selection_params,
    label_epsilon,
)
from cipherforest.privacy.protocol.selections import SELECTIONS, selection


def test_the_parameter_table_offers_every_classifier_selection_and_no_other():
    allowed = PARAMETERS["split_selection"].constraint[0].options
    assert allowed == set(CLASSIFIER_SELECTIONS) == set(SELECTIONS) - {"paper"}
    assert set(SPLIT_SELECTIONS) == set(SELECTIONS)  # the wire takes the regressor's too
    assert PARAMETERS["split_selection"].default == "rr"
    for name, chosen in SELECTIONS.items():
        assert chosen.name == name and selection(name) is chosen
    with pytest.raises(ValueError, match="split_selection must be one of"):
        selection("variance")
    with pytest.raises(ValueError, match="split_selection"):
        PrivateForestClient(split_selection="paper").fit(np.zeros((4, 1)), [0, 1, 0, 1])


@pytest.mark.parametrize("name, epsilon, choices, expected", [
    ("gini", None, 5, (math.inf, 0.0)),
    ("paper", None, 5, (math.inf, 0.0)),
    ("blind", None, 5, (0.0, 0.0)),
    ("rr", 2.0, 0, (2.0, 0.0)),
    ("dp", 1.0, 0, (0.0, 0.0)),
])
def test_accounting_of_each_selection(name, epsilon, choices, expected):
    chosen = selection(name)
    assert (chosen.epsilon_spent(epsilon, choices, 1e-6),
            chosen.delta_spent(1e-6, choices)) == expected


def test_dp_accounting_composes_in_zcdp_and_is_the_accountants():
    accountant = LabelPrivacyAccountant("dp", 0.5, 1e-6)
    accountant.spend(40)
    dp = selection("dp")
    epsilon = dp.epsilon_spent(0.5, 40, 1e-6)
    assert epsilon == accountant.epsilon_spent and dp.delta_spent(1e-6, 40) == 1e-6
    # zCDP: far below adding ε over the 40 choices, above one choice's ε.
    assert 0.5 < epsilon < 40 * 0.5
    assert dp.epsilon_spent(0.5, 160, 1e-6) > epsilon


def test_a_selection_refuses_the_role_it_does_not_play():
    with pytest.raises(ValueError, match="grows by the client's rounds"):
        selection("gini").grow(None, None, None)
    with pytest.raises(ValueError, match="asks the client no round"):
        selection("rr").decide(None, [], np.zeros((0, 2)), 2, False, None, random.Random(0))
    assert {n for n, s in SELECTIONS.items() if s.asks_rounds} == {"gini", "dp", "paper"}
    assert [n for n, s in SELECTIONS.items() if s.sends_randomized_labels] == ["rr"]


@pytest.mark.parametrize("params, match", [
    ({"split_selection": "dp", "label_epsilon": None}, "needs label_epsilon"),
    ({"split_selection": "gini", "label_epsilon": 1.0}, "used only with split_selection='rr' "
                                                        "or 'dp'"),
    ({"split_selection": "blind", "label_epsilon": 1.0}, "not 'blind'"),
    ({"split_selection": "rr", "label_epsilon": math.inf}, "finite number > 0"),
    ({"split_selection": "dp", "label_epsilon": 1.0, "reveal_leaves": True},
     "reveal_leaves=True is the paper's rule"),
])
def test_parameter_rules_follow_the_objects(params, match):
    with pytest.raises(ValueError, match=match):
        check_selection_params({"reveal_leaves": False, **params})


def test_default_epsilon_comes_from_the_selection():
    assert label_epsilon({"split_selection": "rr", "label_epsilon": None}) == 2.0
    assert label_epsilon({"split_selection": "gini", "label_epsilon": None}) is None
    assert label_epsilon({"split_selection": "rr", "label_epsilon": 0.5}) == 0.5


@pytest.mark.parametrize("name", ["rr", "blind"])
def test_server_selections_grow_without_rounds(name):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] > 0).astype(int)
    client = PrivateForestClient(2, random_state=0, split_selection=name).fit(X, y)
    assert client.fit_stats_.rounds == 0
    assert client.privacy_report_["server_saw"][-1] == selection(name).server_saw[-1]
