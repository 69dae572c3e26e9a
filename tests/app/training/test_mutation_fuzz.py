"""Mutation fuzz: the example documents with edge-value params, swapped types, rewired or dropped nodes and
changed dataset/training fields go through `wiregrad validate`'s check and, when it says valid, one real
training step, each in its own process with a 1 GiB address-space limit and a time limit.

Asserted over all mutants: no traceback escapes, nothing hangs, nothing runs past the memory bound, every
refusal is one line per problem, and no document the check calls valid then fails to train.
CI runs 30 mutants; `WIREGRAD_FUZZ_CASES=1000` runs more (the counts are printed with -s).
"""
from __future__ import annotations

import collections
import copy
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from app.document.catalogue import catalogue

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "assets" / "examples").glob("*.json"))
CASES = int(os.environ.get("WIREGRAD_FUZZ_CASES", "30"))
SEED = int(os.environ.get("WIREGRAD_FUZZ_SEED", "7"))
MEMORY_LIMIT = 1 << 30  # RLIMIT_AS of each mutant's process
TIME_LIMIT = 60  # seconds per mutant (validate + one step); a hang is killed by SIGALRM

_INT_EDGES = (0, 1, -1, 2, 3, 7, 2**31 - 1, 2**20)
_FLOAT_EDGES = (0.0, 1e-12, 1.0, 0.999999, 1e6, -1.0, 100.0)
_TUPLE_EDGES = ([1], [0], [1, 1], [3, 3], [2**31 - 1], [1, 1, 1], [-1], [64], [1, 8, 8])


def _edge_value(rng: random.Random, spec) -> object:
    lo, hi = getattr(spec, "min", None), getattr(spec, "max", None)
    if spec.kind == "int":
        return rng.choice([v for v in (lo, hi, lo + 1 if lo is not None else None) if v is not None]
                          + list(_INT_EDGES))
    if spec.kind == "float":
        return rng.choice([v for v in (lo, hi) if v is not None] + list(_FLOAT_EDGES))
    if spec.kind == "bool":
        return rng.choice([True, False])
    if spec.kind == "choice":
        return rng.choice(list(spec.choices))
    if spec.kind in ("int-tuple", "float-tuple"):
        return rng.choice(_TUPLE_EDGES)
    return rng.choice([None, "", "x", 0])


_TRAINING_MUTATIONS = (
    ("batch_size", (1, 2, 3, 1437, 1438, 1_000_000)),
    ("epochs", (1, 2)),
    ("val_fraction", (0.0, 0.5, 0.9)),
    ("grad_accumulation", (1, 3, 1000)),
    ("grad_clip", (None, 1e-12, 1.0)),
    ("loss", (None, "MSELoss", "BCELoss", "NLLLoss", "KLDivLoss", "MultiMarginLoss", "BCEWithLogitsLoss")),
    ("optimizer", ({"type": "SGD", "lr": 0.1}, {"type": "Rprop", "lr": 0.01, "etas": [1.2, 0.5]},
                   {"type": "Adadelta", "lr": 1.0}, {"type": "Adam", "lr": 100.0},
                   {"type": "NAdam", "lr": 1e-12})),
    ("lr_schedule", ({"type": "StepLR", "options": {"step_size": 0}}, {"type": "OneCycleLR", "options": {}},
                     {"type": "OneCycleLR", "options": {"total_steps": 2}},
                     {"type": "CosineAnnealingLR", "options": {"T_max": 0}},
                     {"type": "MultiStepLR", "options": {"milestones": [2, 1]}},
                     {"type": "ReduceLROnPlateau", "options": {"factor": 2.0}},
                     {"type": "LinearLR", "options": {"start_factor": 0.0}},
                     {"type": "ExponentialLR", "options": {"gamma": "fast"}})),
    ("dataset", ({"name": "digitz"}, {"name": "digits", "layout": "image"}, {"name": "digits", "bogus": 1},
                 {"name": "sequence", "n_classes": 16, "seq_len": 8}, {"name": "sine"}, {"name": "spirals"},
                 {"name": "csv", "path": "missing.csv"}, {"name": "npz", "path": "/dev/null"},
                 {"name": "digits", "normalize": "none"}, {"name": "blobs", "n_samples": 8},
                 {"name": "digits", "task": "reconstruction"})),
)


def mutate(doc: dict, rng: random.Random) -> tuple[dict, list[str]]:
    """1-3 random mutations of a document dict (which may leave it unloadable: that is part of the test)."""
    doc = copy.deepcopy(doc)
    specs = catalogue()
    done = []
    for _ in range(rng.randint(1, 3)):
        nodes, edges = doc["nodes"], doc["edges"]
        op = rng.choice(["param", "param", "param", "type", "rewire", "drop", "training", "training"])
        if op == "param" and nodes:
            node = rng.choice(nodes)
            spec = specs.get(node["type"])
            if spec is None or not spec.params:
                continue
            p = rng.choice(spec.params)
            node.setdefault("params", {})[p.name] = _edge_value(rng, p)
            done.append(f"{node['id']}.{p.name}={node['params'][p.name]!r}")
        elif op == "type" and nodes:
            node = rng.choice(nodes)
            node["type"] = rng.choice(sorted(specs))
            node["params"] = {}
            done.append(f"{node['id']}:type={node['type']}")
        elif op == "rewire" and edges and nodes:
            edge = rng.choice(edges)
            end = rng.choice(["from", "to"])
            edge[end] = [rng.choice(nodes)["id"], edge[end][1]]
            done.append(f"rewire {edge['from'][0]}->{edge['to'][0]}")
        elif op == "drop" and len(nodes) > 1:
            node = nodes.pop(rng.randrange(len(nodes)))
            if rng.random() < 0.7:
                doc["edges"] = [e for e in edges if node["id"] not in (e["from"][0], e["to"][0])]
            done.append(f"drop {node['id']}")
        elif op == "training":
            key, values = rng.choice(_TRAINING_MUTATIONS)
            doc["training"][key] = copy.deepcopy(rng.choice(values))
            done.append(f"training.{key}={doc['training'][key]!r}")
    return doc, done


