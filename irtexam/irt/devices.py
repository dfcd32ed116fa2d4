"""One fit shared by several devices: the examinees' responses spread over them with ``jax.sharding``.

When jax sees more than one device of its default backend (several GPUs; or CPU devices made with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``), :func:`place_examinees` puts the response blocks of
:func:`irtexam.irt.examinee_blocks.response_blocks` on a 1-D mesh over the examinee axis of each block: every
device holds 1/n of each block's examinees. The marginal estimator's jitted sums over examinees (the E-step's
expected counts and log-likelihood, the posterior weights, the information's cross products) then run where
the responses are, and XLA adds the cross-device reductions itself; the item parameters, the nodes and the
population stay replicated (small). Nothing else of the fit changes: the same kernels, the same estimates.

``IRTEXAM_DEVICES=N`` uses the first N devices only (``1``: no sharding); by default all of them.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

EXAMINEE_AXIS = "examinees"


def fit_devices() -> list[Any]:
    """The devices a fit shares: jax's devices of its default backend, the first ``$IRTEXAM_DEVICES`` of them."""
    devices = jax.devices()
    wanted = os.environ.get("IRTEXAM_DEVICES", "").strip()
    if wanted.isdigit() and int(wanted) >= 1:
        devices = devices[:int(wanted)]
    return devices


def examinee_multiple() -> int:
    """How many devices share the examinees: each block's examinee count must be a multiple of it."""
    return len(fit_devices())


def examinee_mesh(devices: Sequence[Any]) -> Mesh:
    """A 1-D mesh over ``devices`` whose one axis is the examinees (:data:`EXAMINEE_AXIS`)."""
    return Mesh(np.asarray(devices, dtype=object), (EXAMINEE_AXIS,))


def block_sharding(mesh: Mesh, ndim: int) -> NamedSharding:
    """Arrays (n_blocks, B, ...) of ``ndim`` axes split along B (the examinees of a block), whole along the rest."""
    return NamedSharding(mesh, PartitionSpec(None, EXAMINEE_AXIS, *([None] * (ndim - 2))))


def place_examinees(*arrays: np.ndarray) -> tuple[Any, ...]:
    """``arrays`` (n_blocks, B, ...), the response blocks and the examinees' groups, on the fit's devices: sharded
    over the examinees of each block when there are several (B must be a multiple of their number: pass
    ``multiple=examinee_multiple()`` to ``response_blocks``), else put on the one device."""
    devices = fit_devices()
    if len(devices) == 1:
        return tuple(jax.device_put(array) for array in arrays)
    for array in arrays:
        if np.ndim(array) < 2 or np.shape(array)[1] % len(devices):
            raise ValueError(f"blocks of shape {np.shape(array)} cannot be split over {len(devices)} devices "
                             "along their examinees (axis 1)")
    mesh = examinee_mesh(devices)
    return tuple(jax.device_put(array, block_sharding(mesh, np.ndim(array))) for array in arrays)


def device_spread(array: Any) -> int:
    """On how many devices ``array`` lies (1 for host arrays)."""
    sharding = getattr(array, "sharding", None)
    return len(sharding.device_set) if sharding is not None else 1


def placing_arguments(compiled: Any) -> Any:
    """``compiled`` (an executable from ``jit(...).lower(...).compile()``), or, when it runs on several devices, a
    callable that first puts its arguments where it expects them: an executable is compiled for its arguments'
    placement (the sharded responses, replicated parameters, one device's arrays), and refuses a committed
    array placed otherwise (the E-step's counts, replicated over the mesh, passed to the M-step compiled for
    host zeros). One device: ``compiled`` itself, so a one-device fit calls it as before."""
    if jax.device_count() == 1:
        return compiled
    try:
        shardings = compiled.input_shardings[0]
    except Exception:  # noqa: BLE001 - not an executable jax can tell this of: call it as it is
        return compiled
    return _PlacedExecutable(compiled, shardings)


class _PlacedExecutable:
    """An executable whose arguments are put on its input shardings (a no-op for those already there)."""

    def __init__(self, compiled: Any, shardings: Any) -> None:
        self.compiled, self.shardings = compiled, shardings

    def __call__(self, *args: Any) -> Any:
        return self.compiled(*jax.device_put(args, tuple(self.shardings)))

    def as_text(self) -> str:
        return self.compiled.as_text()
