"""The cluster the Dask tests of this folder fit on."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client():
    """Two in-process workers of one thread each, started and stopped per test module."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    with distributed.Client(cluster, set_as_default=False) as c:
        yield c
    cluster.close()
