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

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .errors import InputError

REQUIRED_COLUMNS = ("item", "examinee", "response")
ITEM_META_PREFIX = "item_"


def _natural_key(value: str) -> tuple:
    """Sort key that orders 'icl2' before 'icl10' and '2' before '10'."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(value)))


def natural_sorted(values: Iterable[str]) -> list[str]:
    """Sort strings in natural (human) order."""
    return sorted(values, key=_natural_key)


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


def read_long_table(path: str | Path) -> pd.DataFrame:
    """Read a long response table from CSV/TSV/parquet/JSONL; every column as read, ids as strings."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "No such file", str(path))
    fmt = _format_for(path)
    try:
        if fmt == "csv":
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
        elif fmt == "tsv":
            frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False, na_values=[""])
        elif fmt == "parquet":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_json(path, lines=True, dtype=False)
    except pd.errors.EmptyDataError:
        raise InputError("the file is empty; expected a header with columns item, examinee, response",
                         path=str(path)) from None
    except ValueError as exc:
        raise InputError(f"could not be parsed as {fmt}: {exc}", path=str(path)) from None
    return frame


def _parse_scores(raw: pd.Series, *, graded: bool, path: str | None) -> np.ndarray:
    """Turn a response column into floats (NaN = missing), rejecting anything else.

    Binary: 0/1, true/false, 0.0/1.0. Graded: non-negative integers. Blank, NaN and
    None are missing. Raises :class:`InputError` naming the first offending row.
    """
    values = np.full(len(raw), np.nan)
    lowered_true = {"1", "1.0", "true", "t", "yes"}
    lowered_false = {"0", "0.0", "false", "f", "no"}
    for position, value in enumerate(raw.tolist()):
        if value is None or (not isinstance(value, str) and pd.isna(value)):
            continue
        if isinstance(value, (bool, np.bool_)):
            values[position] = float(value)
            continue
        if isinstance(value, (int, np.integer, float, np.floating)):
            number = float(value)
        else:
            text = str(value).strip()
            if text == "" or text.lower() in {"nan", "na", "null", "none"}:
                continue
            if not graded and text.lower() in lowered_true:
                values[position] = 1.0
                continue
            if not graded and text.lower() in lowered_false:
                values[position] = 0.0
                continue
            try:
                number = float(text)
            except ValueError:
                number = np.nan
                kind = "0 or 1" if not graded else "a non-negative integer score"
                raise InputError(f"response {value!r} is not {kind}; leave the cell blank for a missing answer",
                                 path=path, row=position + 1, column="response") from None
        ok = number in (0.0, 1.0) if not graded else (number >= 0 and float(number).is_integer())
        if not ok:
            hint = ("a binary model needs 0/1 responses; use a graded model (e.g. model='grm') for scores"
                    if not graded else "graded responses must be integers 0..K")
            raise InputError(f"response {value!r} is not valid: {hint}", path=path, row=position + 1,
                             column="response")
        values[position] = number
    return values


