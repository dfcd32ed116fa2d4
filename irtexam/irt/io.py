"""Save and load fitted models as a directory of plain files.

    items.csv         item, a, b, c (GRM: b_1..b_K), each with _sd, _low, _high (90% intervals)
    examinees.csv     examinee, theta, theta_sd, theta_low, theta_high, facet columns
    facets.csv        facet, level, theta, theta_sd, theta_low, theta_high, n_examinees (hierarchical fits)
    contrasts.csv     facet, level, reference, diff, sd, low, high, prob_greater
    draws.npz         the posterior draws every interval comes from (float32)
    params.npz        unconstrained point estimates (warm starts) and the Laplace covariance
    meta.json         model spec, method, fit statistics, draw diagnostics, warnings
    responses.npz     the response matrix that was fitted: int8 scores (-1 missing), ids, facets
                      (:func:`write_matrix_npz`); responses.parquet, the long table (zstd),
                      for a matrix with item metadata columns or scores that are not small whole numbers
    fit.nc            arviz InferenceData (posterior, log_likelihood, sample_stats, observed_data)

This module does not import :class:`irtexam.irt.result.FitResult`: :func:`save_fit` takes
any object with its attributes and :func:`read_fit` returns its constructor arguments.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..errors import InputError
from ..io_tables import missing_coded, whole_scores_fit
from ..memory import row_blocks
from ..paths import file_sha256
from ..responses import ResponseMatrix
from . import model as mdl
from .design import score_dtype
from .draws import DrawDiagnostics
from .laplace import LaplaceCovariance, StandardisedPersonPrecision


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def save_fit(result, directory: str | Path, netcdf: bool = True) -> Path:
    """Write a fit result to ``directory`` (created if needed); ``netcdf=False`` skips fit.nc.

    The fit's files are always one complete fit: they are written into a hidden sibling folder, which then
    takes the place of ``directory`` in one atomic exchange (an earlier fit's files are removed, never mixed
    with this one; an interrupted save leaves the earlier fit as it was). Entries of ``directory`` the fit
    did not write (the input table of a refit, notes, an ``info`` folder) stay (:mod:`irtexam.outdirs`); a
    non-empty folder that holds no fit is refused. Two saves to one folder take turns (a lock file beside
    it). ``meta.json`` records a run id and every file's size and SHA-256, which :func:`read_fit` checks.
    """
    from ..outdirs import folder_lock, hidden_sibling, put_in_place

    directory = check_output_folder(directory)
    with contextlib.ExitStack() as stack:
        try:
            directory.parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(folder_lock(directory))
            staging = Path(tempfile.mkdtemp(prefix=hidden_sibling(directory, "").name, suffix=".partial",
                                            dir=directory.parent))
        except OSError as exc:
            raise InputError(f"cannot write the fit folder here ({exc.strerror})", path=str(directory)) from None
        try:
            _write_fit(result, staging, netcdf)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        put_in_place(staging, directory, "fit")
    return directory


def check_output_folder(directory: str | Path) -> Path:
    """The resolved path of a fit folder to write, or a one-line error before any work: a file, a non-empty
    folder that holds no fit (its files are not the fit's to replace), or a place where nothing can be
    written."""
    from ..outdirs import owned_entries

    directory = Path(directory).resolve()
    owned_entries(directory, "fit")
    parent = directory.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot write the fit folder: {parent} is not a writable folder", path=str(directory))
    return directory


CSV_CHUNK_ROWS = 1000


def _write_fit(result, directory: Path, netcdf: bool) -> None:
    """Every file of a fit folder into ``directory`` (an empty staging folder), meta.json last.

    The responses' fingerprint and each file's SHA-256 are computed on a second thread while the next files are
    written (hashlib and numpy's casts release the GIL): on a 12,032 x 2,211 3PL (255 MB of files) that takes
    about 0.8 s off the write."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as hasher:
        fingerprint = (hasher.submit(result.responses.fingerprint) if hasattr(result.responses, "fingerprint")
                       else None)
        digests: dict[str, Any] = {}

        def written(path: Path) -> None:
            digests[path.name] = hasher.submit(file_sha256, path)

        _write_files(result, directory, netcdf, written)
        meta = _meta(result, None if fingerprint is None else fingerprint.result())
        meta["run_id"] = uuid.uuid4().hex
        files = sorted(p for p in directory.iterdir() if p.is_file())
        meta["files"] = {p.name: p.stat().st_size for p in files}
        meta["sha256"] = {p.name: (digests[p.name].result() if p.name in digests else file_sha256(p)) for p in files}
    (directory / "meta.json").write_text(json.dumps(_jsonable(meta), indent=2))


def _write_files(result, directory: Path, netcdf: bool, written: Callable[[Path], None]) -> None:
    """The fit folder's data files (every one but meta.json), ``written`` called with each path once it is whole."""
    # 1,000 rows a chunk: pandas formats a chunk's numbers as Python strings (its default, 8,333 rows of 12 columns,
    # took 24 MB at 12,032 items); the file is the same
    result.items.to_csv(directory / "items.csv", chunksize=CSV_CHUNK_ROWS)
    written(directory / "items.csv")
    result.examinees.to_csv(directory / "examinees.csv", chunksize=CSV_CHUNK_ROWS)
    written(directory / "examinees.csv")
    if result.facets is not None:
        result.facets.to_csv(directory / "facets.csv", index=False)
        result.contrasts.to_csv(directory / "contrasts.csv", index=False)
        written(directory / "facets.csv")
        written(directory / "contrasts.csv")
    if result.diagnostics is not None:
        result.diagnostics.to_csv(directory / "diagnostics.csv", index=False)
        written(directory / "diagnostics.csv")
    if result.samples is not None:
        save_npz_by_blocks(directory / "draws.npz",
                           {k: np.asarray(v, dtype=np.float32) for k, v in result.samples.items()})
        written(directory / "draws.npz")
    if result.sample_stats:
        np.savez(directory / "sample_stats.npz", **result.sample_stats)
        written(directory / "sample_stats.npz")
    if netcdf:
        from .idata import write_netcdf
        write_netcdf(result, directory / "fit.nc")
        written(directory / "fit.nc")
    arrays = {f"param__{k}": np.asarray(v) for k, v in result.params.items()}
    if result.laplace is not None:
        cov = result.laplace
        arrays["laplace__item_cov"] = cov.item_cov
        if cov.person_precision is not None:  # structured: O(n) numbers, not two n x n matrices
            precision = cov.person_precision
            arrays.update({"laplace__w": precision.w, "laplace__prior": precision.prior, "laplace__V": precision.V,
                           "laplace__sd": np.asarray(precision.sd)})
        else:
            arrays.update({"laplace__person_cov": cov.person_cov, "laplace__M": cov.M})
    np.savez(directory / "params.npz", **arrays)
    written(directory / "params.npz")
    written(_save_responses(result.responses, directory))


def save_npz_by_blocks(path: Path, arrays: dict[str, np.ndarray], block_bytes: int = 1 << 22) -> None:
    """What ``np.savez(path, **arrays)`` writes (an uncompressed zip of .npy files, C order), each array written a
    block of its first axis at a time: np.savez copies an array whole on its way into the zip (the draws of 12,032
    items are strided views of one block, 23 MB each), this only ``block_bytes`` of it."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            value = np.asanyarray(value)
            header = np.lib.format.header_data_from_array_1_0(value)
            header["fortran_order"] = False
            with archive.open(f"{name}.npy", "w", force_zip64=True) as handle:
                np.lib.format.write_array_header_1_0(handle, header)
                if value.ndim == 0 or value.size == 0:
                    handle.write(np.ascontiguousarray(value).tobytes())
                    continue
                rows = max(1, block_bytes // max(value[0].nbytes, 1))
                for start in range(0, value.shape[0], rows):
                    handle.write(np.ascontiguousarray(value[start:start + rows]).data)


def _meta(result, responses_sha256: str | None) -> dict[str, Any]:
    """meta.json's content but the run id and the files' sizes and digests."""
    draw_diag = getattr(result, "draw_diagnostics", None)
    return {
        "spec": dataclasses.asdict(result.spec),
        "method": result.method,
        "seed": result.seed,
        "chains": result.chains,
        "fit_stats": result.fit_stats,
        "draws": None if draw_diag is None else draw_diag.as_dict(),
        "warnings": result.warnings,
        "laplace": None if result.laplace is None else {
            "item_keys": list(result.laplace.item_keys),
            "item_slices": {k: [s.start, s.stop] for k, s in result.laplace.item_slices.items()},
            "person_keys": list(result.laplace.person_keys),
            "person_slices": {k: [s.start, s.stop] for k, s in result.laplace.person_slices.items()},
            "mode": result.laplace.mode},
        "responses_source": getattr(result.responses, "source", None),
        "responses_sha256": responses_sha256,
        "irtexam_version": _version(),
    }


def matrix_copy_dtype(responses: ResponseMatrix) -> np.dtype | None:
    """The integer type :func:`write_matrix_npz` keeps a matrix's scores in, -1 for missing (the design's
    :func:`irtexam.irt.design.score_dtype`: int8, int16 past 126), or None where a score is not a whole number in
    0..max_score or max_score is past int16 (the long table keeps those)."""
    top = int(responses.max_score)
    if top > np.iinfo(np.int16).max or not whole_scores_fit(responses.cells, top):
        return None
    return np.dtype(score_dtype(top))


def write_matrix_npz(responses: ResponseMatrix, path: str | Path) -> Path:
    """Write ``responses`` as the compact copy a fit folder keeps (``responses.npz``, read by
    :func:`read_matrix_npz`): ``values`` items x examinees as int8 (int16 for scores past 126), -1 where
    missing; ``items``, ``examinees``, ``facet__<name>`` (one per examinee) as text; ``max_score``.
    1 byte a cell: at 12,032 items x 2,211 examinees 27 MB written in a tenth of a second, where the long
    parquet table took 3 s (26.6 million rows of item and examinee text). Only for matrices without item
    metadata columns whose scores are whole numbers (:func:`matrix_copy_dtype`)."""
    dtype = matrix_copy_dtype(responses)
    if dtype is None or len(responses.item_meta.columns):
        raise ValueError("this matrix has item metadata or scores that are not small whole numbers: "
                         "save it as a long table")
    path = Path(path)
    arrays = {"values": missing_coded(responses.cells, dtype), "items": np.asarray(responses.items, dtype=str),
              "examinees": np.asarray(responses.examinees, dtype=str),
              "max_score": np.asarray(int(responses.max_score))}
    arrays.update({f"facet__{name}": responses.examinee_facets[name].to_numpy().astype(str)
                   for name in responses.facet_names})
    tmp = path.with_name(path.name + ".tmp")
    save_npz_by_blocks(tmp, arrays)
    tmp.replace(path)
    return path


def read_matrix_npz(path: str | Path, *, source: str | None = None) -> ResponseMatrix:
    """The :class:`irtexam.responses.ResponseMatrix` :func:`write_matrix_npz` wrote (one clear error if
    the file is not one)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as arrays:
            raw = arrays["values"]
            examinees = [str(e) for e in arrays["examinees"]]
            facets = pd.DataFrame({name[len("facet__"):]: arrays[name].astype(str) for name in arrays.files
                                   if name.startswith("facet__")}, index=pd.Index(examinees, name="examinee"))
            # kept as the integer codes it holds (1 byte a cell; float values made only if asked for)
            return ResponseMatrix.from_codes(raw, [str(i) for i in arrays["items"]], examinees,
                                             examinee_facets=facets, max_score=int(arrays["max_score"]),
                                             source=source or str(path))
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"the responses copy is damaged ({type(exc).__name__}: {exc}); refit",
                         path=str(path)) from None


