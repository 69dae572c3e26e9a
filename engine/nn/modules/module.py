"""Module: the base class of layers: registers parameters, buffers and submodules by attribute, like torch."""

from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator

from ...autograd.function import Function
from ...autograd.grad_mode import no_grad, state
from ...autograd.naming import torch_node
from ...tensor import Tensor
from ..parameter import Buffer, Parameter, is_lazy

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
_hook_ids = itertools.count()


class RemovableHandle:
    """Returned by register_*_hook; `remove()` unregisters the hook (also usable as a context manager)."""

    def __init__(self, hooks: dict):
        self._dict = hooks
        self.id = next(_hook_ids)

    def remove(self) -> None:
        self._dict.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class _BackwardHookIdentity(Function):
    """Identity over several tensors: its node sees the gradients of exactly those tensors at once."""

    @staticmethod
    def forward(ctx, *tensors):
        return tensors if len(tensors) > 1 else tensors[0]

    @staticmethod
    def backward(ctx, *grads):
        return grads


_BackwardHookFunction = torch_node(_BackwardHookIdentity, "BackwardHookFunctionBackward")  # torch's node name


class Module:
    """Base class for all layers. Assigning a Parameter, Module or buffer as an attribute registers it."""

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()
        d["_scope_name"] = None  # set by the app (canvas node id): graph nodes made in forward carry it

    forward: Callable

    # ------------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if d["_forward_pre_hooks"] or d["_forward_hooks"] or d["_backward_hooks"]:
            return self._call_with_hooks(args, kwargs)
        name = d["_scope_name"]
        if name is None:
            return self.forward(*args, **kwargs) if kwargs else self.forward(*args)
        prev = state.scope
        state.scope = name
        try:
            return self.forward(*args, **kwargs) if kwargs else self.forward(*args)
        finally:
            state.scope = prev

    def _call_with_hooks(self, args, kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        bw = _BackwardHookState(self) if self._backward_hooks and state.grad_enabled else None
        if bw is not None:
            args = bw.wrap_inputs(args)
        prev = state.scope
        if self._scope_name is not None:
            state.scope = self._scope_name
        try:
            out = self.forward(*args, **kwargs)
        finally:
            state.scope = prev
        for hook in list(self._forward_hooks.values()):
            r = hook(self, args, out)
            if r is not None:
                out = r
        if bw is not None:
            out = bw.wrap_outputs(out)
        return out

    def register_forward_pre_hook(self, hook) -> RemovableHandle:
        """hook(module, args) -> None or new args; runs before forward."""
        h = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[h.id] = hook
        return h

    def register_forward_hook(self, hook) -> RemovableHandle:
        """hook(module, args, output) -> None or a new output; runs after forward."""
        h = RemovableHandle(self._forward_hooks)
        self._forward_hooks[h.id] = hook
        return h

    def register_full_backward_hook(self, hook) -> RemovableHandle:
        """hook(module, grad_input, grad_output) -> None or new grad_input, once input grads are known."""
        h = RemovableHandle(self._backward_hooks)
        self._backward_hooks[h.id] = hook
        return h

    register_backward_hook = register_full_backward_hook

    # ------------------------------------------------------------------ registration
    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._drop(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(torch.nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._drop(name)
            d["_modules"][name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(torch.nn.Module or None expected)"
                )
            d["_modules"][name] = None
        elif isinstance(value, Buffer) or (d.get("_buffers") is not None and name in d["_buffers"]):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(torch.Tensor or None expected)"
                )
            if isinstance(value, Buffer):  # nn.Buffer registers (or re-registers) with its own persistence
                self.register_buffer(name, value, value.persistent)
            else:
                d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _drop(self, name: str) -> None:
        d = self.__dict__
        d.pop(name, None)
        for key in ("_parameters", "_buffers", "_modules"):
            d[key].pop(name, None)
        d["_non_persistent_buffers_set"].discard(name)

    def __getattr__(self, name: str):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            store = d.get(key)
            if store is not None and name in store:
                return store[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if name in d[key]:
                del d[key][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def _check_name(self, name, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if name in self.__dict__ or name in self._buffers or name in self._modules:
            if name not in self._parameters:
                raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(torch.nn.Parameter or None required)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                "explicitly. To express '{name}' as a function of another Tensor, compute the value in "
                "the forward() method."
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if (
            name in self.__dict__ or name in self._parameters or name in self._modules
        ) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(torch Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if name in self.__dict__ and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        mod = self
        for item in target.split(".") if target else []:
            if item not in mod._modules:
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target: str) -> Parameter:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return mod._parameters[name]

    # ------------------------------------------------------------------ iteration
    def _named_members(self, get, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        memo = set()
        modules = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for mod_prefix, mod in modules:
            for k, v in get(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mod_prefix + ("." if mod_prefix else "") + k), v

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self) -> Iterator[tuple[str, Module]]:
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    # ------------------------------------------------------------------ state dict
    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
        """Parameters and persistent buffers by dotted name (detached unless keep_vars)."""
        if args:  # PyTorch's deprecated positional form (destination, prefix, keep_vars)
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _save_to_state_dict(self, destination, prefix: str, keep_vars: bool) -> None:
        """This module's own parameters and persistent buffers (not its children's) into `destination`.
        Uninitialized (lazy) ones go in as they are: they cannot be detached."""
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars or is_lazy(p) else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars or is_lazy(b) else b.detach()

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local = {**{k: v for k, v in self._parameters.items()}, **persistent}
        for name, param in local.items():
            key = prefix + name
            if param is None:
                continue
            if key not in state_dict:
                missing_keys.append(key)
                continue
            src = state_dict[key]
            if not isinstance(src, Tensor):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                    f"object from checkpoint but received {type(src)}"
                )
                continue
            # a lazy parameter takes any shape (LazyModuleMixin materializes it first); an uninitialized
            # source into an initialized one raises on src.shape, as in torch
            if not is_lazy(param) and src.shape != param._shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {src.shape} from checkpoint, "
                    f"the shape in current model is {param.shape}."
                )
                continue
            try:
                with no_grad():
                    param.copy_(src)
            except Exception as e:  # noqa: BLE001 - reported like PyTorch, with the key
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model are '
                    f"{param.shape} and whose dimensions in the checkpoint are {src.shape}, an exception "
                    f"occurred : {e.args}."
                )
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    rest = key[len(prefix) :]
                    head = rest.split(".", 1)[0]
                    if head not in self._modules and head not in local:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values in; returns (missing_keys, unexpected_keys); strict raises listing all problems."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        state_dict = OrderedDict(state_dict)

        def load(module, prefix):
            module._load_from_state_dict(state_dict, prefix, {}, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self, "")
        if strict:
            if unexpected:
                errors.insert(
                    0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected))
                )
            if missing:
                errors.insert(
                    0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing))
                )
        if errors:
            raise RuntimeError(
                "Error(s) in loading state_dict for {}:\n\t{}".format(
                    type(self).__name__, "\n\t".join(errors)
                )
            )
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ modes, devices, dtypes
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                with no_grad():
                    g.zero_()

    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Replace every parameter's and buffer's data by fn(data), keeping the Parameter objects."""
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                with no_grad():
                    new = fn(p)
                if new is not p:
                    p.data = new
                    if p._grad is not None:
                        with no_grad():
                            p._grad = fn(p._grad)
            for k, b in m._buffers.items():
                if b is not None:
                    m._buffers[k] = fn(b)
        return self

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """fn(module) on every submodule (children first) and then self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move and/or cast: to(device), to(dtype), to(device, dtype), to(tensor); floats only."""
        from ...dtypes import dtype as _dtype

        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, _dtype):
                dtype = a
            elif a is not None:
                device = a
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def convert(t: Tensor) -> Tensor:
            dt = dtype if (dtype is not None and t.is_floating_point()) else t.dtype
            return t.to(device=device if device is not None else t.device, dtype=dt)

        return self._apply(convert)

    def cpu(self) -> Module:
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None) -> Module:
        return self._apply(lambda t: t.cuda(device))

    def type(self, dst_type) -> Module:
        return self._apply(lambda t: t.type(dst_type))

    def float(self) -> Module:
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self) -> Module:
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self) -> Module:
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self) -> Module:
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    # ------------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"

    def __dir__(self):
        keys = list(super().__dir__()) + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, st):
        self.__dict__.update(st)


class _BackwardHookState:
    """Per-call wiring of full backward hooks: identity nodes around the inputs and the outputs."""

    def __init__(self, module: Module):
        self.module = module
        self.n_inputs = 0
        self.input_positions = []
        self.grad_outputs = None
        self.done = False

    def wrap_inputs(self, args):
        pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.n_inputs = len(pos)
        needing = [i for i in pos if args[i].requires_grad]
        self.input_positions = [pos.index(i) for i in needing]
        if not needing:
            return args
        wrapped = _BackwardHookFunction.apply(*(args[i] for i in needing))
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        node = wrapped[0].grad_fn
        node.register_prehook(self._on_input_grads)
        out = list(args)
        for i, w in zip(needing, wrapped):
            out[i] = w
        return tuple(out)

    def wrap_outputs(self, out):
        single = isinstance(out, Tensor)
        outs = (out,) if single else tuple(out) if isinstance(out, (tuple, list)) else None
        if outs is None:
            return out
        idx = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not idx:
            return out
        wrapped = _BackwardHookFunction.apply(*(outs[i] for i in idx))
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        wrapped[0].grad_fn.register_prehook(self._on_output_grads)
        self.n_outputs = len(outs)
        self.output_idx = idx
        res = list(outs)
        for i, w in zip(idx, wrapped):
            res[i] = w
        if single:
            return res[0]
        return type(out)(res) if isinstance(out, tuple) else res

    def _on_output_grads(self, grads):
        full = [None] * self.n_outputs
        for i, g in zip(self.output_idx, grads):
            full[i] = g
        self.grad_outputs = tuple(full)
        if not self.input_positions:  # no input needs grad: hooks see grad_input of Nones right away
            self._call_hooks((None,) * self.n_inputs)
        return None

    def _on_input_grads(self, grads):
        full = [None] * self.n_inputs
        for k, g in zip(self.input_positions, grads):
            full[k] = g
        new = self._call_hooks(tuple(full))
        if new is None:
            return None
        return tuple(new[k] for k in self.input_positions)

    def _call_hooks(self, grad_input):
        result = None
        for hook in list(self.module._backward_hooks.values()):
            r = hook(self.module, grad_input, self.grad_outputs)
            if r is not None:
                if len(r) != len(grad_input):
                    raise RuntimeError(
                        f"Backward hook returned an invalid number of grad_input, got {len(r)}, but "
                        f"expected {len(grad_input)}"
                    )
                grad_input = tuple(r)
                result = grad_input
        return result
