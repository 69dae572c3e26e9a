"""Dataset/DataLoader behaviours the study texts teach (custom datasets, batching, shuffling per epoch,
drop_last, collate functions, worker options), each run with torch and with the engine."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from conformance_helpers import LIBS, data_of
from torch_compare import both, both_raise, same_repr

_rng = np.random.default_rng(3)
X = _rng.standard_normal((100, 20))
Y = _rng.integers(0, 5, 100)


def custom_dataset(T):
    """ref 000 §6.2 "Custom Dataset Implementation"."""
    Dataset = data_of(T).Dataset

    class CustomDataset(Dataset):
        def __init__(self, features, labels, transform=None):
            self.features = T.tensor(features, dtype=T.float32)
            self.labels = T.tensor(labels, dtype=T.long)
            self.transform = transform

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, idx):
            x = self.features[idx]
            y = self.labels[idx]
            if self.transform:
                x = self.transform(x)
            return x, y

    return CustomDataset


def tabular_dataset(T):
    """ref 002 §5 "Dataset and DataLoader"."""
    Dataset = data_of(T).Dataset

    class TabularDataset(Dataset):
        def __init__(self, X, y):
            self.X = T.from_numpy(X).float()
            self.y = T.from_numpy(y).long()

        def __len__(self):
            return len(self.X)

        def __getitem__(self, idx):
            return self.X[idx], self.y[idx]

    return TabularDataset


def loader_kwargs(**kw):
    """The texts' loaders use workers and pinned memory; here num_workers=0 keeps the suite fast."""
    kw.setdefault("num_workers", 0)
    return kw


# ref 000 §6.2: len, sample shape, label printed as a number
def test_custom_dataset_len_and_sample():
    def ex(T):
        dataset = custom_dataset(T)(X, Y)
        x_sample, y_sample = dataset[0]
        return [len(dataset), x_sample, y_sample, dataset[-1][1]]

    obs = both(ex)
    assert obs[0] == 100 and obs[1]["shape"] == (20,) and obs[2]["dtype"] == "int64" and obs[2]["shape"] == ()
    def show(T):
        x_sample, y_sample = custom_dataset(T)(X, Y)[0]
        return f"Sample shape: {x_sample.shape}, label: {y_sample}"

    printed = same_repr(show)
    assert printed == f"Sample shape: torch.Size([20]), label: {Y[0]}"


def test_transform_is_applied_per_sample():
    def ex(T):
        ds = custom_dataset(T)(X, Y, transform=lambda x: x * 2)
        return ds[3][0]

    np.testing.assert_allclose(both(ex)["values"], (X[3] * 2).astype(np.float32))


