"""The MLP anatomy benchmark's replica is the engine's training step in plain NumPy: the same weights after
the same steps, so engine - replica in its report is the engine's own cost and nothing else."""
from __future__ import annotations

import numpy as np

from benchmarks.bench_mlp_anatomy import contenders


def test_the_replica_and_the_hand_written_step_train_the_weights_the_engine_trains():
    steps, weights = contenders(8, 12, 6, 3, lr=0.1)
    start = [w.copy() for w in weights["engine"]()]
    for name, step in steps.items():
        log = []
        for _ in range(5):
            step(log)
        assert len(log) == 5 and all(len(t) == 4 and min(t) >= 0 for t in log), name
    engine_w = weights["engine"]()
    assert not np.allclose(engine_w[0], start[0])  # five steps moved the weights
    for name in ("replica", "numpy (hand-written)"):
        for ours, theirs in zip(engine_w, weights[name]()):
            np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-6, err_msg=name)
