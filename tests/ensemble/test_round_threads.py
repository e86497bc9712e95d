"""RoundThreads: boosting rounds leave the threads only while the host takes CPU time and
one-thread rounds measure faster; the model never depends on the choice."""

from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

from cipherforest.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from cipherforest.ensemble import _gradient_boosting as gb
from cipherforest.ensemble import _round_threads as rt


class FakeHost:
    """A clock and ``/proc/stat`` counters: ``steal_share`` of every tick is stolen; a round
    takes ``seconds[mode]`` (mode True: threads)."""

    def __init__(self, steal_share, threaded_s, single_s):
        self.now = 0.0
        self.steal_share = steal_share
        self.seconds = {True: threaded_s, False: single_s}
        self.available = True

    def clock(self):
        return self.now

    def steal_ticks(self):
        if not self.available:
            return None
        total = int(self.now * 1000)
        return int(self.steal_share * total), total


def run_rounds(chooser, host, n_rounds):
    modes = []
    for _ in range(n_rounds):
        threaded = chooser.threaded()
        host.now += host.seconds[threaded]
        chooser.round_done()
        modes.append(threaded)
    return modes


def test_a_quiet_host_keeps_every_round_on_the_threads():
    host = FakeHost(steal_share=0.01, threaded_s=0.2, single_s=0.05)  # single would win
    chooser = rt.RoundThreads(host.steal_ticks, host.clock)
    assert all(run_rounds(chooser, host, 200))
    assert chooser.probes == 0 and chooser.single_thread_rounds == 0


def test_without_steal_counters_every_round_uses_the_threads():
    host = FakeHost(steal_share=0.5, threaded_s=0.2, single_s=0.05)
    host.available = False
    chooser = rt.RoundThreads(host.steal_ticks, host.clock)
    assert all(run_rounds(chooser, host, 100))
    assert chooser.probes == 0


def probe_starts(modes, probed_mode):
    """First rounds of the runs of ``probed_mode`` (each a probe of PROBE_ROUNDS rounds)."""
    starts = [i for i, mode in enumerate(modes)
              if mode == probed_mode and (i == 0 or modes[i - 1] != probed_mode)]
    for start in starts:
        assert modes[start:start + rt.PROBE_ROUNDS] == [probed_mode] * rt.PROBE_ROUNDS
    return starts


def test_a_contended_host_moves_to_one_thread_when_it_measures_faster():
    host = FakeHost(steal_share=0.3, threaded_s=0.2, single_s=0.1)
    chooser = rt.RoundThreads(host.steal_ticks, host.clock)
    modes = run_rounds(chooser, host, 300)
    first_single = modes.index(False)
    # Once the steal is read (0.5 s) and RECENT_ROUNDS threaded rounds are recorded, the
    # first probe switches.
    assert first_single <= rt.MIN_PROBE_GAP + rt.RECENT_ROUNDS
    assert chooser.switches == 1 and not chooser.use_threads
    # From then on only probes use the threads, ever more rarely (the gap doubles).
    starts = probe_starts(modes[first_single:], True)
    assert 3 <= len(starts) <= 8
    gaps = np.diff(starts)
    assert np.all(gaps[1:] >= gaps[:-1])
    assert gaps.max() <= rt.MAX_PROBE_GAP + rt.PROBE_ROUNDS
    assert chooser.probes == len(starts) + 1


def test_a_contended_host_keeps_the_threads_while_they_win():
    # One thread 5 % faster: within the margin, so not worth a switch.
    host = FakeHost(steal_share=0.3, threaded_s=0.1, single_s=0.095)
    chooser = rt.RoundThreads(host.steal_ticks, host.clock)
    modes = run_rounds(chooser, host, 300)
    assert chooser.switches == 0 and chooser.use_threads
    # Probes: gaps 4, 8, 16, 32, 64, 64, ... rounds.
    assert len(probe_starts(modes, False)) == chooser.probes
    assert chooser.probes * rt.PROBE_ROUNDS == modes.count(False)
    assert 5 <= chooser.probes <= 8


def test_a_slower_probe_round_among_fast_ones_does_not_switch():
    """The probe's median decides: one fast round among slow ones is noise."""
    host = FakeHost(steal_share=0.3, threaded_s=0.2, single_s=0.3)
    chooser = rt.RoundThreads(host.steal_ticks, host.clock)
    lucky = iter([0.05])  # the first probe round only is fast

    modes = []
    for _ in range(60):
        threaded = chooser.threaded()
        host.now += host.seconds[True] if threaded else next(lucky, 0.3)
        chooser.round_done()
        modes.append(threaded)
    assert chooser.switches == 0 and chooser.probes >= 2


def test_one_thread_fits_return_to_the_threads_when_they_win_again():
    host = FakeHost(steal_share=0.3, threaded_s=0.2, single_s=0.1)
    chooser = rt.RoundThreads(host.steal_ticks, host.clock)
    run_rounds(chooser, host, 40)
    assert not chooser.use_threads
    host.steal_share = 0.0  # the host quiet again: the threads are twice as fast
    host.seconds = {True: 0.05, False: 0.1}
    modes = run_rounds(chooser, host, 200)
    assert chooser.use_threads and chooser.switches == 2
    assert all(modes[-100:])  # quiet: no more probes of one thread


def test_steal_ticks_come_from_proc_stat():
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat here")
    steal, total = rt.read_steal_ticks()
    assert 0 <= steal <= total and total > 0


class FlippingRoundThreads(rt.RoundThreads):
    """Every probe wins (it takes half a round): the fit switches between the threads and
    one thread every few rounds."""

    def __init__(self):
        self.fake_now = 0.0
        self.ticks = 0
        super().__init__(self._steal, lambda: self.fake_now)

    def _steal(self):
        self.ticks += 100
        return self.ticks, self.ticks  # all stolen

    def round_done(self):
        self.fake_now += 0.3 if self._probe is not None else 0.6
        super().round_done()


@pytest.mark.parametrize("n_classes", [2, 3])
def test_switching_between_threads_and_one_thread_leaves_the_model_unchanged(monkeypatch,
                                                                             n_classes):
    monkeypatch.setattr(gb, "RoundThreads", FlippingRoundThreads)
    X, y = make_classification(600, 6, n_informative=4, n_classes=n_classes, random_state=1)
    params = dict(n_estimators=30, max_leaf_nodes=7, max_depth=None, max_bins=32,
                  random_state=0)
    serial = GradientBoostingClassifier(**params, n_jobs=1).fit(X, y)
    switching = GradientBoostingClassifier(**params, n_jobs=2).fit(X, y)
    chooser = switching._round_threads
    assert chooser.switches >= 3 and 0 < chooser.single_thread_rounds < 30
    assert np.array_equal(serial.train_score_, switching.train_score_)
    assert np.array_equal(serial.decision_function(X), switching.decision_function(X))


def test_switching_regression_model_is_unchanged(monkeypatch):
    monkeypatch.setattr(gb, "RoundThreads", FlippingRoundThreads)
    X, y = make_regression(600, 5, random_state=2)
    params = dict(n_estimators=25, max_leaf_nodes=7, max_depth=None, max_bins=32,
                  random_state=0)
    serial = GradientBoostingRegressor(**params, n_jobs=1).fit(X, y)
    switching = GradientBoostingRegressor(**params, n_jobs=2).fit(X, y)
    assert switching._round_threads.switches >= 2
    assert np.array_equal(serial.train_score_, switching.train_score_)
    assert np.array_equal(serial.predict(X), switching.predict(X))
