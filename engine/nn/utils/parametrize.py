"""Parametrizations (torch.nn.utils.parametrize): module.weight computed on access as f(original).

Registering gives the module instance its own subclass, `Parametrized<Class>`, holding one property per
parametrized name; the originals live in `module.parametrizations.<name>` (a ParametrizationList), so
state_dict keys read `parametrizations.weight.original` exactly as in PyTorch."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from contextlib import contextmanager

from ...autograd.grad_mode import no_grad
from ...tensor import Tensor
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter

__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "transfer_parametrizations_and_params",
    "type_before_parametrizations",
]

_cache_enabled = 0
_cache: dict = {}


@contextmanager
def cached():
    """Within this context each parametrized tensor is computed once, on first access, and reused."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _set_data(tensor: Tensor, value: Tensor) -> None:
    """Make `tensor` hold `value`'s data in place, keeping the object (torch's Tensor.set_)."""
    if hasattr(tensor, "set_"):
        tensor.set_(value)
    else:
        tensor.data = value


def _register_parameter_or_buffer(module: Module, name: str, value: Tensor) -> None:
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


class ParametrizationList(ModuleList):
    """The chain of parametrizations of one tensor, with its unparametrized value in `original` (or
    `original0`, `original1`, ... when the first right_inverse returns several tensors)."""

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = original.shape, original.dtype
        with no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
                # otherwise right_inverse is taken to be the identity
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(new).__name__}"
            )
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}"
                )
            if original.device != new.device:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the device.\n"
                    f"original.device: {original.device}\nright_inverse(original).device: {new.device}"
                )
            with no_grad():
                _set_data(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, value in enumerate(new):
                if not isinstance(value, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                        f"Got element {i} of the sequence with type {type(value).__name__}."
                    )
                if isinstance(original, Parameter):
                    value = Parameter(value, original.requires_grad)
                value.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", value)
        if not self.unsafe:
            Z = self()
            if not isinstance(Z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(Z).__name__}.")
            if Z.dtype != original_dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, unless `unsafe` "
                    "flag "
                    f"is enabled.\nunparametrized dtype: {original_dtype}\nparametrized dtype: {Z.dtype}"
                )
            if Z.shape != original_shape:
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, unless `unsafe` "
                    "flag "
                    f"is enabled.\nunparametrized shape: {original_shape}\nparametrized shape: {Z.shape}"
                )

    def right_inverse(self, value: Tensor) -> None:
        """Store into the originals a value that the chain maps to `value` (what `module.weight = X` does)."""
        with no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(
                        f"parametrization {type(module).__name__} does not implement right_inverse."
                    )
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} while `original` "
                        "has "
                        f"dtype {self.original.dtype}"
                    )
                _set_data(self.original, value)
                return
            if not isinstance(value, Sequence):
                raise ValueError(
                    f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}."
                )
            if len(value) != self.ntensors:
                raise ValueError(
                    f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                    f"Got a sequence of length {len(value)}."
                )
            for i, tensor in enumerate(value):
                original_i = getattr(self, f"original{i}")
                if not isinstance(tensor, Tensor):
                    raise ValueError(
                        f"`right_inverse` must return a sequence of tensors. Got element {i} of type "
                        f"{type(tensor).__name__}"
                    )
                if original_i.dtype != tensor.dtype:
                    raise ValueError(
                        f"Tensor {i} returned by `right_inverse` has dtype {tensor.dtype} while "
                        f"`original{i}` has "
                        f"dtype {original_i.dtype}"
                    )
                _set_data(original_i, tensor)

    def forward(self) -> Tensor:
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


# ----------------------------------------------------------------------------- the injected subclass
def _refuse_pickling(self):
    raise RuntimeError(
        "Serialization of parametrized modules is only supported through state_dict(). See:\n"
        "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
        "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training"
    )


def _deepcopy_instance(self, memo):
    """Plain deepcopy of the instance dict (pickling is refused, so deepcopy cannot go through it)."""
    found = memo.get(id(self))
    if found is not None:
        return found
    replica = self.__new__(self.__class__)
    memo[id(self)] = replica
    replica.__dict__ = copy.deepcopy(self.__dict__, memo)
    return replica


def _guard_property_name(register):
    """register_parameter/register_buffer refusing a parametrized name (torch: attribute already exists)."""

    def guarded(self, name, value, *args, **kwargs):
        if isinstance(getattr(type(self), name, None), property):
            raise KeyError(f"attribute '{name}' already exists")
        return register(self, name, value, *args, **kwargs)

    guarded.__name__ = register.__name__
    return guarded


