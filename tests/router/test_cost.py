"""The decision rule: least expected cost under `cost[true][chosen]`, not the most probable route."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from maitre.routing import ROUTES, SEED002_COSTS, CostMatrix, Route

SYMMETRIC = CostMatrix(((0.0, 1.0, 1.0), (1.0, 0.0, 1.0), (1.0, 1.0, 0.0)))


def test_the_choice_is_the_least_expected_cost_for_any_probabilities() -> None:
    rng = np.random.default_rng(2)
    for _ in range(500):
        p = rng.dirichlet([0.7, 0.7, 0.7]).tolist()
        chosen = SEED002_COSTS.choose(p)
        brute = [sum(p[t] * SEED002_COSTS.rows[t][j] for t in range(3)) for j in range(3)]
        assert brute[ROUTES.index(chosen)] == pytest.approx(min(brute))


def test_a_hand_made_cost_matrix_flips_a_decision() -> None:
    """60 % CONTEXT, 40 % ACT: argmax answers from the context, seed 002's costs call the tool."""
    p = [0.6, 0.0, 0.4]
    assert SYMMETRIC.choose(p) is Route.CONTEXT
    assert SEED002_COSTS.choose(p) is Route.ACT
    # and a team for which calling a tool needlessly is what hurts flips it back
    cautious = CostMatrix.from_mapping(
        {
            "CONTEXT": {"RETRIEVE": 5, "ACT": 50},
            "RETRIEVE": {"CONTEXT": 1, "ACT": 5},
            "ACT": {"CONTEXT": 1, "RETRIEVE": 1},
        }
    )
    assert cautious.choose(p) is Route.CONTEXT


def test_under_calls_are_priced_as_seed_002_argues() -> None:
    for true, chosen in itertools.product(ROUTES, ROUTES):
        cost = SEED002_COSTS.cost(true, chosen)
        if SEED002_COSTS.is_under_call(true, chosen):
            assert cost == 10  # a wrong, confident answer
        elif SEED002_COSTS.is_over_call(true, chosen):
            assert 1 <= cost <= 2  # a needless call: latency and money, answer still right
        else:
            assert cost == 0
    assert SEED002_COSTS.is_under_call("ACT", "CONTEXT") and SEED002_COSTS.is_under_call(
        "RETRIEVE", "CONTEXT"
    )
    assert SEED002_COSTS.is_over_call("RETRIEVE", "ACT") and not SEED002_COSTS.is_over_call("ACT", "ACT")
    # CONTEXT needs more than 5/6 probability before it is cheaper than calling a tool
    assert SEED002_COSTS.choose([0.82, 0.0, 0.18]) is Route.ACT
    assert SEED002_COSTS.choose([0.85, 0.0, 0.15]) is Route.CONTEXT


def test_ties_go_to_the_route_that_calls_more() -> None:
    assert SYMMETRIC.choose([0.5, 0.0, 0.5]) is Route.ACT


def test_a_matrix_with_a_missing_cell_is_refused() -> None:
    with pytest.raises(ValueError, match="no cost for true ACT, chosen CONTEXT"):
        CostMatrix.from_mapping(
            {
                "CONTEXT": {"RETRIEVE": 1, "ACT": 2},
                "RETRIEVE": {"CONTEXT": 10, "ACT": 1},
                "ACT": {"RETRIEVE": 10},
            }
        )
    assert (
        CostMatrix.from_mapping(
            {
                "CONTEXT": {"RETRIEVE": 1, "ACT": 2},
                "RETRIEVE": {"CONTEXT": 10, "ACT": 1},
                "ACT": {"CONTEXT": 10, "RETRIEVE": 10},
            }
        )
        == SEED002_COSTS
    )
    with pytest.raises(ValueError, match="three probabilities"):
        SEED002_COSTS.expected_costs([1.0])
