"""Streaming reads and writes of large long response tables (parquet, CSV/TSV), batch by batch.

:meth:`ResponseMatrix.read <irtexam.responses.ResponseMatrix.read>` reads a plain long table (columns
item, examinee, response and nothing else) from parquet or CSV/TSV here, without a pandas frame of
the whole table: pass 1 reads the two id columns a batch at a time and keeps only their distinct
values; the float32 matrix is allocated; pass 2 reads the three columns a batch at a time, maps the
ids to positions and scatters the scores. Peak memory is the matrix plus a few batches.

The result is the one :meth:`ResponseMatrix.from_long` gives on the same file: the same item order
(natural), examinee order (first appearance), values and max score. Anything this reader does not
handle exactly like ``from_long`` (other columns, other column types, unparseable text) and every
bad input (blank ids, a bad score, a duplicate row) makes it return None: the caller then reads the
file the old way, which raises the same one-line error as before, naming the file, row and column.

:func:`write_long_parquet` writes a ResponseMatrix as a long parquet table a block of items at a
time, with the content ``ResponseMatrix.save`` writes (`irtexam simulate --out X.parquet`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from .memory import row_blocks
from .scores import REQUIRED_COLUMNS, _invalid_numbers, _natural_key, _parse_score, float_scores

BATCH_ROWS = 1 << 18          # rows a batch when reading parquet
CSV_BLOCK_BYTES = 1 << 20     # bytes a batch when reading CSV (larger blocks: arrow kept ~15 bytes a row alive)
WRITE_ROWS = 1 << 22          # rows a row group when writing parquet
DICTIONARY_COLUMNS: tuple[str, ...] = ("item", "examinee", "response")
_SENTINEL = -2  # a cell no row wrote (scores are >= 0; a missing score writes -1)


class _Fallback(Exception):
    """This table is not one the streaming reader reads exactly like ``from_long`` (or it is bad input)."""


# ------------------------------------------------------------------ sources
def _is_text(dtype) -> bool:
    import pyarrow as pa

    return pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype)


def _id_type_ok(dtype) -> bool:
    """Id columns read as text (strings, or integers whose text is what ``str`` of the pandas value gives)."""
    import pyarrow as pa

    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    return _is_text(dtype) or pa.types.is_integer(dtype)


def _response_type_ok(dtype) -> bool:
    """Response columns parsed here exactly as ``_parse_scores`` parses what pandas reads."""
    import pyarrow as pa

    if pa.types.is_dictionary(dtype):
        return _is_text(dtype.value_type)
    return _is_text(dtype) or pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_boolean(dtype)


BatchSource = Callable[[list[str]], Iterator]


def _parquet_source(path: Path) -> BatchSource:
    """Batches of the named columns of a plain parquet long table (raises _Fallback for any other table)."""
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # noqa: BLE001 - not a parquet file the old reader may still explain
        raise _Fallback from exc
    if sorted(schema.names) != sorted(REQUIRED_COLUMNS):
        raise _Fallback
    types = {name: schema.field(name).type for name in REQUIRED_COLUMNS}
    if not (_id_type_ok(types["item"]) and _id_type_ok(types["examinee"]) and _response_type_ok(types["response"])):
        raise _Fallback
    as_dictionary = [name for name, dtype in types.items() if _is_text(dtype) and name in DICTIONARY_COLUMNS]

    def batches(columns: list[str]) -> Iterator:
        # a buffered stream, not the whole row group's pages at once (pre_buffer): memory a batch, not a group
        reader = pq.ParquetFile(path, read_dictionary=[c for c in as_dictionary if c in columns],
                                pre_buffer=False, buffer_size=1 << 20)
        try:
            yield from reader.iter_batches(batch_size=BATCH_ROWS, columns=columns, use_threads=False)
        finally:
            reader.close()

    return batches


def _csv_source(path: Path, delimiter: str) -> BatchSource:
    """Batches of the named columns of a plain CSV/TSV long table, every column as text and blank as
    missing, parsed as ``read_long_table`` parses it (pandas' pyarrow engine with ``dtype=str``)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if path.stat().st_size == 0:
        raise _Fallback

    def open_reader(columns: list[str] | None):
        convert = pacsv.ConvertOptions(null_values=[""], strings_can_be_null=True, default_column_type=pa.string(),
                                       include_columns=columns)
        return pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES),
                              parse_options=pacsv.ParseOptions(delimiter=delimiter),
                              convert_options=convert)

    try:
        names = open_reader(None).schema.names
    except Exception as exc:  # noqa: BLE001 - the old reader gives the user-facing error
        raise _Fallback from exc
    if sorted(names) != sorted(REQUIRED_COLUMNS):
        raise _Fallback

    def batches(columns: list[str]) -> Iterator:
        try:
            yield from open_reader(columns)
        except Exception as exc:  # noqa: BLE001 - ragged rows, bad quoting, a corrupt gzip: the old reader explains
            raise _Fallback from exc

    return batches


