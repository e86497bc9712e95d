"""Name the grower's numba functions for ``perf``: where a boosting fit's kernel time goes,
by function, without the per-call Python dispatch that replaying kernels one by one adds.

Numba compiles into memory that ``perf`` cannot name. This script compiles the kernels
afresh (an empty, temporary numba cache: cached code carries no LLVM module to read the
symbols from), fits one model, then writes ``/tmp/perf-<pid>.map``, perf's map of JIT
code, with the address of every function in the grower kernel's compiled module
(``grow_tree`` and the kernels inlined into or linked with it)::

    perf record -F 5000 -o /tmp/fit.data python dev/kernel_perf_map.py pendigits
    perf report -i /tmp/fit.data --sort symbol | grep -E '_histogram|_grower|_node_threads'

The shares among those lines are the kernel's profile (the rest of the samples are the
compilation and Python). A function's range ends where the next mapped one starts, so code
of other modules placed in between is counted to the function before it: trust the large
shares, not a fraction of a percent. Linux with ``perf`` only. ``MODEL`` is a model name of
``ensembles.py`` (default ``ours_gb_hist_1thread``: one thread, so the samples are the fit's
own).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path


def short_name(symbol: str) -> str:
    """``module.function`` from a numba symbol's Itanium-style mangled name."""
    text = symbol[3:] if symbol.startswith("_ZN") else symbol
    parts, i = [], 0
    while i < len(text) and text[i].isdigit():
        j = i
        while j < len(text) and text[j].isdigit():
            j += 1
        length = int(text[i:j])
        parts.append(text[j:j + length])
        i = j + length
    return ".".join(parts[-2:]) if parts else symbol[:60]


def write_perf_map(dispatcher) -> int:
    """Write perf's map for every function defined in ``dispatcher``'s compiled modules;
    returns how many were mapped."""
    addresses = {}
    for compiled in dispatcher.overloads.values():
        library = compiled.library
        module = getattr(library, "_final_module", None)
        if module is None:  # loaded from a cache: no module to read
            continue
        for function in module.functions:
            if function.is_declaration:
                continue
            try:
                address = library.get_pointer_to_function(function.name)
            except Exception:  # internal symbols the JIT did not export
                address = 0
            if address:
                addresses[address] = function.name
    ordered = sorted(addresses.items())
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as out:
        for k, (address, name) in enumerate(ordered):
            size = ordered[k + 1][0] - address if k + 1 < len(ordered) else 1 << 16
            out.write(f"{address:x} {min(size, 1 << 20):x} {short_name(name)}\n")
    return len(ordered)


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    dataset = sys.argv[1]
    model_name = sys.argv[2] if len(sys.argv) > 2 else "ours_gb_hist_1thread"
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="cipherforest-perf-")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from cipherforest.tree import _grower
    from ensembles import is_regression, load_dataset, make_model

    X, _, y, _ = load_dataset(dataset)
    regression = is_regression(dataset)
    make_model(model_name, regression).set_params(n_estimators=3).fit(X[:3000], y[:3000])
    mapped = write_perf_map(_grower.grow_tree)
    model = make_model(model_name, regression)
    start = time.perf_counter()
    model.fit(X, y)
    print(f"{dataset}, {model_name}: fit {time.perf_counter() - start:.2f} s; {mapped} "
          f"functions mapped in /tmp/perf-{os.getpid()}.map")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
