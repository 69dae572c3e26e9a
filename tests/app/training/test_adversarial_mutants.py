"""An independent adversarial check of "`wiregrad validate` accepts => `wiregrad train` trains".

Every bundled example is mutated at the JSON level (parameters at the edges their ParamSpec allows, node types
swapped for ones with the same ports, catalogue nodes spliced into wires, subgraphs duplicated, extra Outputs,
training fields and datasets at their extremes, wrong JSON types anywhere), then each mutant goes through the
real CLI in a subprocess with a memory cap: `validate`, and when it accepts, `train --epochs 1`. The classes:

- ``validate-traceback`` / ``validate-hang``: validate crashed or did not finish;
- ``accepted-then-train-failed``: validate said 0 and train exited non-zero or printed a traceback / "Error";
- ``train-timeout``: train was still running (progressing) when the cap hit: counted, not a failure;
- ``train-diverged``: exit 1 because the training doctor stopped a run whose loss or gradients blew up
  (e.g. lr 100): reported with its one-line warning, counted apart, not a validation failure;
- ``refused`` / ``train-refused``: a clean one-line exit 2; ``ok``: trained.

CI runs a seeded handful; ``WIREGRAD_FUZZ_CASES=N`` runs N (and prints the counts).
"""
from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from app.datasets.catalogue import DATASETS
from app.document.catalogue import catalogue
from app.document.document import LR_SCHEDULES, OPTIMIZERS, TRAINING_FIELDS

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "assets" / "examples").glob("*.json"))
MEMORY_CAP = 2 * 1024 ** 3
VALIDATE_TIMEOUT = 90
TRAIN_TIMEOUT = 25
FAILURES = ("validate-traceback", "validate-hang", "accepted-then-train-failed")


# ------------------------------------------------------------------------------------------ mutations
def _edge_values(spec: Any) -> list[Any]:
    """The values a ParamSpec allows at its edges (and just past them), for its kind."""
    kind = spec.kind
    if kind == "bool":
        return [True, False]
    if kind == "choice":
        return list(spec.choices) + ([None] if spec.nullable else [])
    if kind in ("int", "float"):
        lo = spec.min if spec.min is not None else -(2 ** 31)
        hi = spec.max if spec.max is not None else 2 ** 31
        vals = [lo, hi, 0, 1, hi - 1, lo + 1, -1, 2, 3]
        vals = [v for v in vals if lo <= v <= hi]
        if kind == "int":
            return [int(v) for v in vals]
        return [float(v) for v in vals] + [lo + 1e-9, hi * 0.999999]
    if kind in ("int-tuple", "float-tuple"):
        lo = spec.min if spec.min is not None else 0
        hi = spec.max if spec.max is not None else 8
        cast = int if kind == "int-tuple" else float
        n = spec.length or 2
        return [[cast(lo)] * n, [cast(hi)] * n, [cast(1)] * n, cast(lo), cast(min(hi, 3)),
                [cast(2)] * (n + 1), [], *spec.choices[:1]]
    if kind == "str":
        return ["", "x", "a" * 300]
    return [{}, {"a": 1}]


