"""Document -> one readable, self-contained PyTorch training script: an nn.Module with one named
layer per node, the dataset pipeline, the document's loss/optimiser/schedule, and a training loop
that also runs under `torchrun` with DistributedDataParallel.
"""
from __future__ import annotations

import ast
import inspect
import keyword
import math
import numbers
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.document import Document
from app.document.catalogue import CLASS_LOSSES, FLOAT_TARGET_LOSSES
from app.training.optim_setup import OPTIMIZERS, optimizer_source, schedule_source

from .data_source import DATA_OPTIONS, bundled_files, data_source, resolved_dataset
from .graph import ExportError, ExportGraph, ExportNode, load_split, plan_export

_RECURRENT = ("RNN", "LSTM", "GRU")
# names the script itself uses at module level or inside forward()
_RESERVED = {"self", "torch", "nn", "np", "math", "os", "dist", "argparse", "Path", "F"}
_ASCII_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INIT_OPTIONS = {"xavier_uniform": ("init_gain", "gain"), "xavier_normal": ("init_gain", "gain"),
                 "orthogonal": ("init_gain", "gain"), "normal": ("init_std", "std"),
                 "constant": ("init_value", "value")}


# ---------------------------------------------------------------------------------------------
# small formatting helpers
# ---------------------------------------------------------------------------------------------
def _py(value: Any) -> str:
    """A Python literal for a JSON-ish value (lists become tuples, as PyTorch's signatures show)."""
    if isinstance(value, list | tuple):
        items = [_py(v) for v in value]
        return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        # a plain double-quoted literal when nothing in it needs escaping; else repr(), which
        # escapes quotes, backslashes, line breaks (\n, \u2028...) and every unprintable character
        plain = value.isprintable() and '"' not in value and "\\" not in value
        return f'"{value}"' if plain else repr(value)
    if value is None or isinstance(value, bool | int):
        return repr(value)
    if isinstance(value, numbers.Integral):
        return repr(int(value))
    if isinstance(value, numbers.Real):
        return _py(float(value))
    raise ExportError(f"can't write {type(value).__name__} value {value!r:.40} into the script")


def _text(value: Any) -> str:
    """Any text (a file name, a dataset name) made safe for a docstring or a comment of the script:
    one printable line without double quotes or backslashes, so it can't end the docstring or the
    comment and run as code. Other characters show as <U+XXXX>."""
    return "".join(ch if ch.isprintable() and ch not in '"\\' else f"<U+{ord(ch):04X}>" for ch in str(value))


def _identifier(name: Any, what: str) -> str:
    """`name` if it is a plain ASCII Python identifier (and no keyword) the script may write as
    code; otherwise ExportError naming `what`: nothing from a document becomes code unchecked."""
    if isinstance(name, str) and _ASCII_NAME.fullmatch(name) and not keyword.iskeyword(name):
        return name
    raise ExportError(f"{what}: {name!r:.60} is not a valid Python name")


def _py_dict_lines(value: Mapping[str, Any], width: int = 100) -> str:
    """A dict literal, one entry per line when it does not fit on one."""
    flat = _py(dict(value))
    if len(flat) <= width:
        return flat
    return "{\n" + "".join(f"    {_py(k)}: {_py(v)},\n" for k, v in value.items()) + "}"


