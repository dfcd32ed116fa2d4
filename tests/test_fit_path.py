"""The `irtexam fit` fast path (issue 13): NumPy L-BFGS, stored executables, fit.nc, one-command parser."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import irtexam
from irtexam.irt import compile_cache, idata, kinds
from irtexam.irt.lbfgs import minimize_lbfgs


def _rosen(x):
    value = np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    grad = np.zeros_like(x)
    grad[:-1] = -400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    grad[1:] += 200.0 * (x[1:] - x[:-1] ** 2)
    return value, grad


def _logistic():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 20))
    y = (X @ rng.standard_normal(20) + rng.standard_normal(300) > 0).astype(float)

    def fun(b):
        z = X @ b
        return float(np.sum(np.logaddexp(0, z) - y * z) + 0.5 * b @ b), X.T @ (1 / (1 + np.exp(-z)) - y) + b
    return fun


@pytest.mark.parametrize("case", ["rosen", "logistic", "maxiter"])
def test_lbfgs_follows_scipy_lbfgsb(case):
    optimize = pytest.importorskip("scipy.optimize")
    fun, x0, opts = {"rosen": (_rosen, np.full(10, -1.2), dict(maxcor=10, gtol=1e-8, ftol=1e-12)),
                     "logistic": (_logistic(), np.zeros(20), dict(maxcor=20, gtol=1e-6, ftol=1e-9)),
                     "maxiter": (_rosen, np.full(30, -1.2), dict(maxcor=5, gtol=1e-10, ftol=0.0, maxiter=40))}[case]
    ref = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", options=opts)
    ours = minimize_lbfgs(fun, x0, **opts)
    assert (ours.nit, ours.nfev, ours.success) == (ref.nit, ref.nfev, ref.success)
    assert ours.message == ref.message
    np.testing.assert_allclose(ours.x, ref.x, rtol=0, atol=1e-8)


def test_lbfgs_stops_at_once_on_a_zero_gradient():
    result = minimize_lbfgs(lambda x: (float(x @ x), 2 * x), np.zeros(3))
    assert result.success and result.nit == 0 and result.nfev == 1


def test_fit_does_not_import_scipy_optimize():
    code = ("import sys, warnings; warnings.simplefilter('ignore'); import irtexam; "
            "r, _ = irtexam.simulate(30, 24, model='2pl', seed=1, facets={'llm': 2, 'icl': 3}); "
            "irtexam.fit(r, model='2pl', facets='llm,icl', method='map'); print('scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "IRTEXAM_JAX_CACHE": "0"})
    assert out.stdout.strip() == "False"


def test_compiled_executable_is_stored_loaded_and_replaced_when_broken(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_cache, "executable_dir", lambda: tmp_path)
    monkeypatch.setattr(compile_cache, "_MEMORY", {})
    unique = float(np.frombuffer(os.urandom(4), dtype=np.uint32)[0]) + 0.5  # a program JAX has not cached

    @jax.jit
    def f(x, y):
        return (x * y).sum() * unique

    args = (jnp.arange(4.0), jnp.ones(4))
    parts = ("test", unique)
    compiled = compile_cache.compiled_executable("test-f", parts, f, args)
    expected = float(compiled(*args))
    assert expected == pytest.approx(6.0 * unique)
    stored = list(tmp_path.glob("test-f-*.bin"))
    assert len(stored) == 1

    class NoTrace:  # a stored executable must be used without tracing
        def trace(self, *a):
            raise AssertionError("traced although an executable was stored")

    monkeypatch.setattr(compile_cache, "_MEMORY", {})
    loaded = compile_cache.compiled_executable("test-f", parts, NoTrace(), args)
    assert float(loaded(*args)) == expected

    stored[0].write_bytes(b"not an executable")
    monkeypatch.setattr(compile_cache, "_MEMORY", {})
    again = compile_cache.compiled_executable("test-f", parts, f, args)
    assert float(again(*args)) == expected
    assert not stored[0].exists() or stored[0].read_bytes() != b"not an executable"



def test_executable_checked_by_its_first_call_is_replaced_under_its_own_key_when_broken(tmp_path, monkeypatch):
    """check=False (the marginal EM's kernels): no trial run at load; a loaded executable that fails on its first
    call is deleted, the function traced and run instead, and anything stored again is under the same key (XLA
    options that differ from the defaults are part of the key once, not twice)."""
    monkeypatch.setattr(compile_cache, "executable_dir", lambda: tmp_path)
    monkeypatch.setattr(compile_cache, "_MEMORY", {})
    unique = float(np.frombuffer(os.urandom(4), dtype=np.uint32)[0]) + 0.25

    @jax.jit
    def f(x, y):
        return (x + y).sum() * unique

    args = (jnp.arange(4.0), jnp.ones(4))
    first = compile_cache.compiled_executable("test-h", ("t", unique), f, args, compiler_options={}, check=False)
    expected = float(first(*args))
    (stored,) = tmp_path.glob("test-h-*.bin")

    class Broken:
        def __call__(self, *a):
            raise RuntimeError("executable built for another machine")

    monkeypatch.setattr(compile_cache, "_MEMORY", {})
    monkeypatch.setattr(compile_cache, "_load", lambda path: Broken())
    loaded = compile_cache.compiled_executable("test-h", ("t", unique), f, args, compiler_options={}, check=False)
    assert isinstance(loaded, compile_cache._FirstCallChecked)  # no trial run at load
    assert stored.exists()
    assert float(loaded(*args)) == expected                       # the first call falls back to a fresh compile
    assert float(loaded(*args)) == expected
    # whatever the fresh compile leaves (an executable, or nothing when JAX's own cache answered) is under the
    # same key: no second file under a key with the options added twice
    assert {p.stem for p in tmp_path.iterdir()} <= {stored.stem}


_JAX_CACHE_SCENARIO = """
import os, sys, jax, jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", sys.argv[1] + "/jax")
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
from irtexam.irt import compile_cache
compile_cache.executable_dir = lambda: compile_cache.Path(sys.argv[1]) / "executables"
args = (jnp.arange(4.0), jnp.ones(4))
f = jax.jit(lambda x, y: (x * y).sum() * 3.0)
hits = []
jax.monitoring.register_event_listener(lambda event, **kw: hits.append(event)
                                       if event == "/jax/compilation_cache/cache_hits" else None)
"""


def _run_scenario(tmp_path: Path, body: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _JAX_CACHE_SCENARIO + body, str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_executable_is_stored_when_jax_cache_already_holds_the_program(tmp_path):
    """A machine whose JAX disk cache already holds the program as a plain jit (e.g. from before executables
    were kept): JAX would load it from there, and such an executable cannot be serialised, so it would never
    be stored; compiled_executable traces it under a name of its own, so JAX's cache misses and it is stored."""
    stored, value = _run_scenario(tmp_path, """
jax.block_until_ready(f(*args))                       # JAX's own cache now holds the plain jit
compiled = compile_cache.compiled_executable("test-g", ("test",), f, args)
print(len(list((compile_cache.Path(sys.argv[1]) / "executables").glob("test-g-*.bin"))), float(compiled(*args)))
""")
    assert int(stored) == 1 and float(value) == 18.0


def test_executable_is_stored_again_after_its_key_changes(tmp_path):
    """After an upgrade the key of an unchanged program changes (the key hashes irtexam's model code) while
    JAX's cache still holds the program compiled by an earlier process under the old key: the new process
    must compile and store it under the new key, not load it from JAX's cache (unstorable: every later
    process would trace it again, ~0.4 s for the faceted 3PL objective)."""
    # the XLA options' probe (compile_cache.fast_compile_options, a program of its own) may come from JAX's cache
    body = """
compile_cache.fast_compile_options(); hits.clear()
compile_cache.compiled_executable("test-upgrade", ("test", sys.argv[2]), f, args)
print(len(hits), len(list((compile_cache.Path(sys.argv[1]) / "executables").glob("test-upgrade-*.bin"))))
"""
    for version, expected_files in (("old", 1), ("new", 2)):
        out = subprocess.run([sys.executable, "-c", _JAX_CACHE_SCENARIO + body, str(tmp_path), version],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        hits, stored = map(int, out.stdout.split())
        assert hits == 0 and stored == expected_files, (version, hits, stored)


def test_executables_with_custom_calls_are_not_stored(tmp_path, monkeypatch):
    """A LAPACK solve compiles to a custom call; such an executable, loaded in a fresh process, crashes it
    (segmentation fault), so it is used but never written to disk."""
    monkeypatch.setattr(compile_cache, "executable_dir", lambda: tmp_path)
    monkeypatch.setattr(compile_cache, "_MEMORY", {})
    unique = float(np.frombuffer(os.urandom(4), dtype=np.uint32)[0]) + 0.75

    @jax.jit
    def solve(a, b):
        return jnp.linalg.solve(a, b) * unique

    args = (jnp.eye(3) * 2.0, jnp.ones(3))
    compiled = compile_cache.compiled_executable("test-solve", ("test", unique), solve, args)
    np.testing.assert_allclose(np.asarray(compiled(*args)), 0.5 * unique, rtol=1e-6)
    assert not compile_cache.storable(compiled)
    assert list(tmp_path.glob("*.bin")) == []
    assert len(list(tmp_path.glob("test-solve-*.nostore"))) == 1     # later processes compile it as usual

def test_pointwise_loglik_matches_cell_loglik_with_missing_cells():
    responses, _ = irtexam.simulate(40, 30, model="3pl", seed=5)
    values = responses.values.copy()
    values[np.random.default_rng(1).uniform(size=values.shape) < 0.3] = np.nan
    import dataclasses
    responses = dataclasses.replace(responses, values=values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = irtexam.fit(responses, model="3pl", draws=50)
    ours = idata.pointwise_loglik(result)
    s = result.samples
    items = kinds.ItemParams(a=s["a"][..., None], b=s["b"][..., None], c=s["c"][..., None])
    cells = np.asarray(kinds.cell_loglik(result.design.y[None], s["theta"][:, None, :], items, pairwise=True))
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours[0], cells[:, result.design.mask], rtol=1e-5, atol=1e-6)  # float32 vs float64


@pytest.mark.parametrize("z, c, y", [(20.0, 0.2, 0), (35.0, 0.2, 0), (60.0, 0.0, 0), (-20.0, 0.0, 1),
                                     (-30.0, 0.3, 1), (0.5, 0.25, 1), (0.5, 0.25, 0)])
def test_cell_loglik_keeps_its_digits_in_the_tails(z, c, y):
    """log P(0) = log(1 - c) - softplus(z) and log P(1) = log(c + (1 - c) sigmoid(z)) by hand (float64
    math module), against kinds.cell_loglik in NumPy float64 and float32, in JAX float32, and the
    likelihood module's JAX cells. Computing 1 - P as 1 - (c + (1 - c) s) gave -69 (the 1e-30 floor)
    for z = 20 in float32 and z = 60 in float64."""
    import math

    softplus = max(z, 0.0) + math.log1p(math.exp(-abs(z)))
    exact = (math.log(1.0 - c) - softplus if y == 0
             else math.log(c + (1.0 - c) * math.exp(z - softplus)) if c > 0 else z - softplus)
    a, b, theta = 2.0, -z / 4.0, z / 4.0  # a (theta - b) = z
    for dtype in (np.float64, np.float32):
        items = kinds.ItemParams(a=np.array([a], dtype), b=np.array([b], dtype), c=np.array([c], dtype))
        value = kinds.cell_loglik(np.array([[y]], dtype), np.array([theta], dtype), items)
        assert value.dtype == dtype
        np.testing.assert_allclose(float(value[0, 0]), exact, rtol=1e-5)
    jitems = kinds.ItemParams(a=jnp.array([a]), b=jnp.array([b]), c=jnp.array([c]))
    np.testing.assert_allclose(float(kinds.cell_loglik(jnp.array([[y]]), jnp.array([theta]), jitems)[0, 0]), exact,
                               rtol=1e-5)
    from irtexam.irt import likelihood as lk

    cells = lk.bernoulli_loglik_cells(jnp.array([[float(y)]]), jnp.array([[theta]]), jnp.array([[a]]),
                                      jnp.array([[b]]), jnp.array([[c]]))
    np.testing.assert_allclose(float(cells[0, 0]), exact, rtol=1e-5)


def test_fit_nc_supports_arviz_loo(tmp_path):
    az = pytest.importorskip("arviz")
    responses, _ = irtexam.simulate(30, 40, model="2pl", seed=2, facets={"llm": 2, "icl": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = irtexam.fit(responses, model="2pl", facets="llm,icl", draws=100, method="map")
        result.save(tmp_path / "fit")
        data = az.from_netcdf(str(tmp_path / "fit" / "fit.nc"))
        loo = az.loo(data)
    assert data.log_likelihood["y"].shape == (1, 100, int(result.design.mask.sum()))
    np.testing.assert_array_equal(data.log_likelihood["y"].values, idata.pointwise_loglik(result))
    assert np.isfinite(loo.elpd_loo)


def test_cli_registers_only_the_named_command():
    from irtexam.cli import build_parser

    only_fit = build_parser("fit")
    assert set(only_fit._subparsers._group_actions[0].choices) == {"fit"}
    assert set(build_parser("import-lm-eval")._subparsers._group_actions[0].choices) == {"import-lm-eval"}
    everything = set(build_parser()._subparsers._group_actions[0].choices)
    assert {"fit", "simulate", "demo", "grade"} <= everything
    assert set(build_parser("no-such-command")._subparsers._group_actions[0].choices) == everything


def test_nuts_fit_nc_keeps_sample_stats(tmp_path):
    az = pytest.importorskip("arviz")
    responses, _ = irtexam.simulate(15, None, model="2pl", seed=1, facets={"llm": 2, "icl": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = irtexam.fit(responses, model="2pl", facets="llm,icl", method="nuts", chains=2, warmup=30, samples=30)
        result.save(tmp_path / "fit")  # boolean `diverging` included (h5netcdf refused it)
        data = az.from_netcdf(str(tmp_path / "fit" / "fit.nc"))
    assert data.sample_stats["diverging"].dtype == bool
    assert data.posterior["theta_llm"].shape == (2, 30, 2)
    np.testing.assert_array_equal(data.sample_stats["diverging"].values,
                                  np.asarray(result.sample_stats["diverging"]).reshape(2, 30))
    assert list(data.posterior["theta_llm"].coords["llm"].values) == list(result.design.facet_levels["llm"])


def test_script_exit_skips_teardown_but_keeps_output_and_exit_code(tmp_path):
    """As the script (``main()`` without arguments) a statistics command ends with os._exit after flushing:
    its printed lines, its files and its exit code (0, or 2 with a one-line error) are all there."""
    code = ("import sys; from irtexam.cli import main; sys.argv = ['irtexam'] + sys.argv[1:]; "
            "print('returned', main())")
    root = Path(__file__).resolve().parents[1]
    ok = subprocess.run([sys.executable, "-c", code, "fit", str(root / "data/real_run/responses.csv.gz"),
                         "--model", "1pl", "--out", str(tmp_path / "fit")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "wrote" in ok.stdout and "returned" not in ok.stdout          # ended inside main(), after printing
    assert (tmp_path / "fit" / "items.csv").stat().st_size > 0 and (tmp_path / "fit" / "meta.json").exists()
    bad = subprocess.run([sys.executable, "-c", code, "fit", str(tmp_path / "missing.csv"), "--out",
                          str(tmp_path / "x")], capture_output=True, text=True)
    assert bad.returncode == 2 and "file not found" in bad.stderr and "returned" not in bad.stdout


def test_first_compile_of_a_process_leaves_jax_cache_on(tmp_path):
    """compiled_executable as the first compile of a process must not turn JAX's persistent cache off for the
    rest of it (JAX decides once per process whether its cache is used): a later ordinary jit compile is
    still written to the cache folder."""
    code = f"""
import os, jax, jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", {str(tmp_path / 'jax')!r})
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
from irtexam.irt import compile_cache
f = jax.jit(lambda x, y: (x * y).sum())
compile_cache.compiled_executable("first", ("t",), f, (jnp.ones(3), jnp.ones(3)))
before = set(os.listdir({str(tmp_path / 'jax')!r}))
g = jax.jit(lambda x: jnp.cumsum(x) * 3.0)
g(jnp.arange(5.0)).block_until_ready()
after = set(os.listdir({str(tmp_path / 'jax')!r}))
print(len(after - before))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip().splitlines()[-1]) >= 1