# ref 000 §6.3 "DataLoader Configuration": batch_size=32, shuffle, drop_last, pin_memory (no GPU: ignored)
def test_loader_batches_shapes_len_and_drop_last():
    def ex(T):
        DataLoader = data_of(T).DataLoader
        ds = custom_dataset(T)(X, Y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns that pin_memory means nothing without a GPU
            loader = DataLoader(ds, **loader_kwargs(batch_size=32, shuffle=True, pin_memory=True,
                                                    drop_last=True, collate_fn=None, sampler=None))
            shapes = [(tuple(a.shape), tuple(b.shape), str(b.dtype).split(".")[-1]) for a, b in loader]
        keep_last = DataLoader(ds, batch_size=32)
        return [len(loader), shapes, len(keep_last), [len(b[1]) for b in keep_last]]

    n, shapes, n_keep, sizes = both(ex)
    assert n == 3 and shapes == [((32, 20), (32,), "int64")] * 3
    assert n_keep == 4 and sizes == [32, 32, 32, 4]


# ref 002 §5 "shuffle training data each epoch" / "never shuffle validation data"
@LIBS
def test_shuffle_draws_a_new_permutation_each_epoch_and_seed_reproduces_it(T):
    DataLoader, TensorDataset = data_of(T).DataLoader, data_of(T).TensorDataset
    ds = TensorDataset(T.arange(50))

    def epoch(loader):
        return [int(v) for (b,) in loader for v in b]

    T.manual_seed(0)
    loader = DataLoader(ds, batch_size=8, shuffle=True)
    e1, e2 = epoch(loader), epoch(loader)
    assert sorted(e1) == sorted(e2) == list(range(50))
    assert e1 != e2 and e1 != list(range(50))
    T.manual_seed(0)
    assert epoch(DataLoader(ds, batch_size=8, shuffle=True)) == e1
    val = DataLoader(ds, batch_size=8, shuffle=False)
    assert epoch(val) == epoch(val) == list(range(50))


def test_generator_argument_makes_shuffling_independent_of_the_global_seed():
    def ex(T):
        DataLoader, TensorDataset = data_of(T).DataLoader, data_of(T).TensorDataset
        g = T.Generator().manual_seed(7)
        loader = DataLoader(TensorDataset(T.arange(20)), batch_size=5, shuffle=True, generator=g)
        order = [int(v) for (b,) in loader for v in b]
        g2 = T.Generator().manual_seed(7)
        T.manual_seed(123)
        again = [int(v) for (b,) in DataLoader(TensorDataset(T.arange(20)), batch_size=5, shuffle=True,
                                                 generator=g2) for v in b]
        return [order == again, sorted(order) == list(range(20))]

    assert both(ex) == [True, True]


# ref 002 §5: TabularDataset from numpy, next(iter(loader)) shapes
def test_tabular_dataset_from_numpy_and_first_batch():
    def ex(T):
        DataLoader = data_of(T).DataLoader
        ds = tabular_dataset(T)(X, Y)
        X_batch, y_batch = next(iter(DataLoader(ds, batch_size=64, shuffle=False)))
        return [X_batch, y_batch, len(DataLoader(ds, batch_size=128))]

    xb, yb, n = both(ex)
    assert xb["shape"] == (64, 20) and xb["dtype"] == "float32" and yb["dtype"] == "int64" and n == 1


# ref 003 "Dataset and DataLoader Basics": inputs/labels tensors, [32, 128] and [32]
def test_dataset_of_tensors_and_first_batch_shapes():
    def ex(T):
        DataLoader, Dataset = data_of(T).DataLoader, data_of(T).Dataset

        class CustomDataset(Dataset):
            def __init__(self, inputs, labels):
                self.inputs, self.labels = inputs, labels

            def __len__(self):
                return len(self.inputs)

            def __getitem__(self, idx):
                return self.inputs[idx], self.labels[idx]

        ds = CustomDataset(inputs=T.randn(100, 128), labels=T.randint(0, 10, (100,)))
        for batch_inputs, batch_labels in DataLoader(ds, batch_size=32, shuffle=True):
            return [batch_inputs.shape, batch_labels.shape, batch_labels.dtype]

    assert both(ex) == [("Size", (32, 128)), ("Size", (32,)), ("dtype", "int64")]


# ref 003 "Collate Functions and Custom Batching": pad variable-length sequences
def test_custom_pad_collate_fn():
    def ex(T):
        DataLoader, Dataset = data_of(T).DataLoader, data_of(T).Dataset

        class Seqs(Dataset):
            def __len__(self):
                return 5

            def __getitem__(self, i):
                return T.arange(1, i + 2, dtype=T.float32), T.tensor(i)

        def pad_collate_fn(batch):
            inputs, labels = zip(*batch)
            max_len = max(len(x) for x in inputs)
            padded = T.zeros(len(inputs), max_len)
            for i, x in enumerate(inputs):
                padded[i, :len(x)] = x
            labels = T.stack(labels)
            return padded, labels

        return list(DataLoader(Seqs(), batch_size=3, collate_fn=pad_collate_fn, num_workers=0))

    (p1, l1), (p2, l2) = both(ex)
    np.testing.assert_array_equal(p1["values"], [[1, 0, 0], [1, 2, 0], [1, 2, 3]])
    assert p2["shape"] == (2, 5) and l2["values"].tolist() == [3, 4]


def test_default_collate_of_python_numbers_dicts_and_numpy():
    # the default collate_fn (ref 000 §6.3 collate_fn=None) stacks samples field by field
    def ex(T):
        DataLoader, Dataset = data_of(T).DataLoader, data_of(T).Dataset

        class Mixed(Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                return {"x": np.full(2, i, dtype=np.float32), "n": i, "f": i / 2, "name": f"s{i}"}

        batch = next(iter(DataLoader(Mixed(), batch_size=4)))
        return [sorted(batch), batch["x"], batch["n"], batch["f"], batch["name"]]

    keys, x, n, f, names = both(ex)
    assert keys == ["f", "n", "name", "x"] and x["shape"] == (4, 2) and n["dtype"] == "int64"
    assert f["dtype"] == "float64" and names == ["s0", "s1", "s2", "s3"]


# ref 002 §5 / ref 003 "Optimization": worker options are validated like torch
def test_worker_option_validation():
    both_raise(lambda T: data_of(T).DataLoader(data_of(T).TensorDataset(T.ones(4)), persistent_workers=True),
               ValueError, "persistent_workers option needs num_workers > 0")
    both_raise(lambda T: data_of(T).DataLoader(data_of(T).TensorDataset(T.ones(4)), prefetch_factor=2),
               ValueError, "prefetch_factor option could only be specified in multiprocessing")
    both_raise(lambda T: data_of(T).DataLoader(data_of(T).TensorDataset(T.ones(4)), num_workers=-1),
               ValueError, "num_workers option should be non-negative")


def test_sampler_and_shuffle_are_mutually_exclusive():
    def ex(T):
        d = data_of(T)
        ds = d.TensorDataset(T.ones(4))
        d.DataLoader(ds, sampler=d.SequentialSampler(ds), shuffle=True)

    both_raise(ex, ValueError, "sampler option is mutually exclusive with shuffle")


@pytest.mark.parametrize("workers", [0, 2])
def test_worker_processes_give_the_same_batches_in_order(workers):
    # ref 002 §5 "num_workers=4 ... parallel data loading in background processes" (2 here, kept small)
    def ex(T):
        d = data_of(T)
        ds = custom_dataset(T)(X[:20], Y[:20])
        loader = d.DataLoader(ds, batch_size=6, shuffle=False, num_workers=workers,
                              persistent_workers=workers > 0)
        return [list(loader), list(loader)]

    e1, e2 = both(ex)
    assert len(e1) == 4 and e1[0][0]["shape"] == (6, 20)
    np.testing.assert_array_equal(e1[-1][1]["values"], e2[-1][1]["values"])


# ref 002 §9 "A Complete Minimal Example": TensorDataset over from_numpy slices
def test_tensor_dataset_and_random_split():
    def ex(T):
        d = data_of(T)
        rng = np.random.default_rng(42)
        X_np = rng.normal(size=(100, 20)).astype(np.float32)
        y_np = (X_np @ rng.normal(size=(20,)).astype(np.float32) > 0).astype(np.int64)
        ds = d.TensorDataset(T.from_numpy(X_np[:80]), T.from_numpy(y_np[:80]))
        train_loader = d.DataLoader(ds, batch_size=64, shuffle=True)
        sizes = [len(xb) for xb, _ in train_loader]
        a, b = d.random_split(ds, [60, 20])
        c, e = d.random_split(ds, [0.75, 0.25], generator=T.Generator().manual_seed(0))
        return [len(ds), ds[3], sizes, len(a), len(b), len(c), len(e),
                sorted(list(a.indices) + list(b.indices)) == list(range(80))]

    obs = both(ex)
    assert obs[0] == 80 and obs[2] == [64, 16] and obs[3:] == [60, 20, 60, 20, True]
    both_raise(lambda T: data_of(T).random_split(data_of(T).TensorDataset(T.ones(10)), [3, 3]), ValueError,
               "Sum of input lengths", "does not equal the length of the input dataset")


def test_tensor_dataset_rejects_tensors_of_different_lengths():
    both_raise(lambda T: data_of(T).TensorDataset(T.ones(4, 2), T.ones(3)), AssertionError, "Size mismatch")


def test_len_of_loader_counts_batches_for_epoch_averages():
    # ref 002 §4: total_loss / len(loader) is the mean batch loss
    def ex(T):
        d = data_of(T)
        ds = d.TensorDataset(T.ones(10, 1))
        return [len(d.DataLoader(ds, batch_size=3)), len(d.DataLoader(ds, batch_size=3, drop_last=True)),
                len(d.DataLoader(ds, batch_size=10)), len(d.DataLoader(ds))]

    assert both(ex) == [4, 3, 1, 10]


def test_unbatched_loader_with_batch_size_none():
    def ex(T):
        d = data_of(T)
        return list(d.DataLoader(d.TensorDataset(T.arange(3.0)), batch_size=None))

    obs = both(ex)
    assert [o[0]["shape"] for o in obs] == [(), (), ()]


def test_torch_utils_data_and_engine_utils_data_export_the_same_core_names():
    import engine

    for name in ("Dataset", "DataLoader", "TensorDataset", "random_split", "Subset", "RandomSampler",
                 "SequentialSampler", "BatchSampler", "default_collate", "IterableDataset"):
        assert hasattr(torch.utils.data, name) and hasattr(engine.utils.data, name), name