_P = inspect.Parameter
# torch's recurrent layers take *args/**kwargs; these are their documented arguments and defaults
_RNN_SIGNATURE = [_P(n, _P.KEYWORD_ONLY, default=d) for n, d in (
    ("input_size", _P.empty), ("hidden_size", _P.empty), ("num_layers", 1), ("nonlinearity", "tanh"),
    ("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False))]


def _torch_signature(class_name: str) -> list[inspect.Parameter]:
    """Constructor parameters of torch.nn.<class_name>: the script writes arguments in their order
    and omits those left at their defaults. Without torch installed every argument is written out
    in the catalogue's order, which is just as correct."""
    try:
        import torch.nn
    except ImportError:  # pragma: no cover - torch is installed wherever the tests run
        return []
    if class_name in ("RNN", "LSTM", "GRU"):
        return _RNN_SIGNATURE
    cls = getattr(torch.nn, class_name, None)
    return list(inspect.signature(cls).parameters.values()) if cls is not None else []


def _same(a: Any, b: Any) -> bool:
    norm = lambda v: tuple(v) if isinstance(v, list | tuple) else v
    return type(a) is type(b) and norm(a) == norm(b) or (
        isinstance(a, list | tuple) and isinstance(b, list | tuple) and tuple(a) == tuple(b))


def _constructor(module: str, class_name: str, kwargs: Mapping[str, Any]) -> str:
    _identifier(class_name, f"{module} class")
    for key in kwargs:
        _identifier(key, f"{module}.{class_name} argument")
    signature = _torch_signature(class_name)
    defaults = {p.name: p.default for p in signature if p.default is not inspect.Parameter.empty}
    rank = {p.name: i for i, p in enumerate(signature)}
    names = sorted(kwargs, key=lambda k: rank.get(k, len(rank)))
    args = [f"{k}={_py(kwargs[k])}" for k in names if not (k in defaults and _same(kwargs[k], defaults[k]))]
    return f"{module}.{class_name}({', '.join(args)})"


def _wrap_call(prefix: str, call: str, width: int = 100) -> list[str]:
    """`prefix + call` split after commas so no line passes `width` (continuations align with the
    opening parenthesis)."""
    if len(prefix) + len(call) <= width or "(" not in call:
        return [prefix + call]
    head, rest = call.split("(", 1)
    pad = " " * (len(prefix) + len(head) + 1)
    lines, line = [], prefix + head + "("
    for i, arg in enumerate(rest[:-1].split(", ")):
        piece = arg + (", " if i < rest.count(", ") else ")")
        if len(line) + len(piece.rstrip()) > width and line.strip():
            lines.append(line.rstrip())
            line = pad
        line += piece
    lines.append(line.rstrip())
    return lines


class _Names:
    """Python names for node ids: the id itself unless it is a keyword or one the script uses. The
    document only allows ASCII identifiers as ids; anything else (a file edited by hand, a future
    id rule) is mangled to one, never written as code."""

    def __init__(self, ids: Sequence[str]) -> None:
        taken = set(ids)
        self.var: dict[str, str] = {}
        for nid in ids:
            name = nid if _ASCII_NAME.fullmatch(nid) else "node_" + re.sub(r"[^A-Za-z0-9_]", "_", nid)
            while keyword.iskeyword(name) or name in _RESERVED or (name != nid and name in taken):
                name += "_"
            self.var[nid] = name
            taken.add(name)

    def __getitem__(self, nid: str) -> str:
        return self.var[nid]


def _module_attr(nid: str) -> str:
    """How forward() reaches a node's layer. The attribute is the node id, so state-dict keys are
    the ids; an id that is a keyword or shadows an nn.Module method goes through `_modules`."""
    import torch.nn  # noqa: F401 - only to know Module's attribute names

    if _ASCII_NAME.fullmatch(nid) and not keyword.iskeyword(nid) and not hasattr(torch.nn.Module, nid):
        return f"self.{nid}"
    return f"self._modules[{nid!r}]"


# ---------------------------------------------------------------------------------------------
# the model class
# ---------------------------------------------------------------------------------------------
def _layer_line(node: ExportNode) -> str | None:
    """`self.fc1 = nn.Linear(...)` for nodes that own a module; None for expression nodes."""
    if node.type in ("Input", "Output", "Add", "Multiply", "Concat", "Reshape", "Permute"):
        return None
    class_name = node.spec.class_name(node.params, torch=True)
    if class_name is None:
        raise ExportError(f"node {node.id}: {node.type} has no PyTorch equivalent; "
                          "replace it before exporting")
    kwargs = node.spec.engine_kwargs(node.params, node.in_shapes)
    return "\n".join(_wrap_call(f"{_module_attr(node.id)} = ", _constructor("nn", class_name, kwargs),
                                width=92))


def _init_line(node: ExportNode) -> str | None:
    choice = node.params.get("init", "default")
    if choice == "default":
        return None
    extra = ""
    if choice in _INIT_OPTIONS:
        param, arg = _INIT_OPTIONS[choice]
        extra = f", {arg}={_py(float(node.params[param]))}"
    return f"init_weights({_module_attr(node.id)}, {_py(choice)}{extra})"


_INIT_HELPER = '''
def init_weights(layer, scheme, gain=1.0, std=0.02, value=0.0):
    """The initialisation chosen in Wiregrad: weight matrices get `scheme`, biases start at zero."""
    with torch.no_grad():
        for name, p in layer.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if "bias" in leaf:
                nn.init.zeros_(p)
            elif "weight" not in leaf or p.dim() < 2:
                continue
            elif scheme == "xavier_uniform":
                nn.init.xavier_uniform_(p, gain=gain)
            elif scheme == "xavier_normal":
                nn.init.xavier_normal_(p, gain=gain)
            elif scheme == "kaiming_uniform":
                nn.init.kaiming_uniform_(p, nonlinearity="relu")
            elif scheme == "kaiming_normal":
                nn.init.kaiming_normal_(p, nonlinearity="relu")
            elif scheme == "orthogonal":
                nn.init.orthogonal_(p, gain=gain)
            elif scheme == "normal":
                nn.init.normal_(p, 0.0, std)
            elif scheme == "zeros":
                nn.init.zeros_(p)
            elif scheme == "constant":
                nn.init.constant_(p, value)
'''


def _forward_lines(node: ExportNode, names: _Names) -> list[str]:
    """The statement(s) computing a node's output into the variable named after it."""
    out = names[node.id]
    args = [names[s] for s in node.inputs]
    kind = node.type
    p = node.params
    if kind == "Add":
        return [f"{out} = {' + '.join(args)}"]
    if kind == "Multiply":
        return [f"{out} = {' * '.join(args)}"]
    if kind == "Concat":
        return _wrap_call(f"{out} = ", f"torch.cat([{', '.join(args)}], dim={_py(int(p['dim']))})", width=92)
    if kind == "Reshape":
        shape = p["shape"] if isinstance(p["shape"], list) else [p["shape"]]
        return [f"{out} = {args[0]}.reshape({args[0]}.size(0), {', '.join(_py(int(d)) for d in shape)})"]
    if kind == "Permute":
        return [f"{out} = {args[0]}.permute({', '.join(_py(int(d)) for d in p['dims'])})"]
    call = _module_attr(node.id)
    if kind == "MultiheadAttention":  # self-attention: query = key = value
        x = args[0]
        return [f"{out}, _ = {call}({x}, {x}, {x}, need_weights=False)"]
    if kind in _RECURRENT:
        if p["return"] == "sequence":
            return [f"{out}, _ = {call}({args[0]})"]
        h = f"{out}_h_n"
        state = f"({h}, _)" if kind == "LSTM" else h
        pick = f"torch.cat([{h}[-2], {h}[-1]], dim=1)" if p["bidirectional"] else f"{h}[-1]"
        return [f"_, {state} = {call}({args[0]})",
                f"{out} = {pick}  # the final hidden state of the last layer"]
    return [f"{out} = {call}({', '.join(args)})"]


def model_source(graph: ExportGraph, class_name: str = "Model") -> tuple[str, bool]:
    """The nn.Module class for the graph, and whether it uses the init_weights helper."""
    names = _Names([n.id for n in graph.nodes])
    layers, inits = [], []
    for node in graph.layers:
        line = _layer_line(node)
        if line is not None:
            layers.append(line)
        init = _init_line(node)
        if init is not None:
            inits.append(init)
    lines = [f"class {_identifier(class_name, 'the model class')}(nn.Module):",
             '    """The Wiregrad graph as PyTorch layers; attribute names are the node ids."""', "",
             "    def __init__(self):", "        super().__init__()"]
    lines += [f"        {line}" for layer in layers for line in layer.splitlines()] or ["        pass"]
    if inits:
        lines += ["        # the initialisation chosen in Wiregrad (other layers keep PyTorch's default)"]
        lines += [f"        {line}" for line in inits]
    args = ", ".join(names[i] for i in graph.input_ids)
    lines += ["", f"    def forward(self, {args}):"]
    for node in graph.layers:
        lines += [f"        {line}" for line in _forward_lines(node, names)]
    preds = [names[graph.prediction_of[o]] for o in graph.output_ids]
    lines.append(f"        return {', '.join(preds)}")
    return "\n".join(lines) + "\n", bool(inits)


# ---------------------------------------------------------------------------------------------
# loss, optimiser, schedule
# ---------------------------------------------------------------------------------------------
def _loss_constructor(graph: ExportGraph, out_id: str) -> str:
    from app.document import get_spec

    params = graph.output_params(out_id)
    node = graph.node(out_id)
    return _constructor("nn", params["loss"], get_spec("Output").engine_kwargs(params, node.in_shapes))


def _optimizer_source(training: Mapping[str, Any]) -> str:
    """The expression building the optimiser: the Trainer's class and keywords (`optim_setup`'s table)."""
    kind = training["optimizer"]["type"]
    if kind not in OPTIMIZERS:
        raise ExportError(f"training: unknown optimizer {kind!r:.40}")
    torch_class, kwargs = optimizer_source(training, _py)
    args = "".join(f", {k}={v}" for k, v in kwargs)
    call = f"{torch_class}(parameters, lr=lr{args})"
    if len(call) <= 96:  # fits after "    return " within the script's 110 columns
        return call
    return f"{torch_class}(\n        parameters,\n        lr=lr," + "".join(
        f"\n        {k}={v}," for k, v in kwargs) + "\n    )"


def _scheduler_source(training: Mapping[str, Any]) -> tuple[str, str]:
    """(the expression building the scheduler, when it steps: "none" | "batch" | "epoch" | "plateau").
    The defaults the Trainer fills in are `optim_setup`'s expressions of the run's length, written as they
    are: `build_scheduler` in the script takes `lr`, `epochs`, `steps_per_epoch` and `accumulate`."""
    sched = training["lr_schedule"]
    kind = sched["type"]
    if kind == "constant":
        return "None", "none"
    _identifier(kind, "training: lr_schedule type")
    options = {_identifier(k, f"training: lr_schedule {kind} option"): _py(v)
               for k, v in (sched.get("options") or {}).items()}
    torch_class, options, when = schedule_source(kind, options)
    args = "".join(f", {k}={v}" for k, v in options.items())
    return f"{torch_class}(optimizer{args})", when


def _targets_mode(graph: ExportGraph, dataset_task: str | None, classes: int | None) -> str:
    """How the script prepares targets, mirroring the Trainer: class indices, one-hot, a 0/1 column
    or plain floats."""
    losses = [graph.output_params(o)["loss"] for o in graph.output_ids]
    if any(name in CLASS_LOSSES for name in losses):
        return "index"
    if dataset_task == "classification" and any(name in FLOAT_TARGET_LOSSES for name in losses):
        pred = graph.node(graph.output_ids[0]).in_shapes.get("in")
        width = pred[-1] if pred else None
        if width == classes and width and width > 1:
            return "one_hot"
        if width == 1 and classes == 2:
            return "column"
    return "float"


_ACCURACY = {
    "index": "(pred.argmax(dim=1) == y).sum()",
    "one_hot": "(pred.argmax(dim=1) == y.argmax(dim=1)).sum()",
    "column": "((pred[:, 0] > {threshold}).long() == y[:, 0].long()).sum()",
}


# ---------------------------------------------------------------------------------------------
# the script
# ---------------------------------------------------------------------------------------------
_TRAINING = '''
# ---------------------------------------------------------------------------------------------
# Training: the document's loss, optimiser, schedule, clipping and mixed precision
# ---------------------------------------------------------------------------------------------
def build_loss():
    return @LOSS@


def compute_loss(loss_fn, pred, y):
@COMPUTE_LOSS@


def count_correct(pred, y):
    """How many predictions name the right class (None for regression)."""
@COUNT_CORRECT@


def build_optimizer(parameters, lr):
    return @OPTIMIZER@


def build_scheduler(optimizer, lr, epochs, steps_per_epoch, accumulate=ACCUMULATION_STEPS):
    return @SCHEDULER@


def load_weights(model, path):
    """Load weights saved by Wiregrad (a .safetensors file whose names are the node ids)."""
    from safetensors.torch import load_file

    state = load_file(str(path))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise RuntimeError(f"{path} does not fit the model: missing {missing}, unexpected {unexpected}")


def save_weights(model, path):
    from safetensors.torch import save_file

    save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, str(path))


def setup(args):
    """(rank, world_size, device). Under torchrun, join the process group: NCCL on GPUs, Gloo on CPUs."""
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if not args.distributed:
        return 0, 1, torch.device("cuda" if use_cuda else "cpu")
    if "RANK" not in os.environ:
        raise SystemExit(f"--distributed needs torchrun: torchrun --nproc_per_node=2 {Path(__file__).name} "
                         "--distributed")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if use_cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    return dist.get_rank(), dist.get_world_size(), device


def autocast(device):
    """Mixed precision when the document asks for it: float16 on GPUs, bfloat16 on CPUs."""
    dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    return torch.autocast(device_type=device.type, dtype=dtype, enabled=AMP)


def evaluate(model, loss_fn, x_val, y_val, device, rank, world_size, batch_size):
    """Validation loss and accuracy over the whole validation set (each process takes a share)."""
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64, device=device)  # loss sum, correct, samples
    mine = np.arange(rank, len(x_val), world_size)
    with torch.no_grad():
        for start in range(0, len(mine), max(batch_size, 512)):
            idx = mine[start:start + max(batch_size, 512)]
            x, y = torch.from_numpy(x_val[idx]).to(device), torch.from_numpy(y_val[idx]).to(device)
            with autocast(device):
                pred = model(x)
                loss = compute_loss(loss_fn, pred, y)
            totals[0] += loss.float() * len(idx)
            correct = count_correct(pred, y)
            totals[1] += 0 if correct is None else correct
            totals[2] += len(idx)
    if world_size > 1:
        dist.all_reduce(totals)
    model.train()
    n = max(totals[2].item(), 1)
    return totals[0].item() / n, (totals[1].item() / n if CLASSIFY else None)


def train(args):
    rank, world_size, device = setup(args)
    torch.manual_seed(SEED)  # every process builds the same initial weights
    model = Model()
    weights = args.weights if args.weights is not None else WEIGHTS
    if weights:
        load_weights(model, weights)
    model.to(device)
    x_train, y_train, x_val, y_val = load_data(args.data)
    x_train, x_val = x_train.astype(INPUT_DTYPE), x_val.astype(INPUT_DTYPE)
    train_set = TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train))
    if args.distributed:
        sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=SEED)
        loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    else:
        sampler = None
        loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(SEED))
        net = model
    loss_fn = build_loss()
    optimizer = build_optimizer(net.parameters(), args.lr)
    scheduler = build_scheduler(optimizer, args.lr, args.epochs, len(loader))
    scaler = torch.amp.GradScaler(device.type, enabled=AMP and device.type == "cuda")
    out = Path(args.out)
    start_epoch, best_val = 0, math.inf
    if args.resume:
        state = torch.load(args.resume, map_location=device, weights_only=True)  # tensors and numbers only
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        start_epoch, best_val = state["epoch"], state["best_val_loss"]
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        print(f"{len(x_train)} training / {len(x_val)} validation samples; {world_size} process(es) on "
              f"{device.type}, global batch {args.batch_size * world_size}")

    for epoch in range(start_epoch, args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)  # a different shuffle every epoch, the same on every process
        net.train()
        loss_sum, seen = 0.0, 0
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            with autocast(device):
                pred = net(x)
                loss = compute_loss(loss_fn, pred, y)
            scaler.scale(loss / ACCUMULATION_STEPS).backward()
            loss_sum += loss.item() * len(x)
            seen += len(x)
            if (step + 1) % ACCUMULATION_STEPS == 0 or step + 1 == len(loader):
                if GRAD_CLIP is not None:
                    scaler.unscale_(optimizer)
                    nn.utils.clip_grad_norm_(net.parameters(), GRAD_CLIP)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                if SCHEDULE_STEPS == "batch":
                    scheduler.step()
        val_loss, val_acc = evaluate(net, loss_fn, x_val, y_val, device, rank, world_size, args.batch_size)
        if SCHEDULE_STEPS == "epoch":
            scheduler.step()
        elif SCHEDULE_STEPS == "plateau":
            scheduler.step(val_loss)
        if rank == 0:
            acc = f" val_acc {val_acc:.4f}" if val_acc is not None else ""
            train_loss = loss_sum / max(seen, 1)
            print(f"epoch {epoch + 1}/{args.epochs} loss {train_loss:.4f} val_loss {val_loss:.4f}{acc}")
            checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                          "scheduler": scheduler.state_dict() if scheduler is not None else None,
                          "scaler": scaler.state_dict(), "epoch": epoch + 1,
                          "best_val_loss": min(best_val, val_loss)}
            torch.save(checkpoint, out / "last.pt")
            if val_loss < best_val:
                torch.save(checkpoint, out / "best.pt")
        best_val = min(best_val, val_loss)

    if rank == 0:
        save_weights(model, out / "model.safetensors")
        print(f"weights saved to {out / 'model.safetensors'}")
    if args.save_every_rank:
        save_weights(model, out / f"model_rank{rank}.safetensors")
    if args.distributed:
        dist.destroy_process_group()
    return model


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--lr", type=float, default=LEARNING_RATE)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="samples per batch and process")
    parser.add_argument("--data", default=None,
                        help=@DATA_HELP@)
    parser.add_argument("--weights", default=None, help="start from these weights (.safetensors)")
    parser.add_argument("--out", default="runs/pytorch", help="where checkpoints and weights go")
    parser.add_argument("--resume", default=None, help="continue from a checkpoint (last.pt)")
    parser.add_argument("--distributed", action="store_true",
                        help="DistributedDataParallel; start with torchrun --nproc_per_node=N")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=@DEVICE@)
    parser.add_argument("--save-every-rank", action="store_true",
                        help="each process also writes its final weights (to check the replicas agree)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    train(parse_args())
'''


def _indent(code: str, by: str = "    ") -> str:
    return "\n".join(by + line if line else line for line in code.splitlines())


def _dataset_facts(doc: Document, base_dir: str | Path | None) -> tuple[str | None, int | None,
                                                                        tuple[int, ...] | None]:
    """(task, classes, input shape) of the document's dataset, when it loads here (the checker's cached
    copy, as the Trainer reads it)."""
    split = load_split(doc, base_dir)
    if split is None:
        return None, None, None
    return split.task, split.num_classes, split.input_shape


def generate_script(doc: Document, *, weights_file: str | None = None, base_dir: str | Path | None = None,
                    source_name: str | None = None, script_name: str = "train_model.py") -> str:
    """The training script for a document, as text. `weights_file` (a path relative to the
    script's folder, or absolute) becomes the default `--weights`. Data Wiregrad ships is read from
    the script's folder (`bundled_files` says which; `export_pytorch` puts it there). Every name
    and string from the document is escaped or checked, and the text is parsed before it is
    returned: a file name or a data path can never run as code."""
    task, classes, shape = _dataset_facts(doc, base_dir)
    graph = plan_export(doc, shape)
    if len(graph.input_ids) != 1:
        raise ExportError(f"the training script feeds one dataset into one Input node; the graph has "
                          f"{len(graph.input_ids)} ({', '.join(graph.input_ids)})")
    training = doc.training
    dataset = resolved_dataset(training, base_dir)
    targets = _targets_mode(graph, task, classes)
    model_code, uses_init = model_source(graph)
    scheduler, when = _scheduler_source(training)

    losses = [_loss_constructor(graph, o) for o in graph.output_ids]
    if len(losses) == 1:
        loss_expr, compute = losses[0], "    return loss_fn(pred, y)"
    else:  # one loss per Output node, summed, each against the same targets (as Wiregrad does)
        loss_expr = "[" + ", ".join(losses) + "]"
        compute = "    return sum(fn(p, y) for fn, p in zip(loss_fn, pred))"
    if targets in _ACCURACY and task == "classification":
        threshold = 0.5 if any(graph.output_params(o)["loss"] == "BCELoss" for o in graph.output_ids) else 0.0
        pick = "    pred = pred[0] if isinstance(pred, tuple) else pred\n"
        correct = pick + "    return " + _ACCURACY[targets].replace("{threshold}", str(threshold))
    else:
        correct = "    return None"
    data_option = DATA_OPTIONS.get(dataset["name"])
    # argparse %-formats help texts: a "%" in the path must reach it doubled
    data_help = ('f"your copy of the data (default: {DATASET[DATA_OPTION]})".replace("%", "%%")'
                 if data_option else '"not used: this dataset is generated"')
    int_input = graph.node(graph.input_ids[0]).params.get("dtype") == "int64"
    input_shape = graph.input_shapes[graph.input_ids[0]][1:]
    device = training["device"]
    seed, epochs, batch_size, accumulate = (_py(int(training[k])) for k in (
        "seed", "epochs", "batch_size", "grad_accumulation"))

    # the file name and script name are the user's text: _text() keeps them inside the docstring
    title = _text(source_name) if source_name else "A Wiregrad graph"
    header = f'''"""{title}: a PyTorch training script exported from Wiregrad on {time.strftime("%Y-%m-%d")}.

    One CPU or GPU:       python {{script}}
    Several processes:    torchrun --nproc_per_node=4 {{script}} --distributed
    A quick check:        python {{script}} --epochs 1 --device cpu

Under torchrun it uses DistributedDataParallel (NCCL on GPUs, Gloo on CPUs) and a DistributedSampler.

`Model` has one layer per node of the graph, named by the node ids, so its state_dict keys are
Wiregrad's weight names (e.g. "fc1.weight") and `--weights model.safetensors` loads them.
"""
import argparse
import math
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

# ---------------------------------------------------------------------------------------------
# Settings from the Wiregrad document
# ---------------------------------------------------------------------------------------------
SEED = {seed}
EPOCHS = {epochs}
BATCH_SIZE = {batch_size}  # per process: under torchrun the global batch is this x processes
LEARNING_RATE = {_py(training["optimizer"]["lr"])}
GRAD_CLIP = {_py(training["grad_clip"])}  # clip the global gradient norm to this (None: no clipping)
ACCUMULATION_STEPS = {accumulate}  # batches whose gradients add up per optimiser step
AMP = {_py(bool(training["amp"]))}  # mixed precision
SCHEDULE_STEPS = {_py(when)}  # when the learning-rate schedule steps
CLASSIFY = {task == "classification"}
INPUT_SHAPE = {_py([int(d) for d in input_shape])}  # one sample, without the batch dimension
INPUT_DTYPE = {"np.int64" if int_input else "np.float32"}
WEIGHTS = {_weights_default(weights_file)}  # the default for --weights
DATASET = {_py_dict_lines(dataset)}
DATA_OPTION = {_py(data_option)}  # which dataset option --data replaces
'''
    parts = [header.replace("{script}", _text(script_name)),
             _section("Model: one layer per node of the graph")]
    if uses_init:
        parts.append(_INIT_HELPER.strip("\n") + "\n\n")
    parts.append(model_code)
    title = f"Data: Wiregrad's {_text(dataset['name'])!r} dataset, split and normalised the same way"
    parts.append("\n" + _section(title))
    parts.append(data_source(dataset, targets, classes))
    # one pass, so nothing filled in (a string parameter) is searched for placeholders again
    fill = {"LOSS": loss_expr, "COMPUTE_LOSS": compute, "COUNT_CORRECT": correct,
            "OPTIMIZER": _optimizer_source(training), "SCHEDULER": scheduler, "DATA_HELP": data_help,
            "DEVICE": _py(device)}
    parts.append("\n" + re.sub(r"@([A-Z_]+)@", lambda m: fill[m.group(1)], _TRAINING))
    text = "".join(parts)
    try:  # every piece above is escaped; a script that does not parse must never be written
        ast.parse(text, filename=script_name)
    except SyntaxError as exc:
        raise ExportError(f"the generated script does not parse (line {exc.lineno}): {exc.msg}; "
                          "please report this") from None
    return text


def _section(title: str) -> str:
    rule = "# " + "-" * 93
    return f"\n{rule}\n# {title}\n{rule}\n"


def _weights_default(weights_file: str | None) -> str:
    if weights_file is None:
        return "None"
    if Path(weights_file).is_absolute():
        return f"Path({weights_file!r})"
    return f"Path(__file__).with_name({weights_file!r})"


def export_pytorch(doc: Document, path: str | Path, *, weights: str | Path | None = None,
                   base_dir: str | Path | None = None, source_name: str | None = None) -> Path:
    """Write the training script to `path`. With `weights` (a .safetensors file, a Wiregrad
    checkpoint or a run directory) the trained weights go next to it as <script>.safetensors and
    become the script's default `--weights`. Data Wiregrad ships (digits.npz) is copied next to it
    too, so the folder runs anywhere; the user's own data stays where it is (`--data` points
    elsewhere)."""
    from .weights import read_state_dict, save_weights

    path = Path(path)
    weights_file = None
    if weights is not None:
        state = read_state_dict(weights)
        target = path.with_suffix(".safetensors")
        _check_weights_fit(doc, state)
        save_weights(state, target)
        weights_file = target.name
    text = generate_script(doc, weights_file=weights_file, base_dir=base_dir, source_name=source_name,
                           script_name=path.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    for name, source in bundled_files(doc.training["dataset"]["name"]).items():
        shutil.copyfile(source, path.with_name(name))
    return path


def _check_weights_fit(doc: Document, state: Mapping[str, Any]) -> None:
    """Every weight must belong to a node of the document (names are node ids)."""
    ids = set(doc.nodes)
    strangers = sorted({k.split(".", 1)[0] for k in state} - ids)
    if strangers:
        raise ExportError(f"the weights hold layers the graph does not have: {', '.join(strangers[:5])}; "
                          "were they trained from another graph?")


__all__ = ["bundled_files", "export_pytorch", "generate_script", "model_source"]