def _ports(type_: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    spec = catalogue()[type_]
    return tuple(p.name for p in spec.inputs), tuple(spec.outputs)


def _single_io_types() -> list[str]:
    return sorted(t for t in catalogue() if _ports(t) == (("in",), ("out",)))


def _fresh(doc: dict, prefix: str) -> str:
    used = {n["id"] for n in doc["nodes"]}
    i = 0
    while f"{prefix}{i}" in used:
        i += 1
    return f"{prefix}{i}"


def m_param_edge(doc: dict, rng: random.Random) -> str:
    nodes = [n for n in doc["nodes"] if catalogue()[n["type"]].params]
    if not nodes:
        return "noop"
    node = rng.choice(nodes)
    spec = rng.choice(catalogue()[node["type"]].params)
    value = rng.choice(_edge_values(spec))
    node.setdefault("params", {})[spec.name] = value
    return f"param {node['type']}.{spec.name}={value!r}"[:120]


def m_type_swap(doc: dict, rng: random.Random) -> str:
    nodes = [n for n in doc["nodes"] if n["type"] not in ("Input", "Output")]
    if not nodes:
        return "noop"
    node = rng.choice(nodes)
    same = [t for t in catalogue() if _ports(t) == _ports(node["type"]) and t != node["type"]
            and t not in ("Input", "Output")]
    if not same:
        return "noop"
    new = rng.choice(same)
    known = {p.name for p in catalogue()[new].params}
    node["params"] = {k: v for k, v in (node.get("params") or {}).items() if k in known}
    old, node["type"] = node["type"], new
    return f"swap {old}->{new}"


def m_insert(doc: dict, rng: random.Random) -> str:
    if not doc["edges"]:
        return "noop"
    edge = rng.choice(doc["edges"])
    type_ = rng.choice(_single_io_types())
    nid = _fresh(doc, "ins")
    doc["nodes"].append({"id": nid, "type": type_, "params": {}})
    dst = edge["to"]
    edge["to"] = [nid, "in"]
    doc["edges"].append({"from": [nid, "out"], "to": dst})
    return f"insert {type_} into {edge['from'][0]}->{dst[0]}"


def m_duplicate(doc: dict, rng: random.Random) -> str:
    """Copy every non-Input node with its wires (a second branch and a second Output)."""
    copied = {n["id"]: n["id"] + "_dup" for n in doc["nodes"] if n["type"] != "Input"}
    for n in list(doc["nodes"]):
        if n["id"] in copied:
            doc["nodes"].append({**copy.deepcopy(n), "id": copied[n["id"]]})
    for e in list(doc["edges"]):
        if e["to"][0] in copied:
            doc["edges"].append({"from": [copied.get(e["from"][0], e["from"][0]), e["from"][1]],
                                 "to": [copied[e["to"][0]], e["to"][1]]})
    return "duplicate graph"


def m_second_output(doc: dict, rng: random.Random) -> str:
    nodes = [n for n in doc["nodes"] if n["type"] != "Output"]
    src = rng.choice(nodes)
    loss = rng.choice(catalogue()["Output"].param("loss").choices)
    nid = _fresh(doc, "out2_")
    doc["nodes"].append({"id": nid, "type": "Output", "params": {"loss": loss}})
    doc["edges"].append({"from": [src["id"], catalogue()[src["type"]].outputs[0]], "to": [nid, "in"]})
    return f"second Output {loss} on {src['id']}"


_ODD_SCHEDULE_OPTIONS = [{}, {"step_size": 0}, {"step_size": 1, "gamma": 0.0}, {"milestones": []},
                         {"milestones": [0, 0]}, {"gamma": 0.0}, {"gamma": 10.0}, {"T_max": 0}, {"T_max": 1},
                         {"total_steps": 1}, {"max_lr": 0.0}, {"pct_start": 1.0}, {"pct_start": 0.0},
                         {"patience": 0}, {"factor": 1.0}, {"factor": 0.0}, {"start_factor": 0.0},
                         {"end_factor": 0.0}, {"total_iters": 0}, {"bogus": 1}, {"eta_min": -1.0},
                         {"anneal_strategy": "bad"}, {"mode": "max"}, {"three_phase": True}]


def m_training(doc: dict, rng: random.Random) -> str:
    t = doc["training"]
    choice = rng.randrange(13)
    if choice == 0:
        t["batch_size"] = rng.choice([1, 2, 1_000_000, 999_999, 3])
    elif choice == 1:
        t["epochs"] = rng.choice([1, 1_000_000])
    elif choice == 2:
        t["val_fraction"] = rng.choice([0.0, 0.9, 0.899, 1e-9])
        if isinstance(t.get("dataset"), dict) and rng.random() < 0.5:
            t["dataset"]["val_fraction"] = t["val_fraction"]
    elif choice == 3:
        t["optimizer"]["type"] = rng.choice(OPTIMIZERS)
        for name in ("lr", "momentum", "weight_decay", "eps", "lr_decay", "rho", "momentum_decay", "betas",
                     "etas"):
            if rng.random() < 0.3:
                t["optimizer"][name] = rng.choice(_edge_values(TRAINING_FIELDS[f"optimizer.{name}"]))
    elif choice == 4:
        t["lr_schedule"] = {"type": rng.choice(LR_SCHEDULES), "options": rng.choice(_ODD_SCHEDULE_OPTIONS)}
    elif choice == 5:
        t["amp"] = True
    elif choice == 6:
        t["grad_accumulation"] = rng.choice([2, 1000, 100_000])
    elif choice == 7:
        t["grad_clip"] = rng.choice([1e-12, 1e12, None, 0.0])
    elif choice == 8:
        t["early_stopping_patience"] = rng.choice([0, 1, None])
        t["val_fraction"] = rng.choice([0.0, t["val_fraction"]])
    elif choice == 9:
        t["seed"] = rng.choice([2 ** 63 - 1, 2 ** 32, 2 ** 32 - 1, 2 ** 63])
    elif choice == 10:
        t["device"] = rng.choice(["cuda", "auto", "cpu"])
    elif choice == 11:
        t["checkpoint_every"] = rng.choice([1, 1_000_000, 0])
    else:
        t["loss"] = rng.choice(catalogue()["Output"].param("loss").choices)
    return f"training #{choice}: {json.dumps(t, default=str)[:100]}"


def _option_edges(opt: Any) -> list[Any]:
    if opt.kind == "choice":
        return list(opt.choices)
    if opt.kind == "bool":
        return [True, False]
    if opt.kind in ("int", "float"):
        lo, hi = opt.minimum, opt.maximum
        vals = [v for v in (lo, hi, 0, 1, (hi or 2) - 1) if v is not None
                and (lo is None or v >= lo) and (hi is None or v <= hi)]
        return [int(v) for v in vals] if opt.kind == "int" else [float(v) for v in vals]
    if opt.kind == "size":
        return [[1, 1], [1024, 1024], [28, 28]]
    return ["/nonexistent/file", ".", ""]


def m_dataset(doc: dict, rng: random.Random) -> str:
    name = rng.choice(sorted(DATASETS))
    info = DATASETS[name]
    spec = info.default_spec()
    for opt in info.options:
        if rng.random() < 0.5:
            spec[opt.name] = rng.choice(_option_edges(opt))
    if rng.random() < 0.3:
        spec["task"] = "reconstruction" if "reconstruction" in info.option("task").choices else spec["task"]
    doc["training"]["dataset"] = spec
    return f"dataset {json.dumps(spec)[:110]}"


_WRONG = ["1", [], {}, None, float("nan"), 1e308, -1, True, [1, 2], "NaN", 1.5, -1e308, float("inf"), 2 ** 70]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def m_wrong_type(doc: dict, rng: random.Random) -> str:
    path = rng.choice(_paths(doc))
    target = doc
    for key in path[:-1]:
        target = target[key]
    value = rng.choice(_WRONG)
    target[path[-1]] = value
    return f"wrong type {'.'.join(map(str, path))}={value!r}"


MUTATIONS = [m_param_edge, m_param_edge, m_type_swap, m_insert, m_duplicate, m_second_output, m_training,
             m_training, m_dataset, m_wrong_type]


def _cap_work(doc: dict) -> None:
    """Keep a run short: few samples where the dataset has that option (never fixing a wrong type)."""
    t = doc.get("training")
    spec = t.get("dataset") if isinstance(t, dict) else None
    if isinstance(spec, dict) and spec.get("name") in DATASETS:
        if "n_samples" in {o.name for o in DATASETS[spec["name"]].options}:
            n = spec.get("n_samples")
            if isinstance(n, int) and not isinstance(n, bool) and n > 200:
                spec["n_samples"] = 200


def mutants(seed: int, count: int) -> list[tuple[str, dict]]:
    rng = random.Random(seed)
    bases = [(p.stem, json.loads(p.read_text())) for p in EXAMPLES]
    out = []
    for i in range(count):
        stem, base = bases[i % len(bases)]
        doc = copy.deepcopy(base)
        what = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            try:
                what.append(rng.choice(MUTATIONS)(doc, rng))
            except (KeyError, TypeError, IndexError, AttributeError):
                what.append("skipped (an earlier mutation broke the structure)")
        _cap_work(doc)
        out.append((f"{stem}#{i}: " + "; ".join(what), doc))
    return out


# ------------------------------------------------------------------------------------------ running
# the CLI with its address space capped, set by the child itself before it imports anything: a preexec_fn
# would run between fork and exec in a process whose other threads (this campaign's pool, pytest-xdist's)
# may hold locks, which Python documents as unsafe
_CAPPED_CLI = ("import resource, runpy, sys; "
               f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP})); "
               "sys.argv = ['wiregrad', *sys.argv[1:]]; "
               "runpy.run_module('app.cli', run_name='__main__', alter_sys=True)")