# ------------------------------------------------------------------ ids
def _as_text(array):
    """An id array as large_string (integers as their decimal text); nulls raise _Fallback (empty id)."""
    import pyarrow as pa

    if array.null_count:
        raise _Fallback
    return array.cast(pa.large_string())


def _batch_uniques(array):
    """Distinct values of one batch's id column, as text, in order of first appearance."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(array.type):
        if array.null_count:
            raise _Fallback
        return _as_text(array.dictionary.take(pc.unique(array.indices)))
    return _as_text(pc.unique(array))


class OrderedUniques:
    """Distinct values of a stream of arrays, in order of first appearance (memory: about twice the
    distinct values; the parts are merged with one ``unique`` whenever they outgrow the distinct ones)."""

    def __init__(self) -> None:
        self._parts: list = []
        self._pending = 0
        self._known = 0

    def add(self, uniques) -> None:
        """Add one batch's distinct values (in their order of first appearance)."""
        self._parts.append(uniques)
        self._pending += len(uniques)
        if self._pending > 2 * self._known + BATCH_ROWS:
            self._compact()

    def _compact(self) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._parts:
            merged = pc.unique(pa.concat_arrays(self._parts))
            self._parts, self._pending, self._known = [merged], len(merged), len(merged)

    def result(self) -> list[str]:
        """The distinct values, in order of first appearance."""
        self._compact()
        return self._parts[0].to_pylist() if self._parts else []


def _ordered_ids(batches: BatchSource) -> tuple[list[str], list[str], int]:
    """Pass 1: item ids (first-appearance order), examinee ids (first-appearance order), number of rows."""
    items, examinees, rows = OrderedUniques(), OrderedUniques(), 0
    for batch in batches(["item", "examinee"]):
        items.add(_batch_uniques(batch.column("item")))
        examinees.add(_batch_uniques(batch.column("examinee")))
        rows += batch.num_rows
    return items.result(), examinees.result(), rows


class _Lookup:
    """Positions of the values of a dictionary in ``value_set``, kept for the next batch (the batches of
    one parquet row group share their dictionary: it is looked up once, not once a batch)."""

    def __init__(self, value_set) -> None:
        self.value_set = value_set
        self._dictionary = None
        self._positions = np.empty(0, dtype=np.int64)

    def __call__(self, dictionary) -> np.ndarray:
        import pyarrow.compute as pc

        if self._dictionary is None or not dictionary.equals(self._dictionary):
            found = pc.index_in(_as_text(dictionary), value_set=self.value_set)
            self._dictionary = dictionary
            self._positions = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        return self._positions


def _positions(array, lookup: _Lookup) -> np.ndarray:
    """Position of each value of an id column in ``lookup.value_set`` (every value is there), as int64."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(array.type):
        if array.null_count:
            raise _Fallback
        return lookup(array.dictionary)[array.indices.to_numpy(zero_copy_only=False)]
    value_set = lookup.value_set
    found = pc.index_in(_as_text(array), value_set=value_set)
    if found.null_count:
        raise _Fallback
    return found.to_numpy(zero_copy_only=False).astype(np.int64)


# ------------------------------------------------------------------ scores
def _numeric_scores(values: np.ndarray, *, graded: bool) -> np.ndarray:
    """Checked scores of a numeric batch (NaN = missing), as ``_parse_scores`` checks them; bad raises _Fallback."""
    if _invalid_numbers(values, graded=graded).any():
        raise _Fallback
    return values.astype(np.float32)


def _text_scores(labels: list, codes: np.ndarray, *, graded: bool, cache: dict) -> np.ndarray:
    """Scores of a dictionary-encoded text batch (code -1 = null = missing), each distinct text parsed
    once by ``_parse_score`` (cached across batches); any bad text raises _Fallback."""
    parsed = [cache[label] if label in cache else cache.setdefault(label, _parse_score(label, graded=graded))
              for label in labels]
    errors = np.array([message is not None for _, message in parsed] + [False])
    if errors[codes].any():
        raise _Fallback
    table = np.array([score for score, _ in parsed] + [np.nan], dtype=np.float32)
    return table[codes]


def _batch_scores(array, *, graded: bool, cache: dict) -> np.ndarray:
    """One batch's response column as float32 scores (NaN = missing), parsed like ``_parse_scores``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    dtype = array.type
    if pa.types.is_boolean(dtype) or pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
        if pa.types.is_boolean(dtype):
            array = array.cast(pa.int8())
        values = np.asarray(array.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False),
                            dtype=np.float64)
        return _numeric_scores(values, graded=graded)
    encoded = array if pa.types.is_dictionary(dtype) else pc.dictionary_encode(array)
    labels = encoded.dictionary.to_pylist()
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return _text_scores(labels, codes, graded=graded, cache=cache)