# --------------------------------------------------------------------------------------------- the runner
def _one(path: str) -> dict:
    """validate (the CLI's check, deep) then, when valid, one real training step. Runs in a forked child
    with the memory and time limits set."""
    from app.cli import document_findings
    from app.document import load_document
    from app.training import Trainer

    text = Path(path).read_text(encoding="utf-8")
    base_dir = Path(path).parent
    try:
        errors, _warnings = document_findings(text, base_dir)
    except MemoryError:
        return {"verdict": "memory", "where": "validate"}
    except BaseException as exc:  # noqa: BLE001 - the check must never raise: count it
        import traceback

        return {"verdict": "traceback", "where": "validate", "error": f"{type(exc).__name__}: {exc}",
                "tb": traceback.format_exc()[-1500:]}
    if errors:
        bad = [line for line in errors if "\n" in line or "Traceback" in line or not line.strip()]
        return {"verdict": "rejected", "lines": errors[:3], "bad_lines": bad}
    try:
        doc = load_document(path)
        trainer = Trainer(doc, epochs=1, base_dir=base_dir, doctor=False, on_nonfinite="stop", device="cpu",
                          preflight_deep=False)
        trainer.steps_per_epoch = 1  # one step (and the validation pass)
        summary = trainer.run()
    except MemoryError:
        return {"verdict": "memory", "where": "train"}
    except BaseException as exc:  # noqa: BLE001
        import traceback

        return {"verdict": "valid_but_failed", "error": f"{type(exc).__name__}: {exc}"[:500],
                "tb": traceback.format_exc()[-1500:]}
    if summary.status == "finished":
        return {"verdict": "trained"}
    if summary.error and "NaN/Inf" in summary.error:
        return {"verdict": "trained_to_nan", "error": summary.error}
    return {"verdict": "valid_but_failed", "error": f"status {summary.status}: {summary.error}"}


def runner_main(paths: list[str]) -> None:
    """Each mutant in a forked child (the imports are paid once): RLIMIT_AS and an alarm set there, one
    JSON line per mutant on stdout; a child killed by a signal is reported as a hang or as memory."""
    import resource
    import signal

    from app.training import Trainer  # noqa: F401 - import the engine once, before forking
    from app.training.preflight import load_training_dataset  # noqa: F401

    for path in paths:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            code = 0
            try:
                resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
                signal.alarm(TIME_LIMIT)
                result = _one(path)
            except BaseException as exc:  # noqa: BLE001
                result = {"verdict": "traceback", "where": "runner", "error": repr(exc)[:500]}
            with os.fdopen(write_fd, "w") as out:
                out.write(json.dumps(result))
            os._exit(code)
        os.close(write_fd)
        with os.fdopen(read_fd) as inp:
            raw = inp.read()
        _, status = os.waitpid(pid, 0)
        if raw:
            result = json.loads(raw)
        elif os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
            result = {"verdict": "hang"}
        else:
            result = {"verdict": "memory" if os.WIFSIGNALED(status) else "died", "status": status}
        result["path"] = path
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


def run_mutants(tmp_path: Path, count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    originals = [json.loads(p.read_text(encoding="utf-8")) for p in EXAMPLES]
    paths, notes = [], {}
    for k in range(count):
        doc, done = mutate(rng.choice(originals), rng)
        path = tmp_path / f"mutant_{k:05d}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        paths.append(str(path))
        notes[str(path)] = done
    listing = tmp_path / "mutants.json"
    listing.write_text(json.dumps(paths), encoding="utf-8")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    code = ("import json, sys; from tests.app.training.test_mutation_fuzz import runner_main; "
            "runner_main(json.load(open(sys.argv[1])))")
    proc = subprocess.run([sys.executable, "-c", code, str(listing)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=TIME_LIMIT * (count + 2))
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == count, f"the runner stopped early: {proc.stderr[-2000:]}"
    for r in results:
        r["mutations"] = notes[r["path"]]
    return results


def test_mutants_never_crash_hang_or_train_after_being_called_valid_wrongly(tmp_path, capsys):
    results = run_mutants(tmp_path, CASES, SEED)
    counts = collections.Counter(r["verdict"] for r in results)
    with capsys.disabled():
        print(f"\nmutation fuzz: {CASES} mutants: "
              + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    failures = ("traceback", "hang", "memory", "died", "valid_but_failed")
    broken = [r for r in results if r["verdict"] in failures or r.get("bad_lines")]
    assert not broken, json.dumps(broken[:3], indent=1)
    assert counts["rejected"] > 0 and counts["trained"] > 0  # both sides are exercised