def _cli(args: list[str], timeout: float) -> tuple[int | None, str, str]:
    """(exit status or None on timeout, stdout, stderr) of `python -m app.cli ARGS`, memory-capped."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    try:
        proc = subprocess.run([sys.executable, "-c", _CAPPED_CLI, *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return None, "", err
    return proc.returncode, proc.stdout, proc.stderr


def _clean_refusal(err: str) -> bool:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    return bool(lines) and all(ln.startswith("wiregrad ") or ln.startswith("  ") for ln in lines[:1]) \
        and "Traceback" not in err


def _stopped_by_doctor(run_dir: Path, err: str) -> bool:
    """Exit 1 because the training doctor stopped a diverging run (the loss or gradients blew up under these
    settings): an outcome of training the graph, which no check before it can predict, not a crash."""
    try:
        status = json.loads((run_dir / "summary.json").read_text())["status"]
    except (OSError, ValueError, KeyError):
        return False
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return status == "failed" and any("training stopped" in ln for ln in lines) and all(
        ln.startswith(("warning [", "  ")) for ln in lines)


def classify(doc: dict, work: Path) -> tuple[str, str]:
    """(class, detail) of one mutant run through the real CLI."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / "graph.json"
    path.write_text(json.dumps(doc, allow_nan=True))
    rc, out, err = _cli(["validate", str(path)], VALIDATE_TIMEOUT)
    if rc is None:
        return "validate-hang", err[-300:]
    if "Traceback" in out + err or rc not in (0, 2):
        return "validate-traceback", err[-800:]
    if rc == 2:  # validate lists the problems on stdout, one line each
        return "refused", (out.strip() or err.strip()).splitlines()[0] if (out + err).strip() else ""
    train = ["train", str(path), "--epochs", "1", "--out", str(work / "run"), "--quiet"]
    rc, _, err = _cli(train, TRAIN_TIMEOUT)
    if rc is None:
        return "train-timeout", err[-200:]
    if rc == 1 and "Traceback" not in err and _stopped_by_doctor(work / "run", err):
        return "train-diverged", " ".join(err.split())[:300]
    if "Traceback" in err or "Error" in err.replace("error:", "") or rc not in (0, 2):
        return "accepted-then-train-failed", f"rc={rc} " + err[-800:]
    if rc == 2:
        return ("train-refused" if _clean_refusal(err) else "accepted-then-train-failed"), err.strip()[:300]
    return "ok", ""


