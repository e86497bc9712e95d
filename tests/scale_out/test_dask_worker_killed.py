"""A Dask worker process killed (SIGKILL) in the middle of a data-parallel fit.

Proves: whichever worker dies — the one driving the fit or the other — the fit ends with a
``WorkerLostError`` naming that worker's address (no hang, no model trained on part of the
rows), and the estimator stays unfitted. The other tests of this folder simulate a lost
worker by a failing call inside one process; this one kills a real worker process.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from sklearn.datasets import make_classification

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from cipherforest.dask import (  # noqa: E402
    DaskGradientBoostingClassifier,
    DaskRandomForestClassifier,
    WorkerLostError,
)

pytestmark = pytest.mark.slow

# Far more work than the seconds before the kill: the fit must still be running then.
ESTIMATORS = {
    "boosting": lambda client: DaskGradientBoostingClassifier(
        client=client, n_estimators=5000, max_leaf_nodes=31, max_bins=64, random_state=0),
    "forest": lambda client: DaskRandomForestClassifier(
        client=client, n_estimators=2000, max_bins=64, random_state=0),
}


def _actors_on_every_worker(client) -> bool:
    def count(dask_worker):
        return len(dask_worker.state.actors)

    return all(n > 0 for n in client.run(count).values())


@pytest.mark.parametrize(("model", "victim"),
                         [("boosting", "peer"), ("forest", "peer"), ("forest", "driver")])
def test_a_worker_killed_mid_fit_is_named_and_nothing_is_fitted(model, victim):
    X, y = make_classification(20000, 10, n_informative=6, random_state=0)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        X_da = client.persist(da.from_array(X, chunks=(5000, 10)))
        y_da = client.persist(da.from_array(y, chunks=5000))
        with client.as_current():
            distributed.wait([X_da, y_da])
        estimator = ESTIMATORS[model](client)
        outcome: dict = {}

        def fit():
            try:
                estimator.fit(X_da, y_da)
                outcome["fitted"] = True
            except BaseException as error:  # reported to the test's thread
                outcome["error"] = error

        thread = threading.Thread(target=fit, daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while not _actors_on_every_worker(client):
            assert thread.is_alive() and time.monotonic() < deadline, outcome
            time.sleep(0.1)
        time.sleep(1.0)  # into the rounds
        pids = client.run(os.getpid)
        # The fit is driven from the first worker (sorted addresses) and calls the others.
        address = sorted(pids)[0 if victim == "driver" else 1]
        os.kill(pids[address], signal.SIGKILL)
        thread.join(timeout=120)
        assert not thread.is_alive(), "the fit hung after a worker was killed"
    assert "fitted" not in outcome, "a fit went on without the killed worker's rows"
    error = outcome["error"]
    assert isinstance(error, WorkerLostError), repr(error)
    assert address in str(error) and "no model was fitted" in str(error)
    assert not hasattr(estimator, "model_") and not hasattr(estimator, "classes_")
