"""Nothing that assumes the CPU: XLA options chosen per backend and per running XLA, stored executables keyed by
backend, jax version and devices, and one marginal fit shared by two (virtual CPU) devices with the estimates
of one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import irtexam
from irtexam.irt import compile_cache, devices
from irtexam.irt import examinee_blocks as eb
from irtexam.irt.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.filterwarnings("ignore")
def test_a_gpu_gets_xla_defaults_and_no_cpu_option_reaches_its_compiles(monkeypatch, tmp_path):
    """With the backend reported as 'gpu', every compile of a faceted MAP fit (L-BFGS objective, Laplace, draws,
    fit statistics) and of the stored executables gets no XLA option: the CPU options (jax 0.12's XLA refuses
    'xla_cpu_use_fusion_emitters', and a GPU compiler every xla_cpu_* one) stay on the CPU."""
    monkeypatch.setattr(compile_cache, "backend", lambda: "gpu")
    assert compile_cache.fast_compile_options() == {}
    seen: list[dict] = []
    real_compile, real_jit = jax.stages.Lowered.compile, jax.jit

    def compile_spy(self, compiler_options=None, **kwargs):
        seen.append(dict(compiler_options or {}))
        return real_compile(self, compiler_options=compiler_options, **kwargs)

    def jit_spy(fun, *args, **kwargs):
        seen.append(dict(kwargs.get("compiler_options") or {}))
        return real_jit(fun, *args, **kwargs)

    monkeypatch.setattr(jax.stages.Lowered, "compile", compile_spy)
    monkeypatch.setattr(jax, "jit", jit_spy)
    monkeypatch.setattr(compile_cache, "executable_dir", lambda: tmp_path)  # no stored executable: all compiled
    monkeypatch.setattr(compile_cache, "_MEMORY", {})
    responses, _ = simulate(8, 40, model="2pl", seed=3, facets={"llm": 2, "icl": 2})
    result = irtexam.fit(responses, model="2pl", facets=["llm", "icl"], method="map")
    assert np.isfinite(result.items["a"]).all()
    assert len(seen) > 3                          # the fit compiled through both paths
    assert all(options == {} for options in seen), [o for o in seen if o]


def test_cpu_options_are_only_those_the_running_xla_accepts(monkeypatch):
    """An option XLA does not know (as jax 0.12's XLA no longer knows 'xla_cpu_use_fusion_emitters') is dropped,
    not handed to every compile; those kept compile together."""
    monkeypatch.setattr(compile_cache, "backend", lambda: "cpu")
    bogus = "xla_cpu_irtexam_no_such_option"
    monkeypatch.setitem(compile_cache.BACKEND_FAST_OPTIONS, "cpu", {**compile_cache.CPU_FAST_OPTIONS, bogus: True})
    options = compile_cache.fast_compile_options()
    assert bogus not in options
    assert options.get("xla_backend_optimization_level") == 1  # known to XLA in jax 0.10 to 0.12
    compiled = jax.jit(lambda x: x * 3.0).lower(np.ones(2, np.float32)).compile(compiler_options=options)
    np.testing.assert_array_equal(np.asarray(compiled(np.ones(2, np.float32))), [3.0, 3.0])
    with pytest.raises(Exception):                             # the probe is not vacuous: XLA refuses it
        jax.jit(lambda x: x * 5.0).lower(np.ones(2, np.float32)).compile(compiler_options={bogus: True})


def test_stored_executables_are_keyed_by_backend_jax_version_and_device_count(monkeypatch):
    keys = {compile_cache.executable_key("k", ("parts",))}
    other_backend = "cpu" if compile_cache.backend() != "cpu" else "gpu"  # another than the one running (a GPU too)
    monkeypatch.setattr(compile_cache, "backend", lambda: other_backend)
    keys.add(compile_cache.executable_key("k", ("parts",)))
    monkeypatch.setattr(jax, "__version__", "0.0.1")
    keys.add(compile_cache.executable_key("k", ("parts",)))
    more_devices = jax.device_count() + 1
    monkeypatch.setattr(jax, "device_count", lambda *a: more_devices)
    keys.add(compile_cache.executable_key("k", ("parts",)))
    assert len(keys) == 4


def test_blocks_split_evenly_over_devices_and_padding_adds_no_response():
    assert eb.block_size(10, 7, multiple=2) == 8
    assert eb.block_size(100, 10**6, max_cells=1000, multiple=3) == 12
    responses, _ = simulate(5, 101, model="2pl", seed=1, missing=0.2)
    y, mask = np.where(responses.observed, responses.values, 0.0), responses.observed
    scores, groups = eb.response_blocks(y, mask, np.zeros(101, dtype=np.int32), max_cells=5 * 30, multiple=4)
    assert scores.shape == (4, 32, 5) and groups.shape == (4, 32)
    assert int((scores >= 0).sum()) == int(mask.sum()) and int((groups >= 0).sum()) == 101
    np.testing.assert_array_equal(scores.reshape(-1, 5)[:101].T >= 0, mask)  # examinees stay in order
    assert all(devices.device_spread(a) == 1 for a in devices.place_examinees(scores, groups))  # one device here


# Run in a subprocess: XLA_FLAGS must be set before jax starts. Several blocks of examinees (the scan's sums), a
# 3PL with missing cells and the exact information (the Louis Hessian's sums over examinees).
TWO_DEVICE_SCRIPT = r"""
import functools, json
import numpy as np
import jax
from irtexam.irt import devices, model as mdl
from irtexam.irt.marginal import em
from irtexam.irt.examinee_blocks import response_blocks
from irtexam.irt.simulate import simulate

spread = []
def place(*arrays):
    placed = devices.place_examinees(*arrays)
    spread.extend(devices.device_spread(a) for a in placed)
    return placed
em.place_examinees = place
em.response_blocks = functools.partial(response_blocks, max_cells=12 * 200)
responses, _ = simulate(12, 501, model="3pl", seed=4, missing=0.1)
y, mask = np.where(responses.observed, responses.values, 0.0), responses.observed
spec = mdl.ModelSpec(kind="3pl")
result = em.em_estimate(spec, y, mask)
with jax.enable_x64(True):
    blocks, groups = place(*em.response_blocks(y, mask, result.groups.index, 1, multiple=devices.examinee_multiple()))
    e_step = em.kernels(result.columns, spec, result.layout)["e_step"]
    text = e_step.lower(result.X, result.mean, result.log_sd, blocks, groups, result.nodes).compile().as_text()
print("RESULT " + json.dumps({
    "devices": jax.device_count(), "spread": spread, "n_blocks": int(blocks.shape[0]),
    "all_reduce": "all-reduce" in text, "information": result.information, "cycles": result.info["cycles"],
    "X": result.X.tolist(), "mean": result.mean.tolist(), "log_sd": result.log_sd.tolist(),
    "loglik": result.loglik, "se": np.sqrt(np.diag(result.covariance)).tolist(),
    "weights": result.weights.tolist()}))
"""


def run_fit(n_devices: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "IRTEXAM_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"  # virtual CPU devices, also where jax's default backend is a GPU (one device)
    if n_devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n_devices}"
    out = subprocess.run([sys.executable, "-c", TWO_DEVICE_SCRIPT], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


def test_two_devices_share_one_marginal_fit_with_the_estimates_of_one():
    """Two virtual CPU devices: the response blocks are split over both, the E-step's sums are cross-device
    reductions (all-reduce in the compiled program), and the estimates, standard errors, log-likelihood and
    posterior weights equal one device's to 1e-6."""
    one, two = run_fit(1), run_fit(2)
    assert one["devices"] == 1 and set(one["spread"]) == {1} and not one["all_reduce"]
    assert two["devices"] == 2 and set(two["spread"]) == {2} and two["all_reduce"]
    assert one["n_blocks"] == two["n_blocks"] > 1
    assert one["information"] == two["information"] == "observed"
    for name in ("X", "mean", "log_sd", "se", "weights"):
        np.testing.assert_allclose(np.asarray(two[name]), np.asarray(one[name]), rtol=0, atol=1e-6, err_msg=name)
    assert abs(two["loglik"] - one["loglik"]) < 1e-6