def _save_responses(responses: ResponseMatrix, directory: Path) -> Path:
    """The fitted matrix into the folder: the compact responses.npz (1 byte a cell), or the long
    responses.parquet where that cannot hold it (item metadata columns, scores that are not small whole numbers)."""
    try:
        return write_matrix_npz(responses, directory / "responses.npz")
    except ValueError:
        return responses.save(directory / "responses.parquet")


def _read_responses(directory: Path, graded: bool) -> ResponseMatrix:
    """The fitted matrix a folder keeps: responses.npz, responses.parquet, or responses.csv.gz (before 0.2)."""
    if (directory / "responses.npz").exists():
        return read_matrix_npz(directory / "responses.npz")
    for name in ("responses.parquet", "responses.csv.gz"):
        if (directory / name).exists():
            return ResponseMatrix.read(directory / name, graded=graded)
    raise InputError("the fit folder has no copy of its responses (responses.npz); refit with "
                     "`irtexam fit ... --out DIR`", path=str(directory))


def _check_files(directory: Path, meta: dict) -> None:
    """Refuse a folder whose files are not the ones its meta.json lists (missing, truncated, or from another
    run); folders written before the list existed are not checked."""
    listed = meta.get("files")
    if not isinstance(listed, dict):
        return
    for name, size in listed.items():
        path = directory / name
        if not path.exists():
            raise InputError(f"the fit folder is damaged: {name} is missing; refit", path=str(directory))
        if path.stat().st_size != size:
            raise InputError(f"the fit folder is damaged: {name} does not match meta.json (another run's file, "
                             f"or cut short); refit", path=str(directory))
    for name, digest in (meta.get("sha256") or {}).items():  # by content: an edit of the same size too
        if (directory / name).exists() and file_sha256(directory / name) != digest:
            raise InputError(f"the fit folder is damaged: {name} was changed after the fit (its SHA-256 is not "
                             f"the one meta.json records); refit, or restore the file", path=str(directory))
    extra = {"facets.csv", "contrasts.csv", "diagnostics.csv", "draws.npz"} & {p.name for p in directory.iterdir()}
    stray = sorted(extra - set(listed))
    if stray:
        raise InputError(f"the fit folder mixes two fits: {', '.join(stray)} is not from the fit meta.json "
                         f"describes; refit into a new folder", path=str(directory))


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("irtexam")
    except Exception:  # pragma: no cover
        return "unknown"