@dataclass(frozen=True)
class ResponseMatrix:
    """Scored responses of examinees to items, with labels and facets.

    Attributes:
        values: float array (n_items, n_examinees); NaN marks a missing response.
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
        values = np.asarray(self.values, dtype=float)
        object.__setattr__(self, "values", values)
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
        observed = values[~np.isnan(values)]
        if observed.size and (observed.min() < 0 or observed.max() > self.max_score):
            raise InputError(f"responses must lie in 0..{self.max_score}", path=self.source, column="response")

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
        return ~np.isnan(self.values)

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
        missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
        if missing:
            raise InputError(f"missing required column(s) {missing}; the table has {list(frame.columns)}",
                             path=source, column=missing[0])
        if len(frame) == 0:
            raise InputError("the table has a header but no rows", path=source)
        frame = frame.reset_index(drop=True)
        for column in ("item", "examinee"):
            blank = frame[column].isna() | (frame[column].astype(str).str.strip() == "")
            if blank.any():
                raise InputError(f"empty {column} id", path=source, row=int(np.flatnonzero(blank)[0]) + 1,
                                 column=column)
        item_ids = frame["item"].astype(str)
        examinee_ids = frame["examinee"].astype(str)
        scores = _parse_scores(frame["response"], graded=graded, path=source)
        if graded:
            observed_max = int(np.nanmax(scores)) if np.isfinite(scores).any() else 1
            max_score = max(max_score or 0, observed_max, 1)
        else:
            max_score = 1

        keys = item_ids + "\x00" + examinee_ids
        duplicated = keys.duplicated(keep=False)
        if duplicated.any():
            rows = np.flatnonzero(duplicated)
            first = rows[0]
            twins = rows[keys.iloc[rows] == keys.iloc[first]]
            a, b = int(twins[0]), int(twins[1])
            same = (np.isnan(scores[a]) and np.isnan(scores[b])) or scores[a] == scores[b]
            detail = "identical duplicate rows" if same else (
                f"conflicting responses {frame['response'].iloc[a]!r} (row {a + 1}) and "
                f"{frame['response'].iloc[b]!r} (row {b + 1})")
            raise InputError(f"item {item_ids.iloc[a]!r} / examinee {examinee_ids.iloc[a]!r} appears more than once "
                             f"({detail}); keep one row per (item, examinee)",
                             path=source, row=b + 1, column="item")

        extra = [c for c in frame.columns if c not in REQUIRED_COLUMNS]
        facet_columns = [c for c in extra if not str(c).startswith(ITEM_META_PREFIX)]
        meta_columns = [c for c in extra if str(c).startswith(ITEM_META_PREFIX)]

        items = natural_sorted(pd.unique(item_ids))
        examinees = list(pd.unique(examinee_ids))
        item_index = {item: i for i, item in enumerate(items)}
        examinee_index = {e: m for m, e in enumerate(examinees)}
        values = np.full((len(items), len(examinees)), np.nan)
        values[item_ids.map(item_index).to_numpy(), examinee_ids.map(examinee_index).to_numpy()] = scores

        facet_frame = pd.DataFrame(index=pd.Index(examinees, name="examinee"))
        for column in facet_columns:
            column_values = frame[column].astype(str).where(frame[column].notna(), "")
            per_examinee = pd.DataFrame({"examinee": examinee_ids, "value": column_values})
            n_distinct = per_examinee.groupby("examinee", sort=False)["value"].nunique()
            changing = n_distinct[n_distinct > 1]
            if len(changing):
                examinee = changing.index[0]
                rows = per_examinee.index[per_examinee["examinee"] == examinee]
                first_value = column_values.loc[rows[0]]
                other = rows[column_values.loc[rows] != first_value][0]
                raise InputError(f"facet value changes within examinee {examinee!r}: {first_value!r} on row "
                                 f"{rows[0] + 1} but {column_values.loc[other]!r} on row {other + 1}; a facet "
                                 f"describes the examinee, so it must be the same on all its rows",
                                 path=source, row=int(other) + 1, column=str(column))
            facet_frame[str(column)] = per_examinee.groupby("examinee", sort=False)["value"].first().reindex(examinees)

        meta_frame = pd.DataFrame(index=pd.Index(items, name="item"))
        for column in meta_columns:
            name = str(column)[len(ITEM_META_PREFIX):]
            per_item = pd.DataFrame({"item": item_ids, "value": frame[column]})
            first = per_item.groupby("item", sort=False)["value"].first()
            meta_frame[name] = first.reindex(items)
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
    def read(cls, path: str | Path, *, graded: bool = False) -> "ResponseMatrix":
        """Read a long response table (CSV/TSV/parquet/JSONL, optionally gzipped)."""
        frame = read_long_table(path)
        if frame.shape[1] == 0:
            raise InputError("the file is empty; expected a header with columns item, examinee, response",
                             path=str(path))
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
        path.parent.mkdir(parents=True, exist_ok=True)
        frame = self.to_long()
        tmp = path.with_name(path.name + ".tmp")
        compression = "gzip" if path.suffix.lower() == ".gz" else None
        if fmt == "csv":
            frame.to_csv(tmp, index=False, compression=compression)
        elif fmt == "tsv":
            frame.to_csv(tmp, sep="\t", index=False, compression=compression)
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
        return self._constant(self.values, self.items)

    def constant_examinees(self) -> dict[str, list[str]]:
        """Examinees with all-same observed responses: {'all_correct': [...], 'all_wrong': [...]}."""
        return self._constant(self.values.T, self.examinees)

    def _constant(self, values: np.ndarray, ids: tuple[str, ...]) -> dict[str, list[str]]:
        count = np.count_nonzero(~np.isnan(values), axis=1)
        low = np.fmin.reduce(values, axis=1)  # fmin/fmax skip NaN (NaN only for rows without responses)
        high = np.fmax.reduce(values, axis=1)
        constant = (count > 0) & (low == high)
        return {
            "all_correct": [ids[k] for k in np.flatnonzero(constant & (high == self.max_score))],
            "all_wrong": [ids[k] for k in np.flatnonzero(constant & (low == 0))],
            "unanswered": [ids[k] for k in np.flatnonzero(count == 0)],
        }

    def warnings(self) -> list[str]:
        """Plain-language warnings about the data (uninformative items/examinees, missingness)."""
        messages = []
        items = self.constant_items()
        if items["all_correct"]:
            messages.append(f"{len(items['all_correct'])} item(s) were answered correctly by every examinee "
                            f"({_preview(items['all_correct'])}); they carry no information: drop them or rely on "
                            f"the prior")
        if items["all_wrong"]:
            messages.append(f"{len(items['all_wrong'])} item(s) were answered wrongly by every examinee "
                            f"({_preview(items['all_wrong'])}); they carry no information (or their answer key is "
                            f"wrong): check them, drop them or rely on the prior")
        if items["unanswered"]:
            messages.append(f"{len(items['unanswered'])} item(s) have no responses at all "
                            f"({_preview(items['unanswered'])}); only the prior determines their parameters")
        examinees = self.constant_examinees()
        for kind, words in (("all_correct", "answered every item correctly"), ("all_wrong", "answered every item wrongly")):
            if examinees[kind]:
                messages.append(f"{len(examinees[kind])} examinee(s) {words} ({_preview(examinees[kind])}); their "
                                f"ability is bounded only by the prior")
        return messages

    def describe(self) -> dict[str, float | int]:
        """Counts: items, examinees, observed cells, missing fraction, mean score."""
        observed = self.observed
        return {
            "items": self.n_items,
            "examinees": self.n_examinees,
            "observed": int(observed.sum()),
            "missing_fraction": float(1 - observed.mean()) if observed.size else 0.0,
            "mean_score": float(np.nanmean(self.values)) if observed.any() else float("nan"),
        }

    def __repr__(self) -> str:
        facets = f", facets={self.facet_names}" if self.facet_names else ""
        return f"ResponseMatrix({self.n_items} items x {self.n_examinees} examinees{facets})"


def _preview(ids: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(map(str, ids[:limit]))
    return shown + (f", ... {len(ids) - limit} more" if len(ids) > limit else "")