def _load_with_pre_hooks(self, state_dict, prefix, *args):
    """Run the load_state_dict pre-hooks parametrizations add (e.g. weight_norm's old-key conversion)."""
    for hook in self.__dict__.get("_parametrize_load_pre_hooks", ()):
        hook(state_dict, prefix, *args)
    return super(type(self), self)._load_from_state_dict(state_dict, prefix, *args)


def _add_load_state_dict_pre_hook(module: Module, hook) -> None:
    """hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs) runs before
    the module loads its own entries (engine Modules have no such registry; the parametrized class runs
    it)."""
    module.__dict__.setdefault("_parametrize_load_pre_hooks", []).append(hook)


def _inject_new_class(module: Module) -> None:
    cls = module.__class__
    namespace = {
        "__getstate__": _refuse_pickling,
        "register_parameter": _guard_property_name(cls.register_parameter),
        "register_buffer": _guard_property_name(cls.register_buffer),
        "_load_from_state_dict": _load_with_pre_hooks,
    }
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = _deepcopy_instance
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module: Module, tensor_name: str) -> None:
    assert not hasattr(module, tensor_name)

    def get_parametrized(self) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(self), tensor_name)
        tensor = _cache.get(key)
        if tensor is None:
            tensor = _cache[key] = parametrization()
        return tensor

    def set_original(self, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


# ----------------------------------------------------------------------------- public API
def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Make module.<tensor_name> be parametrization(original); a second call on the same name chains.

    With `right_inverse`, the current value is kept (original = right_inverse(value)) and assigning
    module.<tensor_name> = X stores right_inverse(X). unsafe=True skips the shape and dtype checks."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            Y = getattr(module, tensor_name)
            X = parametrization(Y)
            if not isinstance(X, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(X).__name__}.")
            _check_unchanged(tensor_name, "parametrization", Y, X)
            if hasattr(parametrization, "right_inverse"):
                try:
                    Z = parametrization.right_inverse(X)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(Z, Tensor):
                        raise ValueError(
                            f"parametrization.right_inverse must return a tensor. Got: {type(Z).__name__}"
                        )
                    _check_unchanged(tensor_name, "right_inverse", Y, Z)
        chain = module.parametrizations[tensor_name]
        chain.append(parametrization)
        chain.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        chain = ParametrizationList([parametrization], original, unsafe=unsafe)  # checks before any change
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = chain
    else:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with name "
            f"'{tensor_name}'"
        )
    return module


def _check_unchanged(tensor_name: str, what: str, Y: Tensor, X: Tensor) -> None:
    """Chaining a parametrization must keep module.<tensor_name>'s dtype and shape (unless unsafe)."""
    for attr in ("dtype", "shape"):
        a, b = getattr(Y, attr), getattr(X, attr)
        if a == b:
            continue
        if what == "parametrization":
            raise ValueError(
                f"Registering a parametrization may not change the {attr} of the tensor, unless the "
                f"`unsafe` flag is enabled.\nmodule.{tensor_name}.{attr}: {a}\n"
                f"parametrization(module.{tensor_name}).{attr}: {b}"
            )
        raise ValueError(
            f"The tensor returned by parametrization.right_inverse must have the same {attr} as module."
            f"{tensor_name}, unless the `unsafe` flag is enabled.\nmodule.{tensor_name}.{attr}: {a}\n"
            f"returned {attr}: {b}"
        )


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether the module has any parametrization (or one on tensor_name)."""
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo register_parametrization on tensor_name: the tensor becomes a plain parameter/buffer again,
    holding
    the parametrized value (leave_parametrized=True) or the original one."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
                _set_data(original, value)
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in "
                "terms "
                "of a sequence of tensors."
            )
        value = getattr(module, tensor_name)  # with grad mode on: keeps whether any original required grad
        original = Parameter(value.detach(), value.requires_grad) if value.requires_grad else value.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class as it was before any parametrization was registered."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(
    from_module: Module, to_module: Module, tensor_name: str | None = None
) -> Module:
    """Register from_module's parametrizations (all, or tensor_name's) on to_module, sharing its originals."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        source = from_module.parametrizations[name]
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        if hasattr(source, "original"):
            target.original = source.original
        else:
            i = 0
            while hasattr(source, f"original{i}"):
                setattr(target, f"original{i}", getattr(source, f"original{i}"))
                i += 1
    return to_module
