"""pytest plugin loaded (as ``conftest.py``) into the folder of copied scikit-learn tests.

It does three things in every pytest process (controller and xdist workers):

* registers scikit-learn's own ``sklearn.conftest`` so the copied tests find their fixtures
  (``global_random_seed``, ``global_dtype``, ``pyplot`` ...);
* marks a test id as *exercising our estimators* when, during its setup or call phase,
  ``__init__`` or ``fit`` of a cipherforest estimator class ran (any class in the MRO of the
  classes the rewritten imports bind that is defined in the ``cipherforest`` package);
* in the controller, writes one JSON record per test id (outcome + that flag) to the file
  named by the ``CIPHERFOREST_UPSTREAM_RESULTS`` environment variable.

A per-test wall-clock limit (``CIPHERFOREST_UPSTREAM_TIMEOUT`` seconds, SIGALRM) turns a
runaway test into a failure instead of a hung run.
"""

import functools
import json
import os
import signal

import pytest

pytest_plugins = ["sklearn.conftest"]

_EXERCISED = [False]
_ESTIMATOR_NAMES = {
    "cipherforest.tree": [
        "DecisionTreeClassifier",
        "DecisionTreeRegressor",
        "ExtraTreeClassifier",
        "ExtraTreeRegressor",
    ],
    "cipherforest.ensemble": [
        "AdaBoostClassifier",
        "AdaBoostRegressor",
        "BaggingClassifier",
        "BaggingRegressor",
        "ExtraTreesClassifier",
        "ExtraTreesRegressor",
        "GradientBoostingClassifier",
        "GradientBoostingRegressor",
        "RandomForestClassifier",
        "RandomForestRegressor",
    ],
}


def _flagging(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        _EXERCISED[0] = True
        return method(*args, **kwargs)

    return wrapper


def _instrument_cipherforest():
    import importlib

    wrapped = set()
    for module_name, names in _ESTIMATOR_NAMES.items():
        module = importlib.import_module(module_name)
        for name in names:
            cls = getattr(module, name, None)
            if cls is None:
                continue
            for klass in cls.__mro__:
                if not klass.__module__.startswith("cipherforest"):
                    continue
                for method_name in ("__init__", "fit"):
                    key = (klass, method_name)
                    if method_name in klass.__dict__ and key not in wrapped:
                        setattr(klass, method_name, _flagging(klass.__dict__[method_name]))
                        wrapped.add(key)


_instrument_cipherforest()


def _on_alarm(signum, frame):
    raise TimeoutError(
        f"upstream test exceeded CIPHERFOREST_UPSTREAM_TIMEOUT="
        f"{os.environ.get('CIPHERFOREST_UPSTREAM_TIMEOUT')} s"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _EXERCISED[0] = False
    timeout = int(os.environ.get("CIPHERFOREST_UPSTREAM_TIMEOUT", "0"))
    if timeout > 0:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(timeout)
    try:
        yield
    finally:
        if timeout > 0:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.user_properties.append(("cipherforest_exercised", bool(_EXERCISED[0])))


_RECORDS = {}


def _outcome_of(report):
    if hasattr(report, "wasxfail"):
        return "xpassed" if report.passed else "xfailed"
    return report.outcome  # passed / failed / skipped


def pytest_runtest_logreport(report):
    record = _RECORDS.setdefault(
        report.nodeid, {"outcome": "passed", "exercised": False, "message": ""}
    )
    record["exercised"] = record["exercised"] or any(
        value for key, value in report.user_properties if key == "cipherforest_exercised"
    )
    outcome = _outcome_of(report)
    if report.when == "call" or outcome != "passed":
        if record["outcome"] != "failed":
            record["outcome"] = outcome
    if report.failed and not record["message"]:
        crash = getattr(report.longrepr, "reprcrash", None)
        record["message"] = (crash.message if crash is not None else str(report.longrepr))[:300]


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):
        return
    path = os.environ.get("CIPHERFOREST_UPSTREAM_RESULTS")
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(_RECORDS, handle, indent=0, sort_keys=True)
