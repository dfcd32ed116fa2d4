"""ResponseMatrix: who answered what, with labels.

A response matrix holds the scored answers of examinees (RAG pipelines) to items
(exam questions): ``values[i, m]`` is the score of examinee ``m`` on item ``i``
(0/1 for binary models, 0..K for graded ones, NaN where missing). Examinees carry
*facets* (``llm``, ``retriever``, ``icl``, ...): the coordinates of the pipeline
that the hierarchical model decomposes ability over. Items carry metadata
(question text, Bloom level, ...).

On disk it is a long table, one row per (item, examinee) answer::

    item,examinee,response,llm,retriever,icl
    q1,smollm2|bm25|0,1,smollm2,bm25,0
    q1,smollm2|bm25|1,,smollm2,bm25,1          <- blank response = missing

Columns other than ``item``, ``examinee`` and ``response`` are examinee facets,
except those prefixed ``item_`` which are item metadata (the prefix is removed).
CSV, TSV, parquet and JSONL are read and written by file extension (``.gz``
allowed for the text formats).
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

from .errors import InputError
from .memory import BLOCK_CELLS, row_blocks
from .scores import float_scores
from .scores import (ITEM_META_PREFIX, REQUIRED_COLUMNS, _invalid_numbers, _natural_key,  # noqa: F401
                     _parse_score, natural_sorted)
from .table_checks import (category_gaps, check_constant_within, check_header,
                           check_json_fields, check_json_lines, check_repeated_header, check_scalar_cells,
                           check_short_rows)
from .warning_types import DataWarning, IdentificationWarning, Message


def _format_for(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    formats = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet",
               ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
    if ext not in formats:
        raise InputError(f"unknown response file type '{ext or '(none)'}'; use .csv, .tsv, .parquet or .jsonl",
                         path=str(path))
    return formats[ext]


def _read_delimited(path: Path, sep: str) -> pd.DataFrame:
    """Read a CSV/TSV with every column as text (blank = missing), columnar via pyarrow.

    pyarrow's parser is ~4x faster than pandas' C parser on long tables; on any
    file it rejects (ragged rows, odd quoting) the C parser reads it again so that
    its error message (with the line number) is the one the user sees.
    """
    options = {"sep": sep, "dtype": str, "keep_default_na": False, "na_values": [""]}
    try:
        return pd.read_csv(path, engine="pyarrow", **options)
    except pd.errors.EmptyDataError:
        raise
    except Exception:  # noqa: BLE001 - re-read below, which raises the user-facing error
        check_short_rows(path, sep)  # pandas would read a row cut short as a blank response
        return pd.read_csv(path, **options)


def read_long_table(path: str | Path) -> pd.DataFrame:
    """Read a long response table from CSV/TSV/parquet/JSONL; every column as read, ids as strings."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "No such file", str(path))
    fmt = _format_for(path)
    try:
        if fmt in ("csv", "tsv"):
            if path.stat().st_size == 0:
                raise pd.errors.EmptyDataError
            frame = _read_delimited(path, "," if fmt == "csv" else "\t")
        elif fmt == "parquet":
            frame = pd.read_parquet(path)
        else:
            check_json_lines(path)
            frame = pd.read_json(path, lines=True, dtype=False)
            check_json_fields(path, frame)
    except pd.errors.EmptyDataError:
        raise InputError("the file is empty; expected a header with columns item, examinee, response",
                         path=str(path)) from None
    except InputError:
        raise
    except ValueError as exc:
        raise InputError(f"could not be parsed as {fmt}: {exc}", path=str(path)) from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a truncated or corrupt gzip
        raise InputError(f"the compressed file is corrupt or cut short ({exc}); write it again", path=str(path)) \
            from None
    return frame


def _write_delimited(frame: pd.DataFrame, path: Path, sep: str, *, gzipped: bool) -> None:
    """Write ``frame`` as CSV/TSV (blank = missing), columnar via pyarrow, gzip level 6 if ``gzipped``.

    Values are written unquoted; a table with a value that needs quoting (a comma,
    quote or newline in an id or a question) or a column pyarrow cannot type is
    written by pandas instead (quoted where needed). Either way pandas reads it back
    identically.
    """
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        header = sep.join(map(str, frame.columns))
        if any(ch in header for ch in '"\r\n') or header.count(sep) != len(frame.columns) - 1:
            raise pa.ArrowInvalid("a column name needs quoting")
        table = pa.Table.from_pandas(frame, preserve_index=False)
        buffer = io.BytesIO()
        buffer.write((header + "\n").encode("utf-8"))
        pacsv.write_csv(table, buffer, pacsv.WriteOptions(include_header=False, delimiter=sep, quoting_style="none"))
        data = buffer.getvalue()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        frame.to_csv(path, sep=sep, index=False, compression={"method": "gzip", "compresslevel": 6, "mtime": 0}
                     if gzipped else None)
        return
    if gzipped:
        with gzip.GzipFile(path, "wb", compresslevel=6, mtime=0) as out:
            out.write(data)
    else:
        path.write_bytes(data)


def _parse_scores(raw: pd.Series, *, graded: bool, path: str | None) -> np.ndarray:
    """Turn a response column into floats (NaN = missing), rejecting anything else.

    Columnar: numeric and boolean columns are checked as arrays; text and mixed
    columns are factorised, so each *distinct* value is parsed once (by
    :func:`_parse_score`) and the scores are gathered by code. Raises
    :class:`InputError` naming the first offending row (rows numbered from 1).
    """
    if pd.api.types.is_bool_dtype(raw.dtype) or pd.api.types.is_numeric_dtype(raw.dtype):
        values = raw.to_numpy(dtype=float, na_value=np.nan)
        bad = _invalid_numbers(values, graded=graded)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            value = raw.iloc[row:row + 1].tolist()[0]  # a Python scalar, as the user wrote it
            _, message = _parse_score(value, graded=graded)
            raise InputError(message or f"response {value!r} is not valid", path=path, row=row + 1,
                             column="response")
        return values
    codes, uniques = pd.factorize(raw, use_na_sentinel=True)
    parsed = [_parse_score(value, graded=graded) for value in uniques]
    errors = np.array([message is not None for _, message in parsed] + [False])
    if errors.any():
        row = int(np.flatnonzero(errors[codes])[0])
        raise InputError(parsed[codes[row]][1], path=path, row=row + 1, column="response")
    scores = np.array([score for score, _ in parsed] + [np.nan])  # code -1 (NaN/None) -> the last entry
    return scores[codes]