def run_campaign(seed: int, count: int, work: Path, jobs: int = 1
                 ) -> tuple[Counter, list[tuple[str, str, str]]]:
    """Classify `count` mutants; `jobs` subprocess pairs at a time (threads only wait on them)."""
    from concurrent.futures import ThreadPoolExecutor

    cases = mutants(seed, count)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda c: classify(c[1][1], work / str(c[0])), enumerate(cases)))
    counts: Counter = Counter()
    bad = []
    for i, ((name, _), (kind, detail)) in enumerate(zip(cases, results)):
        counts[kind] += 1
        (work / str(i) / "class.txt").write_text(f"{kind}\n{name}\n{detail}\n")
        if kind in FAILURES or kind in ("train-refused", "train-diverged"):
            bad.append((kind, name, detail))
    return counts, bad


def test_mutants_are_deterministic_and_varied():
    first, second = mutants(7, 30), mutants(7, 30)
    assert [json.dumps(d, default=str) for _, d in first] == [json.dumps(d, default=str) for _, d in second]
    kinds = {name.split(": ")[1].split(" ")[0] for name, _ in first}
    assert len(kinds) >= 5, kinds


def test_edge_values_stay_inside_the_allowed_range_for_numbers():
    for path, spec in TRAINING_FIELDS.items():
        if spec.kind in ("int", "float") and spec.min is not None:
            for v in _edge_values(spec):
                assert spec.min <= v <= spec.max, (path, v)


def test_seeded_mutants_validate_accepts_only_what_trains(tmp_path):
    count = int(os.environ.get("WIREGRAD_FUZZ_CASES", "20"))
    seed = int(os.environ.get("WIREGRAD_FUZZ_SEED", "2026"))
    counts, bad = run_campaign(seed, count, tmp_path, jobs=2)
    print(f"\nadversarial mutants: {count} (seed {seed}): {dict(counts)}")
    failures = [b for b in bad if b[0] in FAILURES]
    assert sum(counts.values()) == count
    assert not failures, "\n\n".join(f"[{k}] {n}\n{d}" for k, n, d in failures[:5])


# by hand: python tests/app/training/test_adversarial_mutants.py N SEED OUTDIR [JOBS]
if __name__ == "__main__":
    n, seed, out = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    counts, bad = run_campaign(seed, n, out, jobs=int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    print(dict(counts))
    for kind, name, detail in bad:
        print(f"[{kind}] {name}\n    {' | '.join(detail.strip().splitlines()[-3:])[:400]}")
    sys.exit(1 if any(k in FAILURES for k, _, _ in bad) else 0)
