"""`wiregrad launch`: the digits MLP trained by PyTorch's DistributedDataParallel under torchrun (two Gloo
processes on the CPU) writes a Wiregrad run folder the app lists, follows and reopens with its weights; a
crashing rank, a missing torch, a port in use and a cluster's launch files."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.document import load_document
from app.launch import Launch, LaunchOptions, prepare_run
from app.training.metrics import BatchMetrics, EpochMetrics, batch_and_epoch_records, read_metrics
from app.training.runs import list_runs

ROOT = Path(__file__).resolve().parents[2]
MLP = ROOT / "assets" / "examples" / "mlp_digits.json"
TIMEOUT = 300


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", **extra)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env or _env(), cwd=ROOT)


def _import_script(path: Path):
    spec = importlib.util.spec_from_file_location(f"launched_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rank_logs(run_dir: Path, name: str) -> dict[int, str]:
    return {int(p.parent.name): p.read_text() for p in (run_dir / "logs").glob(f"*/attempt_*/*/{name}")}


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """One launch of the digits MLP: two processes, one epoch."""
    root = tmp_path_factory.mktemp("runs")
    run_dir = root / "mlp-pytorch"
    proc = _cli("launch", str(MLP), "--nproc-per-node", "2", "--device", "cpu", "--epochs", "1",
                "--out", str(run_dir))
    return proc, run_dir


def test_both_ranks_train_and_rank_0_writes_a_wiregrad_run(launched):
    proc, run_dir = launched
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == "finished" and out["engine"] == "pytorch" and out["world_size"] == 2
    stdout = _rank_logs(run_dir, "stdout.log")
    assert set(stdout) == {0, 1}
    assert "process 0 of 2 training on cpu" in stdout[0]
    assert "process 1 of 2 training on cpu" in stdout[1]
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["engine"] == "pytorch" and meta["world_size"] == 2 and meta["status"] == "finished"
    assert meta["name"].startswith("mlp_digits #")
    assert (run_dir / "document.json").is_file() and (run_dir / "model.safetensors").is_file()
    assert not (run_dir / "run.lock").exists()  # released: the run is not live any more

    records = read_metrics(run_dir / "metrics.jsonl")
    assert [r["kind"] for r in records][0] == "run" and records[-1]["kind"] == "summary"
    info = records[0]
    # each process trains its half of the training set, in batches of the document's size
    half = -(-info["dataset"]["train"] // 2)
    batches = -(-half // load_document(MLP).training["batch_size"])
    objects = batch_and_epoch_records(records)
    steps = [m for m in objects if isinstance(m, BatchMetrics)]
    epochs = [m for m in objects if isinstance(m, EpochMetrics)]
    assert len(steps) == batches == info["steps_per_epoch"] and len(epochs) == 1
    assert [m.step for m in steps] == list(range(1, batches + 1))
    assert set(steps[0].layer_grad_norms) == {"fc1", "out"}  # keyed by the canvas's node ids
    assert all(v > 0 for v in steps[0].update_ratios.values())
    norms = steps[0].layer_grad_norms
    assert steps[0].grad_norm == pytest.approx(np.sqrt(sum(v * v for v in norms.values())))
    assert {"fc1", "act1", "out"} <= set(epochs[0].activation_stats)


def test_the_runs_validation_accuracy_is_what_the_script_printed_and_runs_lists_it(launched):
    proc, run_dir = launched
    rank0 = _rank_logs(run_dir, "stdout.log")[0]
    printed = re.search(r"epoch 1/1 loss \S+ val_loss (\S+) val_acc (\S+)", rank0)
    epoch = next(r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "epoch")
    assert f"{epoch['val_accuracy']:.4f}" == printed.group(2)
    assert f"{epoch['val_loss']:.4f}" == printed.group(1)
    assert json.loads(proc.stdout.strip().splitlines()[-1])["val_accuracy"] == epoch["val_accuracy"]
    listed = {r.path: r for r in list_runs(run_dir.parent)}
    assert listed[run_dir].status == "finished"
    assert f"acc {epoch['val_accuracy']:.1%}" in listed[run_dir].summary


def test_the_weights_in_the_engine_predict_as_the_exported_torch_model(launched):
    import torch
    from safetensors.torch import load_file

    import engine
    from app.compile import compile_document
    from app.export.weights import load_into_engine

    _, run_dir = launched
    script = _import_script(run_dir / "train_model.py")
    _, _, x_val, _ = script.load_data(None)
    x = x_val[:128].astype(np.float32)
    trained = load_file(run_dir / "model.safetensors")
    torch.manual_seed(script.SEED)
    fresh = script.Model().state_dict()
    assert any(not torch.equal(trained[k], fresh[k]) for k in trained)  # it did train
    net = script.Model()
    net.load_state_dict(trained)
    net.eval()
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()

    doc = load_document(run_dir / "document.json")
    model = compile_document(doc, x.shape[1:])
    load_into_engine(model, run_dir / "model.safetensors")
    model.eval()
    with engine.no_grad():
        got = model(engine.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_following_the_finished_run_tells_the_same_result(launched):
    proc, run_dir = launched
    again = _cli("launch", "--follow", str(run_dir), "--quiet")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_rank_that_crashes_stops_the_others_and_keeps_the_checkpoint(tmp_path):
    import torch

    run_dir = tmp_path / "crash"
    options = LaunchOptions(nproc_per_node=2, device="cpu", epochs=2)
    script = prepare_run(load_document(MLP), run_dir, options, graph_name="mlp_digits")
    text = script.read_text()
    hook = "            x, y = x.to(device), y.to(device)\n"
    assert text.count(hook) == 1
    script.write_text(text.replace(hook, hook + "            if rank == 1 and epoch == 1:\n"
                                              "                raise RuntimeError('rank one broke')\n"))
    launch = Launch(run_dir, options, env=_env())
    launch.start()
    code = launch.process.wait(TIMEOUT)
    launch.reap()
    assert code != 0
    line, tail = launch.failure(code)
    assert line.startswith("rank 1 failed: RuntimeError: rank one broke")
    assert "the other processes were stopped" in line and "\n" not in line
    assert any("rank one broke" in t for t in tail)
    with pytest.raises(ProcessLookupError):
        os.killpg(launch.process.pid, 0)  # nothing of the group lives on
    state = torch.load(run_dir / "last.pt", weights_only=True)
    assert state["epoch"] == 1  # the first epoch's checkpoint is kept


def test_torch_missing_says_how_to_install_it(tmp_path):
    shim = tmp_path / "shim" / "torch"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('No module named torch (hidden by the test)')\n")
    before = MLP.read_bytes()
    out = tmp_path / "run"
    proc = _cli("launch", str(MLP), "--nproc-per-node", "2", "--out", str(out),
                env=_env(PYTHONPATH=os.pathsep.join([str(tmp_path / "shim"), str(ROOT)])))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wiregrad launch: error: PyTorch is not installed")
    assert "pip install torch" in lines[0]
    assert MLP.read_bytes() == before and not out.exists()
    # the files for a cluster need no torch here: the script and the torchrun commands are written
    hidden = _env(PYTHONPATH=os.pathsep.join([str(tmp_path / "shim"), str(ROOT)]))
    prepared = _cli("launch", str(MLP), "--nnodes", "2", "--rdzv-endpoint", "node0:29400", "--out", str(out),
                    "--prepare-only", env=hidden)
    assert prepared.returncode == 0, prepared.stderr
    assert (out / "train_model.py").is_file() and (out / "launch" / "torchrun_node1.sh").is_file()
    compile((out / "train_model.py").read_text(), "train_model.py", "exec")  # the script is whole


def test_a_port_in_use_is_one_clear_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _cli("launch", str(MLP), "--nproc-per-node", "2", "--rdzv-endpoint", f"localhost:{port}",
                    "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"wiregrad launch: error: port {port} on localhost is in use (another run, or another program); "
        f"choose another with --rdzv-endpoint localhost:PORT"]


def test_a_cluster_gets_a_torchrun_command_per_node_and_a_slurm_script(tmp_path):
    run_dir = tmp_path / "cluster"
    proc = _cli("launch", str(MLP), "--nproc-per-node", "4", "--nnodes", "2", "--rdzv-endpoint",
                "node0:29400", "--device", "cuda", "--out", str(run_dir), "--prepare-only")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "prepared"
    assert not (run_dir / "metrics.jsonl").exists()  # nothing started
    for k in (0, 1):
        node = run_dir / "launch" / f"torchrun_node{k}.sh"
        assert os.access(node, os.X_OK)
        subprocess.run(["sh", "-n", str(node)], check=True)
        cmd = shlex.split(node.read_text().splitlines()[-1])
        assert cmd[:4] == ["exec", "python", "-m", "torch.distributed.run"]
        pairs = dict(zip(cmd, cmd[1:]))
        assert pairs["--nnodes"] == "2" and pairs["--node-rank"] == str(k)
        assert pairs["--rdzv-endpoint"] == "node0:29400" and pairs["--nproc-per-node"] == "4"
        assert pairs["--run-dir"] == str(run_dir.resolve()) and pairs["--device"] == "cuda"
    sbatch = (run_dir / "launch" / "slurm.sbatch").read_text()
    subprocess.run(["bash", "-n", str(run_dir / "launch" / "slurm.sbatch")], check=True)
    assert "#SBATCH --nodes=2" in sbatch and "#SBATCH --gpus-per-node=4" in sbatch
    assert '"$MASTER:29400"' in sbatch and "--nnodes 2" in sbatch


def test_an_interrupted_launch_stops_every_process_and_says_so_in_one_line(tmp_path):
    import signal
    import time

    run_dir = tmp_path / "interrupted"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "launch", str(MLP), "--nproc-per-node", "2",
                             "--device", "cpu", "--epochs", "50", "--out", str(run_dir), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + TIMEOUT
    while not (metrics.exists() and '"kind": "batch"' in metrics.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else ""
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)  # Ctrl-C in the terminal
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 2 and out == ""
    assert err.strip().splitlines()[-1] == ("wiregrad launch: error: interrupted: the run stopped; its "
                                            f"checkpoint and weights are in {run_dir}")
    records = read_metrics(metrics)
    assert records[-1]["kind"] == "summary" and records[-1]["status"] == "stopped"
    assert any(r.get("event") == "stopped" for r in records)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "stopped"
    assert (run_dir / "last.pt").is_file() and (run_dir / "model.safetensors").is_file()