# ------------------------------------------------------------------ matrix
def _resolve_sentinel(values: np.ndarray) -> int:
    """Turn unwritten cells (the sentinel) into missing (-1), a block of rows at a time; returns how many there
    were."""
    unwritten = 0
    rows = max(1, (1 << 22) // max(values.shape[1], 1))
    for start in range(0, values.shape[0], rows):
        block = values[start:start + rows]
        mask = block == _SENTINEL
        unwritten += int(np.count_nonzero(mask))
        block[mask] = -1
    return unwritten


def _sorted_items(labels: list[str]) -> list[str]:
    """Items in natural order; ties (e.g. '1' and '01') in order of first appearance, as ``from_long`` sorts."""
    return [labels[k] for k in sorted(range(len(labels)), key=lambda k: _natural_key(labels[k]))]


def _fill(batches: BatchSource, items: list[str], examinees: list[str], *, graded: bool) \
        -> tuple[np.ndarray, int, float]:
    """Pass 2: the matrix as int8 codes (-1 missing; unwritten cells hold the sentinel), the rows read and the
    largest score. Scores are whole numbers 0..100 (:data:`irtexam.scores.MAX_GRADED_SCORE`), so int8 holds them."""
    import pyarrow as pa

    item_lookup = _Lookup(pa.array(items, type=pa.large_string()))
    examinee_lookup = _Lookup(pa.array(examinees, type=pa.large_string()))
    values = np.full((len(items), len(examinees)), _SENTINEL, dtype=np.int8)
    flat = values.reshape(-1)
    cache: dict = {}
    rows, top = 0, np.nan
    for batch in batches(list(REQUIRED_COLUMNS)):
        scores = _batch_scores(batch.column("response"), graded=graded, cache=cache)
        cells = _positions(batch.column("item"), item_lookup)
        cells *= len(examinees)
        cells += _positions(batch.column("examinee"), examinee_lookup)
        flat[cells] = np.where(np.isnan(scores), -1, scores).astype(np.int8)
        rows += batch.num_rows
        if graded and scores.size:
            top = np.fmax(top, np.fmax.reduce(scores))
    return values, rows, float(top)


def _release_arrow_memory() -> None:
    """Hand the batches' freed memory back: pyarrow's allocator (mimalloc) keeps it for reuse, 80-120 MB after
    reading a 10^7-row table, which the fit that follows would carry as its own."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def read_plain_long(path: Path, fmt: str, *, graded: bool) -> tuple[np.ndarray, list[str], list[str], int] | None:
    """(codes, items, examinees, max_score) of a plain long table (item, examinee, response) in parquet or
    CSV/TSV, read batch by batch; None where ``from_long`` must read it (other columns or types, bad input).
    ``codes``: int8 scores, -1 where missing (:meth:`ResponseMatrix.from_codes`).

    Returns the matrix ``ResponseMatrix.from_long(read_long_table(path))`` builds on such a table, as codes.
    """
    try:
        if fmt == "parquet":
            batches = _parquet_source(path)
        elif fmt in ("csv", "tsv"):
            batches = _csv_source(path, "," if fmt == "csv" else "\t")
        else:
            return None
        raw_items, examinees, n_rows = _ordered_ids(batches)
        if n_rows == 0 or any(label.strip() == "" for label in raw_items + examinees):
            return None
        items = _sorted_items(raw_items)
        values, rows, top = _fill(batches, items, examinees, graded=graded)
    except _Fallback:
        return None
    _release_arrow_memory()
    if rows != n_rows or values.size - _resolve_sentinel(values) != rows:  # a cell written twice: a duplicate row
        return None
    max_score = max(int(top), 1) if graded and not np.isnan(top) else 1
    return values, items, examinees, max_score


# ------------------------------------------------------------------ writing
def _pandas_metadata(responses) -> bytes:
    """The 'pandas' schema metadata ``ResponseMatrix.save`` writes (so pandas reads the same dtypes back)."""
    import pyarrow as pa

    sample = responses.subset(items=list(responses.items[:1]), examinees=list(responses.examinees[:1])).to_long()
    return pa.Schema.from_pandas(sample, preserve_index=False).metadata[b"pandas"]


def write_long_parquet(responses, path: str | Path, *, rows_per_group: int = WRITE_ROWS) -> Path:
    """Write ``responses`` as the long parquet table ``ResponseMatrix.save`` writes (same columns, rows,
    order and pandas dtypes), a block of items at a time: item-major rows, large_string text columns
    (dictionary-encoded in the file), int64 responses (null = missing; pandas reads Int64), zstd.
    Peak memory: one block of ``rows_per_group`` rows, not a frame of the whole table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if len(responses.item_meta.columns):
        responses.save(path)  # item metadata columns: the general writer
        return Path(path)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n_items, n_examinees = responses.cells.shape
    item_dict = pa.array(responses.items, type=pa.string())
    examinee_dict = pa.array(responses.examinees, type=pa.string())
    facet_dicts = {}
    for name in responses.facet_names:
        codes, levels = _codes(responses.examinee_facets[name].to_numpy())
        facet_dicts[name] = (codes, pa.array(levels, type=pa.string()))
    text = pa.large_string()  # the type pandas writes its str columns as
    fields = [pa.field("item", text), pa.field("examinee", text), pa.field("response", pa.int64())]
    fields += [pa.field(name, text) for name in facet_dicts]
    schema = pa.schema(fields, metadata={b"pandas": _pandas_metadata(responses)})
    block = max(1, rows_per_group // max(n_examinees, 1))
    examinee_codes = np.arange(n_examinees, dtype=np.int32)
    tmp = path.with_name(path.name + ".tmp")
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for start in range(0, n_items, block):
            chunk = float_scores(responses.cells[start:start + block]).reshape(-1)
            k = chunk.size // max(n_examinees, 1)
            item_codes = np.repeat(np.arange(start, start + k, dtype=np.int32), n_examinees)
            observed = ~np.isnan(chunk)
            columns = [_expand(item_codes, item_dict), _expand(np.tile(examinee_codes, k), examinee_dict),
                       pa.array(np.where(observed, chunk, 0).astype(np.int64), mask=~observed)]
            columns += [_expand(np.tile(codes, k), levels) for codes, levels in facet_dicts.values()]
            writer.write_table(pa.Table.from_arrays(columns, schema=schema), row_group_size=chunk.size)
    tmp.replace(path)
    return path


def _expand(codes: np.ndarray, labels):
    """The large_string column whose row r is ``labels[codes[r]]`` (one block of rows)."""
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(codes, labels).cast(pa.large_string())


def _codes(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """int32 codes and distinct labels (first-appearance order) of a column of strings."""
    import pandas as pd

    codes, uniques = pd.factorize(values)
    return codes.astype(np.int32), [str(u) for u in uniques]


# ------------------------------------------------- the compact copy a fit folder keeps
def whole_scores_fit(values: np.ndarray, top: int) -> bool:
    """True where every observed (non-NaN) value is a whole number in 0..``top``; checked a block of rows at a
    time (no copy of the whole matrix). Integer codes (-1 missing): their largest value at most ``top``."""
    if np.issubdtype(values.dtype, np.integer):
        return values.size == 0 or (int(values.min()) >= -1 and int(values.max()) <= top)
    for rows in row_blocks(*values.shape):
        block = values[rows]
        seen = block[~np.isnan(block)]
        if seen.size and (seen.min() < 0 or seen.max() > top or np.any(seen != np.round(seen))):
            return False
    return True


def missing_coded(values: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    """Whole-number scores (NaN where missing) as integers of ``dtype`` with -1 where missing, filled a block of
    rows at a time (no float temporary of the whole matrix); codes already of that type are returned as they are."""
    if values.dtype == np.dtype(dtype):
        return values
    out = np.empty(values.shape, dtype=dtype)
    for rows in row_blocks(*values.shape):
        block = float_scores(values[rows])
        out[rows] = np.where(np.isnan(block), -1, block)
    return out