def _factorize_ids(column: pd.Series, name: str, source: str | None) -> tuple[np.ndarray, list[str]]:
    """Codes (one per row) and distinct labels (as strings, first-appearance order) of an id column.

    Raises :class:`InputError` naming the first row whose id is missing or blank.
    Values that differ in type but not as text (``1`` and ``"1"``) are one id.
    """
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    labels = [str(value) for value in uniques]
    blank = np.array([label.strip() == "" for label in labels] + [True])
    if (codes < 0).any() or blank[:-1].any():
        row = int(np.flatnonzero(blank[codes])[0])
        raise InputError(f"empty {name} id", path=source, row=row + 1, column=name)
    if len(set(labels)) < len(labels):
        merged, distinct = pd.factorize(np.asarray(labels, dtype=object))
        codes, labels = merged[codes], [str(label) for label in distinct]
    return codes, labels


def _factorize_text(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes and labels of a column read as text, missing values as '' (codes index the labels)."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    labels = [str(value) for value in uniques] + [""]
    codes = np.where(codes < 0, len(labels) - 1, codes)
    merged, distinct = pd.factorize(np.asarray(labels, dtype=object))
    return merged[codes], np.asarray(distinct, dtype=object)


def _examinee_facet(column: pd.Series, examinee_codes: np.ndarray, first_rows: np.ndarray, examinees: list[str],
                    name: str, source: str | None) -> np.ndarray:
    """One facet value per examinee; raises :class:`InputError` if it changes within an examinee.

    The error names the first examinee (in order of appearance) whose value changes,
    the row where it first changes and both values.
    """
    codes, labels = _factorize_text(column)
    blank = np.array([str(label).strip() == "" for label in labels] + [False])
    if blank[codes].any():  # a level '' would be fitted as a level of its own
        row = int(np.flatnonzero(blank[codes])[0])
        raise InputError(f"blank facet value (examinee {examinees[examinee_codes[row]]!r}); fill it in (e.g. '-' "
                         f"for none) or drop the column", path=source, row=row + 1, column=name)
    n_levels = max(len(labels), 1)
    pairs = np.unique(examinee_codes.astype(np.int64) * n_levels + codes)
    n_distinct = np.bincount(pairs // n_levels, minlength=len(examinees))
    if (n_distinct > 1).any():
        examinee = int(np.flatnonzero(n_distinct > 1)[0])
        rows = np.flatnonzero(examinee_codes == examinee)
        first = codes[rows[0]]
        other = int(rows[codes[rows] != first][0])
        raise InputError(f"facet value changes within examinee {examinees[examinee]!r}: {labels[first]!r} on row "
                         f"{rows[0] + 1} but {labels[codes[other]]!r} on row {other + 1}; every column besides "
                         f"item, examinee and response is read as a facet of the examinee (item_* columns as item "
                         f"metadata), so it must be the same on all its rows: drop a per-row column, or prefix "
                         f"it item_ if it describes the item",
                         path=source, row=other + 1, column=name)
    return labels[codes[first_rows]]


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """The row where each code first appears, for codes numbered in order of first appearance (as
    :func:`_factorize_ids` gives them): the rows where the running maximum of the codes grows."""
    running = np.maximum.accumulate(codes)
    grows = np.empty(len(codes), dtype=bool)
    grows[0] = True
    np.greater(running[1:], running[:-1], out=grows[1:])
    return np.flatnonzero(grows)


def _duplicate_error(frame: pd.DataFrame, pair: np.ndarray, scores: np.ndarray, items: list[str],
                     item_codes: np.ndarray, examinees: list[str], examinee_codes: np.ndarray,
                     source: str | None) -> InputError | None:
    """An :class:`InputError` for the first (item, examinee) pair on more than one row, or None.

    Rows per cell are counted with one ``bincount`` over the cells (8 bytes a cell, no hash table:
    a hash of 10^7 pairs took 0.6 GB)."""
    counts = np.bincount(pair, minlength=len(items) * len(examinees))
    if counts.max(initial=0) <= 1:
        return None
    rows = np.flatnonzero(counts[pair] > 1)
    del counts
    twins = rows[pair[rows] == pair[rows[0]]]
    a, b = int(twins[0]), int(twins[1])
    same = (np.isnan(scores[a]) and np.isnan(scores[b])) or scores[a] == scores[b]
    detail = "identical duplicate rows" if same else (
        f"conflicting responses {frame['response'].iloc[a]!r} (row {a + 1}) and "
        f"{frame['response'].iloc[b]!r} (row {b + 1})")
    return InputError(f"item {items[item_codes[a]]!r} / examinee {examinees[examinee_codes[a]]!r} appears more "
                      f"than once ({detail}); keep one row per (item, examinee)",
                      path=source, row=b + 1, column="item")


@dataclass(frozen=True)
class ResponseMatrix:
    """Scored responses of examinees to items, with labels and facets.

    Attributes:
        values: float32 array (n_items, n_examinees); NaN marks a missing response. Scores are small
            integers, exact in float32; 4 bytes a cell (10^8 cells: 400 MB).
        items: item ids, in row order.
        examinees: examinee ids, in column order.
        examinee_facets: DataFrame indexed by examinee id, one string column per facet.
        item_meta: DataFrame indexed by item id (question text, categories, ...).
        max_score: 1 for binary responses, K for graded 0..K responses.
        source: the file it was read from, if any.
    """

    values: np.ndarray
    items: tuple[str, ...]
    examinees: tuple[str, ...]
    examinee_facets: pd.DataFrame = field(default_factory=pd.DataFrame)
    item_meta: pd.DataFrame = field(default_factory=pd.DataFrame)
    max_score: int = 1
    source: str | None = None

    def __post_init__(self) -> None:
        codes = self.__dict__.get("_codes")
        if codes is None:
            values = np.asarray(self.values, dtype=np.float32)
            object.__setattr__(self, "values", values)
        else:  # from_codes: float values made only where something asks for them (__getattr__)
            values = codes
            object.__delattr__(self, "values")
        object.__setattr__(self, "items", tuple(str(i) for i in self.items))
        object.__setattr__(self, "examinees", tuple(str(e) for e in self.examinees))
        if values.shape != (len(self.items), len(self.examinees)):
            raise ValueError(f"values has shape {values.shape} but there are {len(self.items)} items and "
                             f"{len(self.examinees)} examinees")
        if len(set(self.items)) != len(self.items):
            raise InputError("item ids are not unique", path=self.source, column="item")
        if len(set(self.examinees)) != len(self.examinees):
            raise InputError("examinee ids are not unique", path=self.source, column="examinee")
        facets = self.examinee_facets
        if facets is None or facets.empty and len(facets.columns) == 0:
            facets = pd.DataFrame(index=pd.Index(self.examinees, name="examinee"))
        else:
            facets = facets.copy()
            facets.index = facets.index.astype(str)
            missing = [e for e in self.examinees if e not in facets.index]
            if missing:
                raise InputError(f"no facet values for examinee(s) {missing[:5]}", path=self.source)
            facets = facets.loc[list(self.examinees)].astype(str)
            facets.index.name = "examinee"
        object.__setattr__(self, "examinee_facets", facets)
        meta = self.item_meta
        if meta is None or meta.empty and len(meta.columns) == 0:
            meta = pd.DataFrame(index=pd.Index(self.items, name="item"))
        else:
            meta = meta.copy()
            meta.index = meta.index.astype(str)
            meta = meta.reindex(list(self.items))
            meta.index.name = "item"
        object.__setattr__(self, "item_meta", meta)
        if codes is not None:
            if values.size and (int(values.min()) < -1 or int(values.max()) > self.max_score):
                raise InputError(f"responses must lie in 0..{self.max_score} (codes: -1 for missing)",
                                 path=self.source, column="response")
            return
        low, high = np.fmin.reduce(values, axis=None), np.fmax.reduce(values, axis=None)  # NaN-skipping, no copy
        if values.size and not np.isnan(low) and (low < 0 or high > self.max_score):
            raise InputError(f"responses must lie in 0..{self.max_score}", path=self.source, column="response")

    @classmethod
    def from_codes(cls, codes: np.ndarray, items: Sequence[str], examinees: Sequence[str], *, max_score: int = 1,
                   examinee_facets: pd.DataFrame | None = None, item_meta: pd.DataFrame | None = None,
                   source: str | None = None) -> "ResponseMatrix":
        """A matrix kept as integer scores (items x examinees, int8 or int16, -1 where missing): 1 byte a cell
        instead of the 4 of float32 values (12,032 x 2,211: 27 MB instead of 106). Reading a plain long table
        gives one. ``values`` (float32, NaN missing) is made the first time something asks for it; the fit, the
        checks and the fit folder's writers read the codes (:attr:`cells`) and never make it."""
        codes = np.asarray(codes)
        if codes.dtype not in (np.int8, np.int16):
            raise ValueError(f"codes must be int8 or int16 (-1 for missing), got {codes.dtype}")
        matrix = cls.__new__(cls)
        object.__setattr__(matrix, "_codes", codes)
        cls.__init__(matrix, values=codes, items=tuple(items), examinees=tuple(examinees),
                     examinee_facets=pd.DataFrame() if examinee_facets is None else examinee_facets,
                     item_meta=pd.DataFrame() if item_meta is None else item_meta, max_score=max_score,
                     source=source)
        return matrix

    def __getattr__(self, name: str):
        # only reached for attributes not set: ``values`` of a codes-backed matrix, made once (float32, NaN missing)
        codes = self.__dict__.get("_codes")
        if name != "values" or codes is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        values = np.empty(codes.shape, dtype=np.float32)
        for rows in row_blocks(*codes.shape):
            values[rows] = float_scores(codes[rows])
        object.__setattr__(self, "values", values)
        return values

    @property
    def cells(self) -> np.ndarray:
        """The matrix as stored: the integer codes (-1 missing) of a :meth:`from_codes` matrix, else ``values``
        (float32, NaN missing). For code that goes over it a block at a time (:func:`irtexam.scores.float_scores`)
        without making the float copy."""
        codes = self.__dict__.get("_codes")
        return codes if codes is not None else self.values

    # ------------------------------------------------------------------ shape
    @property
    def n_items(self) -> int:
        """Number of items (rows)."""
        return len(self.items)

    @property
    def n_examinees(self) -> int:
        """Number of examinees (columns)."""
        return len(self.examinees)

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask (n_items, n_examinees), True where a response exists."""
        codes = self.__dict__.get("_codes")
        return codes >= 0 if codes is not None else ~np.isnan(self.values)

    @property
    def facet_names(self) -> list[str]:
        """Names of the examinee facet columns."""
        return list(self.examinee_facets.columns)

    @property
    def is_binary(self) -> bool:
        """True for 0/1 responses."""
        return self.max_score == 1

    def facet_levels(self, facet: str) -> list[str]:
        """Levels of a facet in natural order."""
        if facet not in self.examinee_facets.columns:
            raise InputError(f"unknown facet '{facet}'; the responses have facets {self.facet_names or 'none'}",
                             path=self.source, column=facet)
        return natural_sorted(self.examinee_facets[facet].unique())

    # ----------------------------------------------------------- constructors
    @classmethod
    def from_long(cls, frame: pd.DataFrame, *, graded: bool = False, max_score: int | None = None,
                  source: str | None = None) -> "ResponseMatrix":
        """Build from a long table with columns item, examinee, response (+ facets, item_* metadata).

        Raises :class:`InputError` naming the row and column for: a missing required
        column, an empty table, a non-binary response (binary mode), duplicate
        (item, examinee) rows, or a facet value that changes within one examinee.
        Rows are numbered from 1 after the header.
        """
        check_header(list(frame.columns), source)
        missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
        if missing:
            raise InputError(f"missing required column(s) {missing}; the table has {_preview_columns(frame.columns)}",
                             path=source, column=missing[0])
        if len(frame) == 0:
            raise InputError("the table has a header but no rows", path=source)
        frame = frame.reset_index(drop=True)
        check_scalar_cells(frame, source)
        check_repeated_header(frame, source)
        raw_item_codes, raw_items = _factorize_ids(frame["item"], "item", source)
        examinee_codes, examinees = _factorize_ids(frame["examinee"], "examinee", source)
        scores = _parse_scores(frame["response"], graded=graded, path=source)
        if graded:
            observed_max = int(np.nanmax(scores)) if np.isfinite(scores).any() else 1
            max_score = max(max_score or 0, observed_max, 1)
        else:
            max_score = 1

        order = sorted(range(len(raw_items)), key=lambda k: _natural_key(raw_items[k]))
        items = [raw_items[k] for k in order]
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        item_codes = rank[raw_item_codes]
        pair = item_codes * len(examinees) + examinee_codes
        error = _duplicate_error(frame, pair, scores, items, item_codes, examinees, examinee_codes, source)
        if error is not None:
            raise error
        values = np.full((len(items), len(examinees)), np.nan, dtype=np.float32)
        values[item_codes, examinee_codes] = scores

        extra = [c for c in frame.columns if c not in REQUIRED_COLUMNS]
        facet_columns = [c for c in extra if not str(c).startswith(ITEM_META_PREFIX)]
        meta_columns = [c for c in extra if str(c).startswith(ITEM_META_PREFIX)]
        first_rows = _first_rows(examinee_codes)  # first row of each examinee, by code
        facet_frame = pd.DataFrame(index=pd.Index(examinees, name="examinee"))
        for column in facet_columns:
            facet_frame[str(column)] = _examinee_facet(frame[column], examinee_codes, first_rows, examinees,
                                                       str(column), source)
        meta_frame = pd.DataFrame(index=pd.Index(items, name="item"))
        for column in meta_columns:
            check_constant_within(frame[column], item_codes, items, str(column), source)
            first = frame[column].groupby(item_codes, sort=True).first()  # first non-missing value per item
            meta_frame[str(column)[len(ITEM_META_PREFIX):]] = first.reindex(range(len(items))).to_numpy()
        return cls(values=values, items=tuple(items), examinees=tuple(examinees), examinee_facets=facet_frame,
                   item_meta=meta_frame, max_score=int(max_score), source=source)

    @classmethod
    def from_wide(cls, wide: pd.DataFrame | np.ndarray, *, items: Sequence[str] | None = None,
                  examinees: Sequence[str] | None = None, facets: pd.DataFrame | Mapping[str, Sequence] | None = None,
                  graded: bool = False) -> "ResponseMatrix":
        """Build from a wide table: one row per examinee, one column per item (NaN = missing).

        ``facets`` is a DataFrame indexed like the rows of ``wide`` (or a mapping
        facet -> values in row order) giving each examinee's facet levels.
        """
        if isinstance(wide, pd.DataFrame):
            examinees = [str(e) for e in (examinees or wide.index)]
            items = [str(i) for i in (items or wide.columns)]
            data = wide.to_numpy(dtype=float)
        else:
            data = np.asarray(wide, dtype=float)
            if data.ndim != 2:
                raise InputError(f"a wide response array must be 2-D (examinees x items), got shape {data.shape}")
            examinees = [str(e) for e in (examinees or [f"e{m}" for m in range(data.shape[0])])]
            items = [str(i) for i in (items or [f"i{j}" for j in range(data.shape[1])])]
        if data.shape != (len(examinees), len(items)):
            raise InputError(f"wide table has shape {data.shape}, expected (examinees, items) = "
                             f"({len(examinees)}, {len(items)})")
        finite = data[~np.isnan(data)]
        if not graded and finite.size and not np.isin(finite, (0.0, 1.0)).all():
            bad = np.argwhere(~np.isnan(data) & ~np.isin(data, (0.0, 1.0)))[0]
            raise InputError(f"response {data[bad[0], bad[1]]!r} is not 0 or 1 (examinee {examinees[bad[0]]!r}, "
                             f"item {items[bad[1]]!r}); use graded=True for scores", column=items[bad[1]])
        facet_frame = None
        if facets is not None:
            facet_frame = pd.DataFrame(facets).copy()
            if not isinstance(facets, pd.DataFrame) or len(facet_frame.index) != len(examinees) or \
                    not set(map(str, facet_frame.index)) >= set(examinees):
                facet_frame.index = examinees
            facet_frame = facet_frame.astype(str)
        max_score = int(np.nanmax(data)) if graded and finite.size else 1
        return cls(values=data.T.copy(), items=tuple(items), examinees=tuple(examinees),
                   examinee_facets=facet_frame if facet_frame is not None else pd.DataFrame(),
                   max_score=max(max_score, 1))

    @classmethod
    def coerce(cls, obj: "ResponseMatrix | pd.DataFrame | np.ndarray | str | Path", *,
               graded: bool = False) -> "ResponseMatrix":
        """Turn what a user holds into a ResponseMatrix: the entry point of every Python call taking responses.

        Accepted:

        - a :class:`ResponseMatrix` (returned as is);
        - a path (str or Path) to a long response table (CSV/TSV/parquet/JSONL, see :meth:`read`);
        - a **long** DataFrame with columns ``item``, ``examinee``, ``response`` (plus facet columns such
          as ``llm``, ``retriever``, ``icl``, and ``item_*`` metadata), as on disk (:meth:`from_long`);
        - a **wide** DataFrame: one row per examinee (the index gives the examinee ids), one column per
          item (the column labels become the item ids); cells 0/1 (``graded``: 0..K), True/False, or
          missing as NaN, None or ``pd.NA`` (pandas nullable ``Int64``/``boolean``/``Float64`` work);
        - a 2-D NumPy array, examinees x items (ids ``e0..``, ``i0..``).

        Anything else raises :class:`InputError` saying what is accepted.
        """
        if isinstance(obj, cls):
            return obj
        if isinstance(obj, (str, Path)):
            return cls.read(obj, graded=graded)
        if isinstance(obj, np.ndarray):
            return cls.from_wide(obj, graded=graded)
        if isinstance(obj, pd.DataFrame):
            obj = _renamed_long(obj, "the DataFrame")
            columns = {str(c) for c in obj.columns}
            if set(REQUIRED_COLUMNS) <= columns:
                return cls.from_long(obj.rename(columns=str), graded=graded)
            partial = sorted(columns & set(REQUIRED_COLUMNS))
            if partial:
                raise InputError(f"the DataFrame has column(s) {partial} of a long table but not all of "
                                 f"{list(REQUIRED_COLUMNS)}; {ACCEPTED_RESPONSES}")
            return _from_wide_frame(cls, obj, graded=graded)
        raise InputError(f"cannot use a {type(obj).__name__} as responses; {ACCEPTED_RESPONSES}")

    @classmethod
    def read(cls, path: str | Path, *, graded: bool = False) -> "ResponseMatrix":
        """Read a long response table (CSV/TSV/parquet/JSONL, optionally gzipped), or a wide one: a table with
        neither an ``item`` nor a ``response`` column is one row per examinee (ids in the column ``examinee``, else
        the first column) and one column per item, each cell parsed as a long table's response
        (:func:`_read_wide_table`), as leaderboards are often kept.

        A plain parquet or CSV/TSV table (columns item, examinee, response only) is read batch by batch
        (:func:`irtexam.io_tables.read_plain_long`: peak memory about the int8 matrix plus a few batches;
        the matrix is kept as codes, :meth:`from_codes`); any other table, and any bad input, is read by :meth:`from_long`, whose result and
        errors the streaming reader reproduces exactly.
        """
        from .io_tables import read_plain_long

        checked = Path(path)
        if not checked.exists():
            raise FileNotFoundError(2, "No such file", str(checked))
        plain = read_plain_long(checked, _format_for(checked), graded=graded)
        if plain is not None:
            codes, items, examinees, max_score = plain
            return cls.from_codes(codes, items, examinees, max_score=max_score, source=str(path))
        frame = read_long_table(path)
        if frame.shape[1] == 0:
            raise InputError("the file is empty; expected a header with columns item, examinee, response",
                             path=str(path))
        frame = _renamed_long(frame, str(path))
        if frame.shape[1] >= 2 and not {"item", "response"} & {str(c) for c in frame.columns}:
            return _read_wide_table(cls, frame, graded=graded, source=str(path))
        return cls.from_long(frame, graded=graded, source=str(path))

    # ---------------------------------------------------------------- output
    def to_long(self, *, include_missing: bool = True) -> pd.DataFrame:
        """The long table: item, examinee, response, facet columns, item_* metadata columns."""
        item_idx, examinee_idx = np.meshgrid(np.arange(self.n_items), np.arange(self.n_examinees), indexing="ij")
        frame = pd.DataFrame({
            "item": np.asarray(self.items, dtype=object)[item_idx.ravel()],
            "examinee": np.asarray(self.examinees, dtype=object)[examinee_idx.ravel()],
            "response": self.values.ravel(),
        })
        if not include_missing:
            frame = frame[~np.isnan(frame["response"])]
        frame["response"] = frame["response"].astype("Int64")
        if self.facet_names:
            frame = frame.join(self.examinee_facets, on="examinee")
        meta = self.item_meta.add_prefix(ITEM_META_PREFIX)
        if len(meta.columns):
            frame = frame.join(meta, on="item")
        return frame.reset_index(drop=True)

    def save(self, path: str | Path) -> Path:
        """Write the long table; format from the extension (.csv, .tsv, .parquet, .jsonl, + .gz)."""
        path = Path(path)
        fmt = _format_for(path)
        if fmt == "parquet" and not len(self.item_meta.columns) and path.suffix.lower() != ".gz":
            from .io_tables import write_long_parquet  # a block of items at a time, no frame of the whole table

            return write_long_parquet(self, path, rows_per_group=1 << 20)  # ~40 MB of text a block
        path.parent.mkdir(parents=True, exist_ok=True)
        frame = self.to_long()
        tmp = path.with_name(path.name + ".tmp")
        compression = "gzip" if path.suffix.lower() == ".gz" else None
        if fmt in ("csv", "tsv"):
            _write_delimited(frame, tmp, "," if fmt == "csv" else "\t", gzipped=compression == "gzip")
        elif fmt == "parquet":
            frame.to_parquet(tmp, index=False, compression="zstd")
        else:
            out = frame.astype(object).where(frame.notna(), None)
            out.to_json(tmp, orient="records", lines=True, compression=compression)
        tmp.replace(path)
        return path

    def to_wide(self) -> pd.DataFrame:
        """Examinees x items DataFrame (NaN = missing)."""
        return pd.DataFrame(self.values.T, index=pd.Index(self.examinees, name="examinee"),
                            columns=pd.Index(self.items, name="item"))

    # ------------------------------------------------------------- selection
    def subset(self, items: Sequence[str] | None = None, examinees: Sequence[str] | None = None) -> "ResponseMatrix":
        """A new matrix restricted to the given item / examinee ids (in the given order).

        Responses follow their ids: the kept columns are those of the kept items,
        never the first N rows.
        """
        item_pos = self._positions(items, self.items, "item") if items is not None else np.arange(self.n_items)
        ex_pos = self._positions(examinees, self.examinees, "examinee") if examinees is not None \
            else np.arange(self.n_examinees)
        new_items = tuple(self.items[i] for i in item_pos)
        new_examinees = tuple(self.examinees[m] for m in ex_pos)
        return ResponseMatrix(values=self.values[np.ix_(item_pos, ex_pos)], items=new_items, examinees=new_examinees,
                              examinee_facets=self.examinee_facets.loc[list(new_examinees)],
                              item_meta=self.item_meta.loc[list(new_items)], max_score=self.max_score,
                              source=self.source)

    def _positions(self, wanted: Sequence[str], ids: tuple[str, ...], kind: str) -> np.ndarray:
        index = {value: position for position, value in enumerate(ids)}
        unknown = [w for w in wanted if str(w) not in index]
        if unknown:
            raise InputError(f"unknown {kind} id(s) {unknown[:5]}", path=self.source, column=kind)
        return np.array([index[str(w)] for w in wanted], dtype=int)

    def with_item_meta(self, meta: pd.DataFrame) -> "ResponseMatrix":
        """A copy with extra item metadata columns joined by item id."""
        merged = self.item_meta.join(meta.set_axis(meta.index.astype(str)), how="left", rsuffix="_new")
        return ResponseMatrix(values=self.values, items=self.items, examinees=self.examinees,
                              examinee_facets=self.examinee_facets, item_meta=merged, max_score=self.max_score,
                              source=self.source)

    # ------------------------------------------------------------- reporting
    def constant_items(self) -> dict[str, list[str]]:
        """Items every observed examinee answered the same way: {'all_correct': [...], 'all_wrong': [...]}.

        They carry no information about ability differences (their difficulty is
        identified only by the prior).
        """
        return self._constant(cell_ranges(self.cells).items, self.items)

    def separating_items(self) -> list[str]:
        """Items whose observed responses differ between examinees: the only ones that inform ability differences."""
        return self._separating(cell_ranges(self.cells).items)

    def constant_examinees(self) -> dict[str, list[str]]:
        """Examinees with all-same observed responses: {'all_correct': [...], 'all_wrong': [...]}."""
        return self._constant(cell_ranges(self.cells).examinees, self.examinees)

    def _separating(self, ranges: "LineRanges") -> list[str]:
        return [self.items[k] for k in np.flatnonzero(ranges.high > ranges.low)]

    def _constant(self, ranges: "LineRanges", ids: tuple[str, ...]) -> dict[str, list[str]]:
        count, low, high = ranges
        constant = (count > 0) & (low == high)
        return {
            "all_correct": [ids[k] for k in np.flatnonzero(constant & (high == self.max_score))],
            "all_wrong": [ids[k] for k in np.flatnonzero(constant & (low == 0))],
            "unanswered": [ids[k] for k in np.flatnonzero(count == 0)],
        }

    def warnings(self) -> list[str]:
        """Plain-language warnings about the data (uninformative items/examinees, missingness)."""
        messages = []
        ranges = cell_ranges(self.cells)  # one pass over the matrix for every check below
        items = self._constant(ranges.items, self.items)
        if items["all_correct"]:
            messages.append(_data(f"{len(items['all_correct'])} item(s) were answered correctly by every examinee "
                            f"({_preview(items['all_correct'])}); they carry no information: drop them or rely on "
                            f"the prior"))
        if items["all_wrong"]:
            messages.append(_data(f"{len(items['all_wrong'])} item(s) were answered wrongly by every examinee "
                            f"({_preview(items['all_wrong'])}); they carry no information (or their answer key is "
                            f"wrong): check them, drop them or rely on the prior"))
        if items["unanswered"]:
            messages.append(_data(f"{len(items['unanswered'])} item(s) have no responses at all "
                            f"({_preview(items['unanswered'])}); only the prior determines their parameters"))
        if self.n_examinees > 1 and self.n_items > 0 and not self._separating(ranges.items):
            messages.append(_identification("no item separates the examinees: every item was answered the same way by all who "
                            "took it, so abilities and facet levels are not identified by these data (their "
                            "values and intervals come from the prior and the scale constraint alone); do not "
                            "rank them"))
        examinees = self._constant(ranges.examinees, self.examinees)
        if examinees["unanswered"]:
            messages.append(_data(f"{len(examinees['unanswered'])} examinee(s) have no responses at all "
                            f"({_preview(examinees['unanswered'])}); only the prior determines their ability"))
        if not self.is_binary:
            gaps = category_gaps(self.cells, self.max_score)
            if gaps:
                shown = "; ".join(f"{self.items[k]}: {', '.join(map(str, v))}" for k, v in list(gaps.items())[:3])
                messages.append(_data(f"{len(gaps)} graded item(s) skip a score between their lowest and "
                                f"highest ({shown}{' ...' if len(gaps) > 3 else ''}); the model still gives those "
                                f"categories thresholds, set by the prior alone: recode the scores to consecutive "
                                f"categories if the missing ones cannot occur"))
        for kind, words in (("all_correct", "answered every item correctly"), ("all_wrong", "answered every item wrongly")):
            if examinees[kind]:
                messages.append(_data(f"{len(examinees[kind])} examinee(s) {words} ({_preview(examinees[kind])}); their "
                                f"ability is bounded only by the prior"))
        return messages

    def fingerprint(self) -> str:
        """sha256 (hex) of what a fit depends on: values (missing as NaN), item and examinee ids, facets, max score.

        Two matrices with the same fingerprint give the same fit; a fit folder stores it
        to check, on loading, that its responses are the ones it was fitted to.
        """
        import hashlib

        digest = hashlib.sha256()
        # the bytes of the float64 matrix, hashed a block of 2^20 cells at a time (8 MB: no 8-bytes-a-cell copy of a
        # large one, and little beside the fit when it runs on the writer's second thread)
        for rows in row_blocks(self.n_items, self.n_examinees, max_cells=1 << 20):
            block = float_scores(self.cells[rows]).astype("<f8")
            block[np.isnan(block)] = np.nan  # one NaN bit pattern
            digest.update(block)  # a new C-contiguous array: hashed through the buffer protocol, no bytes copy
        for part in (self.items, self.examinees, tuple(self.examinee_facets.columns),
                     tuple(map(tuple, self.examinee_facets.to_numpy().tolist())), (self.max_score,)):
            digest.update(repr(part).encode("utf-8"))
        return digest.hexdigest()

    def describe(self) -> dict[str, float | int]:
        """Counts: items, examinees, observed cells, missing fraction, mean score."""
        observed = self.observed
        return {
            "items": self.n_items,
            "examinees": self.n_examinees,
            "observed": int(observed.sum()),
            "missing_fraction": float(1 - observed.mean()) if observed.size else 0.0,
            "mean_score": _mean_score(self.cells) if observed.any() else float("nan"),
        }

    def __repr__(self) -> str:
        facets = f", facets={self.facet_names}" if self.facet_names else ""
        return f"ResponseMatrix({self.n_items} items x {self.n_examinees} examinees{facets})"


ACCEPTED_RESPONSES = ("pass a ResponseMatrix, a path to a long table, a long DataFrame with columns item, examinee, "
                      "response (+ facet columns), or a wide DataFrame with one row per examinee and one 0/1 column "
                      "per item (NaN or pd.NA = missing)")


# Column names LLM evaluation logs give a long table's three columns (lm-eval, HELM, leaderboard dumps): a table with
# none of item, examinee, response but one of each of these is read as a long table, and the reader says so.
LONG_COLUMN_SYNONYMS: dict[str, tuple[str, ...]] = {
    "item": ("item_id", "question", "question_id", "doc_id", "problem", "problem_id", "prompt_id", "sample_id"),
    "examinee": ("model", "model_name", "model_id", "system", "pipeline", "subject", "person", "respondent",
                 "student"),
    "response": ("correct", "is_correct", "score", "acc", "accuracy", "exact_match", "outcome"),
}


def long_columns_by_synonym(columns: Sequence) -> dict[str, str] | None:
    """{column: item | examinee | response} where ``columns`` have none of the three names but exactly one
    column (case-insensitive) of each list of :data:`LONG_COLUMN_SYNONYMS`, else None."""
    names = [str(c) for c in columns]
    if set(REQUIRED_COLUMNS) & set(names):
        return None
    found = {}
    for role, synonyms in LONG_COLUMN_SYNONYMS.items():
        matches = [n for n in names if n.strip().lower() in synonyms]
        if len(matches) != 1:
            return None
        found[matches[0]] = role
    return found


def _renamed_long(frame: pd.DataFrame, source: str | None) -> pd.DataFrame:
    """``frame`` with its long-table columns renamed by :func:`long_columns_by_synonym` (a DataWarning says which
    column became which), or ``frame`` itself."""
    mapping = long_columns_by_synonym(frame.columns)
    if mapping is None:
        return frame
    from .warning_types import emit

    said = ", ".join(f"{role} = '{column}'" for column, role in mapping.items())
    emit([_data(f"{source or 'the table'}: read as a long table (one row per answer): {said}; name the columns "
                f"item, examinee, response to skip this guess")], stacklevel=4)
    return frame.rename(columns={c: r for c, r in mapping.items()})


WIDE_FILE_NOTE = ("the table has no item and response columns, so it was read as a wide table: one row per "
                  "examinee (ids in the column 'examinee', else the first column), one column per item")


def _preview_columns(columns: Sequence) -> str:
    """A table's column names for a one-line message: all of up to 8, else the first 8 and the count."""
    names = [str(c) for c in columns]
    return str(names) if len(names) <= 8 else f"{names[:8]} ... ({len(names)} columns)"


def _read_wide_table(cls: type, frame: pd.DataFrame, *, graded: bool, source: str) -> "ResponseMatrix":
    """A wide response file (one row per examinee, one column per item: how leaderboards are kept) as a
    ResponseMatrix: the examinee ids from the column ``examinee`` where there is one, else from the index a parquet
    file written by pandas restores (``DataFrame.to_parquet`` keeps a named or labelled index), else the first
    column; every item column parsed as :func:`_from_wide_frame` parses a wide DataFrame's. Errors name the file,
    row and column."""
    from dataclasses import replace

    named = next((c for c in frame.columns if str(c) == "examinee"), None)
    if named is None and not isinstance(frame.index, pd.RangeIndex):
        frame = frame.reset_index()  # the stored index: the ids, now the first column
    id_column = frame.columns[0] if named is None else named
    ids = frame[id_column]
    if ids.isna().any():
        row = int(np.flatnonzero(ids.isna().to_numpy())[0])
        raise InputError(f"no examinee id ({WIDE_FILE_NOTE})", path=source, row=row + 1, column=str(id_column))
    wide = frame.drop(columns=[id_column])
    wide.index = pd.Index(ids.astype(str).str.strip())
    return replace(_from_wide_frame(cls, wide, graded=graded, source=source, what="the table",
                                    hint=f"({WIDE_FILE_NOTE})"), source=source)


WIDE_FRAME_HINT = ("; a wide DataFrame holds one 0/1 column per item; for facet columns pass a long table (item, "
                   "examinee, response, facets)")


def _from_wide_frame(cls: type, frame: pd.DataFrame, *, graded: bool, source: str | None = None,
                     what: str = "the wide DataFrame", hint: str = WIDE_FRAME_HINT) -> "ResponseMatrix":
    """A ResponseMatrix from a wide DataFrame (rows examinees, columns items); every column parsed like a
    long table's response column (0/1, booleans, nullable pandas types, blank/NaN/None/pd.NA missing). Errors
    name ``source`` (a file read as a wide table), call the frame ``what`` and end with ``hint``."""
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        raise InputError(f"the DataFrame is empty (shape {frame.shape}); {ACCEPTED_RESPONSES}")
    if isinstance(frame.columns, pd.MultiIndex) or isinstance(frame.index, pd.MultiIndex):
        raise InputError("a wide DataFrame needs flat row and column labels (examinees x items); "
                         "reset the MultiIndex or pass a long table")
    items = [str(c) for c in frame.columns]
    examinees = [str(e) for e in frame.index]
    for ids, kind in ((items, "item"), (examinees, "examinee")):
        seen: set[str] = set()
        twice = [i for i in ids if i in seen or seen.add(i)]
        if twice:
            where = "column labels" if kind == "item" else "row index"
            raise InputError(f"{kind} id {twice[0]!r} appears more than once in {what}'s {where}"
                             + (f" {hint}" if source else ""), path=source)
    values = np.empty((len(items), len(examinees)), dtype=np.float32)
    for k, column in enumerate(frame.columns):
        try:
            values[k] = _parse_scores(frame[column].reset_index(drop=True), graded=graded, path=None)
        except InputError as exc:
            text = str(exc).split(": ", 1)[-1]   # the parser's message without its "row N, column ..." prefix
            raise InputError(f"{text} (examinee {examinees[exc.row - 1]!r}){' ' if source else ''}{hint}", path=source,
                             row=exc.row, column=items[k]) from None
    finite = values[~np.isnan(values)]
    max_score = int(finite.max()) if graded and finite.size else 1
    return cls(values=values, items=tuple(items), examinees=tuple(examinees), max_score=max(max_score, 1))


def _row_range(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: number of observed values, their minimum and maximum (fmin/fmax skip NaN; NaN only for
    rows without responses). The reference for :func:`cell_ranges`, which the checks use."""
    return (np.count_nonzero(~np.isnan(values), axis=1), np.fmin.reduce(values, axis=1),
            np.fmax.reduce(values, axis=1))


class LineRanges(NamedTuple):
    """Per row (or column) of a matrix: ``count`` of observed cells, their ``low`` and ``high`` value (NaN where
    none is observed)."""

    count: np.ndarray
    low: np.ndarray
    high: np.ndarray


class CellRanges(NamedTuple):
    """:class:`LineRanges` of a response matrix's ``items`` (rows) and ``examinees`` (columns)."""

    items: LineRanges
    examinees: LineRanges


def _mean_score(cells: np.ndarray) -> float:
    """Mean of the observed scores of a stored matrix (float with NaN, or codes), a block of rows at a time."""
    total, count = 0.0, 0
    for rows in row_blocks(*cells.shape):
        block = float_scores(cells[rows])
        seen = block[~np.isnan(block)]
        total += float(seen.sum(dtype=np.float64))
        count += seen.size
    return total / count if count else float("nan")


def cell_ranges(values: np.ndarray, max_cells: int = BLOCK_CELLS) -> CellRanges:
    """Count, minimum and maximum of the observed (non-NaN) cells of every row and every column of ``values``
    (float with NaN, or integer codes with -1, :func:`irtexam.scores.float_scores`),
    in one pass over it a block of rows at a time (no copy of the matrix: a block's observed mask is the only
    temporary). Row r: n_r = #{m: x_rm observed}, min_m x_rm, max_m x_rm (the fmin/fmax reductions skip NaN);
    column m: the same over r, folded block by block with fmin/fmax (NaN, no observation yet, gives way to any
    value)."""
    values = np.asarray(values)
    n_rows, n_columns = values.shape
    dtype = values.dtype if np.issubdtype(values.dtype, np.floating) else np.float32  # codes: float32 ranges
    row_count = np.zeros(n_rows, dtype=np.int64)
    row_low = np.full(n_rows, np.nan, dtype=dtype)
    row_high = np.full(n_rows, np.nan, dtype=dtype)
    column_count = np.zeros(n_columns, dtype=np.int64)
    column_low = np.full(n_columns, np.nan, dtype=dtype)
    column_high = np.full(n_columns, np.nan, dtype=dtype)
    if values.size:
        for rows in row_blocks(n_rows, n_columns, max_cells):
            block = float_scores(values[rows])
            observed = ~np.isnan(block)
            row_count[rows] = np.count_nonzero(observed, axis=1)
            column_count += np.count_nonzero(observed, axis=0)
            row_low[rows], row_high[rows] = np.fmin.reduce(block, axis=1), np.fmax.reduce(block, axis=1)
            np.fmin(column_low, np.fmin.reduce(block, axis=0), out=column_low)
            np.fmax(column_high, np.fmax.reduce(block, axis=0), out=column_high)
    return CellRanges(LineRanges(row_count, row_low, row_high), LineRanges(column_count, column_low, column_high))


def _preview(ids: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(map(str, ids[:limit]))
    return shown + (f", ... {len(ids) - limit} more" if len(ids) > limit else "")


def _data(text: str) -> Message:
    return Message(text, DataWarning)


def _identification(text: str) -> Message:
    return Message(text, IdentificationWarning)
