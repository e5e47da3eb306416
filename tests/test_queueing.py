"""servelib.queueing: the M/D/1 wait against a simulated queue, and the Poisson occupancy."""
import math

import numpy as np
import pytest

from servelib.queueing import (lindley_waits, max_mean_occupancy, md1_max_utilization, md1_mean_wait_s,
                               md1_wait_percentile_s, md1_wait_s, poisson_percentile)


def simulated_waits(rho, service_s=1.0, n=200_000, seed=0):
    """Waits of a simulated M/D/1 queue: the closed forms' independent check."""
    gaps = np.random.default_rng(seed).exponential(service_s / rho, n)
    return lindley_waits(gaps, service_s)[n // 20:]       # drop the warm-up from an empty queue


def test_lindley_by_hand():
    assert lindley_waits([0.5, 0.5, 2], 1.0).tolist() == [0, 0.5, 1.0, 0]
    assert lindley_waits([], 1.0).tolist() == [0]
    with pytest.raises(ValueError, match="interarrival_s"):
        lindley_waits([-1], 1.0)


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.85])
def test_mean_wait_matches_a_simulated_queue(rho):
    w = simulated_waits(rho)
    assert w.mean() == pytest.approx(md1_mean_wait_s(rho, 1.0), rel=0.05)
    assert (w > 0).mean() == pytest.approx(rho, abs=0.01)     # P(wait) = rho exactly


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.85])
@pytest.mark.parametrize("pct", [50, 90, 99])
def test_percentile_bound_holds_and_is_not_loose(rho, pct):
    w = simulated_waits(rho)
    bound = md1_wait_percentile_s(rho, 1.0, pct)
    got = np.percentile(w, pct)
    assert got <= bound + 1e-9
    if got > 0.2:              # the bound is the true exponential tail without its constant
        assert bound < 2 * got


def test_hand_cases():
    # rho = 0.5, s = 2 s: 0.5 x 2 / (2 x 0.5) = 1 s; half the M/M/1 wait rho s / (1 - rho).
    assert md1_mean_wait_s(0.25, 2.0) == 1.0
    assert md1_wait_s(0.25, 2.0) == 1.0
    # Below rho = 1 - q nobody at the q-th percentile waits.
    assert md1_wait_percentile_s(0.05, 1.0, 90) == 0.0
    # Kingman: the root of rho (e^x - 1) = x, found here by bisection, gives s ln(10) / x at p90.
    lo, hi = 1e-9, 10.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 0.5 * math.expm1(mid) < mid else (lo, mid)
    assert md1_wait_percentile_s(0.5, 1.0, 90) == pytest.approx(math.log(10) / lo, rel=1e-12)


def test_max_utilization_inverts_the_wait():
    # Mean: rho = 2b / (2b + s); at that utilisation the wait is exactly the budget.
    rho = md1_max_utilization(0.1, 0.2)
    assert rho == pytest.approx(0.8) and md1_mean_wait_s(rho / 0.1, 0.1) == pytest.approx(0.2)
    for budget in (0.2, 1.0):
        rho = md1_max_utilization(0.1, budget, 90)
        assert md1_wait_percentile_s(rho / 0.1, 0.1, 90) == pytest.approx(budget, rel=1e-9)
        assert md1_wait_percentile_s(rho * 1.001 / 0.1, 0.1, 90) > budget
    # A small budget still allows the utilisation at which the p90 request does not wait.
    for budget in (1e-9, 0.05):
        assert md1_max_utilization(0.1, budget, 90) == pytest.approx(0.1)
        assert md1_wait_percentile_s(0.1 / 0.1, 0.1, 90) == 0.0
    assert md1_max_utilization(0.1, 0.0) == 0.0


def test_poisson_percentile_hand_case_and_occupancy():
    # Mean 1: P(0) = 0.368, P(<= 1) = 0.736, P(<= 2) = 0.920.
    assert [poisson_percentile(1.0, p) for p in (30, 50, 90, 95)] == [0, 1, 2, 3]
    assert poisson_percentile(0.0, 99) == 0
    for batch in (1, 8, 64, 300):
        m = max_mean_occupancy(batch, 90)
        assert poisson_percentile(m, 90) <= batch < poisson_percentile(m * 1.001, 90)
        assert m < batch
    assert max_mean_occupancy(64) == 64.0
    assert round(max_mean_occupancy(64, 90)) == 55


@pytest.mark.parametrize("call, exc, name", [
    (lambda: md1_mean_wait_s(1.0, 1.0), ValueError, "arrival_rate_per_s x service_s"),
    (lambda: md1_mean_wait_s(-1, 1.0), ValueError, "arrival_rate_per_s"),
    (lambda: md1_mean_wait_s(0.1, 0), ValueError, "service_s"),
    (lambda: md1_wait_percentile_s(0.1, 1.0, 100), ValueError, "percentile"),
    (lambda: md1_wait_percentile_s(0.1, 1.0, None), ValueError, "percentile"),
    (lambda: md1_max_utilization(1.0, -1), ValueError, "wait_budget_s"),
    (lambda: poisson_percentile(-1, 50), ValueError, "mean"),
    (lambda: max_mean_occupancy(0, 90), ValueError, "batch"),
    (lambda: max_mean_occupancy(2.5, 90), TypeError, "batch"),
])
def test_bad_input_names_the_argument(call, exc, name):
    with pytest.raises(exc, match=name):
        call()
