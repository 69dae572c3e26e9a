"""Datasets for the trainer as NumPy arrays: synthetic toys, the UCI digits, CSV/NPZ/IDX/image folders.

Entry point: `load_dataset(spec, seed)`; `describe_dataset(spec)` says what it would give (shapes,
task, classes, counts) from file headers without reading the data; the catalogue `DATASETS` /
`list_datasets()` drives the GUI form.
"""
from app.datasets.catalogue import (
    DATASETS,
    DatasetDescription,
    DatasetInfo,
    OptionSpec,
    describe_dataset,
    list_datasets,
    load_dataset,
)
from app.datasets.errors import DatasetError
from app.datasets.idx import read_idx
from app.datasets.split import DatasetSplit, Normalization

__all__ = ["DATASETS", "DatasetDescription", "DatasetError", "DatasetInfo", "DatasetSplit", "Normalization",
           "OptionSpec", "describe_dataset", "list_datasets", "load_dataset", "read_idx"]