def read_fit(directory: str | Path) -> dict:
    """Read a fit folder into the constructor arguments of :class:`irtexam.irt.result.FitResult`."""
    directory = Path(directory)
    meta_path = directory / "meta.json"
    if not meta_path.exists():
        raise InputError("not a fit directory (no meta.json); create one with `irtexam fit ... --out DIR`",
                         path=str(directory))
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"meta.json is damaged ({type(exc).__name__}); refit with `irtexam fit ... --out DIR`",
                         path=str(directory)) from None
    if not isinstance(meta, dict) or not isinstance(meta.get("spec"), dict):
        raise InputError("meta.json is not an irtexam fit record; refit with `irtexam fit ... --out DIR`",
                         path=str(directory))
    _check_files(directory, meta)
    spec_fields = meta["spec"]
    spec_fields["facets"] = tuple(spec_fields.get("facets") or ())
    spec_fields.setdefault("item_prior", "fixed")  # fits saved before learned prior centres existed
    spec = mdl.ModelSpec(**spec_fields)
    responses = _read_responses(directory, spec.kind_object.graded)
    if meta.get("responses_source"):  # name the data the user fitted, not the folder's copy
        responses = dataclasses.replace(responses, source=meta["responses_source"])
    design = mdl.build_design(responses, spec)
    arrays = np.load(directory / "params.npz")
    params = {k[len("param__"):]: arrays[k] for k in arrays.files if k.startswith("param__")}
    laplace = None
    if meta.get("laplace"):
        info = meta["laplace"]
        laplace = LaplaceCovariance(
            item_keys=tuple(info["item_keys"]),
            item_slices={k: slice(*v) for k, v in info["item_slices"].items()},
            item_cov=arrays["laplace__item_cov"], person_keys=tuple(info["person_keys"]),
            person_slices={k: slice(*v) for k, v in info["person_slices"].items()},
            person_cov=arrays["laplace__person_cov"] if "laplace__person_cov" in arrays.files else None,
            M=arrays["laplace__M"] if "laplace__M" in arrays.files else None, mode=info["mode"],
            person_precision=StandardisedPersonPrecision(arrays["laplace__w"], arrays["laplace__prior"],
                                                         arrays["laplace__V"], float(arrays["laplace__sd"]))
            if "laplace__w" in arrays.files else None)
    items = pd.read_csv(directory / "items.csv", index_col="item", dtype={"item": str})
    point_columns = [c for c in ("a", "b") if c in items]
    if not np.isfinite(items[point_columns].to_numpy(dtype=float)).all():
        raise InputError("items.csv holds non-finite item parameters; refit (see the fit's warnings)",
                         path=str(directory))
    examinees = pd.read_csv(directory / "examinees.csv", index_col="examinee", dtype={"examinee": str})
    facets = pd.read_csv(directory / "facets.csv", dtype={"level": str}) if (directory / "facets.csv").exists() else None
    contrasts = pd.read_csv(directory / "contrasts.csv", dtype={"level": str, "reference": str}) \
        if (directory / "contrasts.csv").exists() else None
    diagnostics = pd.read_csv(directory / "diagnostics.csv", dtype={"id": str}) \
        if (directory / "diagnostics.csv").exists() else None
    samples = None
    if (directory / "draws.npz").exists():
        with np.load(directory / "draws.npz") as stored:
            samples = {k: stored[k].astype(np.float64) for k in stored.files}
    sample_stats = None
    if (directory / "sample_stats.npz").exists():
        with np.load(directory / "sample_stats.npz") as stored:
            sample_stats = {k: stored[k] for k in stored.files}
    draw_info = meta.get("draws") or None
    draw_diagnostics = None if draw_info is None else DrawDiagnostics(
        method=draw_info.get("method", "laplace"), n_draws=int(draw_info.get("n_draws", 0)),
        n_proposals=int(draw_info.get("n_proposals", 0)), reason=draw_info.get("reason", ""))
    return dict(spec=spec, design=design, method=meta["method"], responses=responses, params=params,
                items=items, examinees=examinees, facets=facets, contrasts=contrasts,
                fit_stats=meta["fit_stats"], warnings=meta.get("warnings", []), samples=samples,
                laplace=laplace, diagnostics=diagnostics, chains=meta.get("chains", 1), seed=meta.get("seed", 0),
                draw_diagnostics=draw_diagnostics, sample_stats=sample_stats)
