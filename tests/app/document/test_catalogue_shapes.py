"""The layer catalogue, shape inference and validation, checked against the formulas and against torch."""
from __future__ import annotations

import inspect

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.document import (
    CATEGORIES,
    Document,
    DocumentError,
    Edge,
    ParamError,
    Problem,
    ShapeError,
    catalogue,
    format_problem,
    format_shape,
    get_spec,
    infer_shapes,
    validate,
)
from app.document.catalogue import CLASS_LOSSES, FLOAT_TARGET_LOSSES, INIT_CHOICES

N = 2  # the batch size used when running torch layers

# (type, params, per-sample input shape(s)); a dict of shapes for multi-input nodes, a list for variadic
CASES = [
    ("Linear", {"out_features": 7}, (5,)),
    ("Linear", {"out_features": 3, "bias": False}, (4, 6)),
    ("Bilinear", {"out_features": 4}, {"in1": (3,), "in2": (5,)}),
    ("Embedding", {"num_embeddings": 11, "embedding_dim": 6, "padding_idx": 0}, (9,)),
    ("Conv1d", {"out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1}, (3, 17)),
    ("Conv1d", {"out_channels": 6, "kernel_size": 4, "padding": "same", "groups": 3, "dilation": 2}, (3, 10)),
    ("Conv2d", {"out_channels": 8, "kernel_size": 3}, (3, 12, 10)),
    ("Conv2d", {"out_channels": 4, "kernel_size": [3, 5], "stride": [2, 1], "padding": [1, 2],
                "dilation": [1, 2]}, (2, 11, 13)),
    ("Conv2d", {"out_channels": 4, "kernel_size": 3, "padding": "same", "padding_mode": "reflect"},
     (2, 8, 8)),
    ("Conv2d", {"out_channels": 6, "kernel_size": 2, "padding": "valid", "groups": 2, "bias": False},
     (4, 7, 7)),
    ("ConvTranspose2d", {"out_channels": 3, "kernel_size": 3, "stride": 2, "padding": 1,
                         "output_padding": 1}, (4, 5, 6)),
    ("ConvTranspose2d", {"out_channels": 4, "kernel_size": [2, 3], "groups": 2, "dilation": 2}, (2, 4, 4)),
    ("ConvTranspose1d", {"out_channels": 3, "kernel_size": 3, "stride": 2, "padding": 1,
                         "output_padding": 1}, (4, 7)),
    ("ConvTranspose1d", {"out_channels": 4, "kernel_size": 2, "groups": 2, "dilation": 3, "bias": False},
     (2, 5)),
    ("MaxPool1d", {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, (2, 10)),
    ("MaxPool2d", {"kernel_size": 2}, (3, 9, 8)),
    ("MaxPool2d", {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True},
     (1, 11, 12)),
    ("AvgPool1d", {"kernel_size": 4, "stride": 3, "ceil_mode": True, "count_include_pad": False}, (2, 11)),
    ("AvgPool2d", {"kernel_size": [3, 2], "stride": [2, 1], "padding": [1, 1]}, (2, 7, 6)),
    ("AdaptiveAvgPool2d", {"output_size": [3, 2]}, (2, 9, 7)),
    ("AdaptiveMaxPool2d", {"output_size": [4, 3]}, (2, 9, 7)),
    ("AdaptiveMaxPool2d", {}, (3, 5, 5)),
    ("AdaptiveAvgPool1d", {"output_size": 4}, (2, 10)),
    ("AdaptiveMaxPool1d", {"output_size": 3}, (3, 7)),
    ("BatchNorm1d", {}, (6,)),
    ("BatchNorm1d", {"affine": False, "momentum": None}, (6, 5)),
    ("BatchNorm2d", {"eps": 1e-3}, (3, 4, 4)),
    ("LayerNorm", {}, (7,)),
    ("LayerNorm", {"normalized_dims": 2, "bias": False}, (3, 4, 5)),
    ("LayerNorm", {"elementwise_affine": False}, (3, 4)),
    ("GroupNorm", {"num_groups": 2}, (6, 4, 4)),
    ("InstanceNorm2d", {}, (3, 5, 4)),
    ("InstanceNorm2d", {"affine": True, "track_running_stats": True, "momentum": None}, (3, 5, 4)),
    ("InstanceNorm1d", {"affine": True, "eps": 1e-3}, (4, 6)),
    ("RMSNorm", {}, (7,)),
    ("RMSNorm", {"normalized_dims": 2, "eps": 1e-6}, (3, 4, 5)),
    ("RMSNorm", {"elementwise_affine": False}, (3, 4)),
    ("Dropout", {"p": 0.3}, (5,)),
    ("Dropout2d", {}, (3, 4, 4)),
    ("RNN", {"hidden_size": 5, "num_layers": 2, "nonlinearity": "relu", "bidirectional": True}, (7, 3)),
    ("LSTM", {"hidden_size": 6, "return": "last"}, (4, 3)),
    ("LSTM", {"hidden_size": 4, "num_layers": 3, "bidirectional": True, "dropout": 0.1}, (5, 2)),
    ("GRU", {"hidden_size": 3, "bias": False, "return": "last", "bidirectional": True}, (6, 4)),
    ("MultiheadAttention", {"num_heads": 2}, (5, 8)),
    ("MultiheadAttention", {"num_heads": 4, "bias": False}, (3, 8)),
    ("TransformerEncoderLayer", {"nhead": 2, "dim_feedforward": 16}, (5, 8)),
    ("TransformerEncoderLayer", {"nhead": 4, "dim_feedforward": 12, "activation": "gelu", "norm_first": True,
                                 "bias": False}, (3, 8)),
    ("ReLU", {}, (4,)),
    ("LeakyReLU", {"negative_slope": 0.2}, (3, 4)),
    ("ELU", {"alpha": 0.5}, (4,)),
    ("GELU", {"approximate": "tanh"}, (4,)),
    ("SiLU", {}, (4,)),
    ("Sigmoid", {}, (4,)),
    ("Tanh", {}, (4,)),
    ("Softmax", {"dim": 1}, (3, 4)),
    ("LogSoftmax", {}, (5,)),
    ("Softplus", {"beta": 2.0, "threshold": 10.0}, (4,)),
    ("Hardtanh", {"min_val": -2.0, "max_val": 0.5}, (4,)),
    ("GLU", {}, (6,)),
    ("GLU", {"dim": 1}, (4, 3)),
    ("ReLU6", {}, (4,)),
    ("SELU", {}, (3, 4)),
    ("CELU", {"alpha": 0.5}, (4,)),
    ("PReLU", {}, (3, 4, 4)),
    ("PReLU", {"per_channel": True, "init_slope": 0.1}, (3, 4, 4)),
    ("PReLU", {"per_channel": True}, (5,)),
    ("Mish", {}, (4,)),
    ("Hardswish", {}, (4,)),
    ("Hardsigmoid", {}, (2, 3)),
    ("Softsign", {}, (4,)),
    ("LogSigmoid", {}, (4,)),
    ("Softmin", {"dim": 1}, (3, 4)),
    ("Tanhshrink", {}, (4,)),
    ("Softshrink", {"lambd": 0.3}, (4,)),
    ("Hardshrink", {}, (4,)),
    ("Flatten", {}, (3, 4, 5)),
    ("Flatten", {"start_dim": 2}, (3, 4, 5)),
    ("Unflatten", {"dim": 1, "unflattened_size": [2, -1]}, (12,)),
    ("Reshape", {"shape": [4, -1]}, (3, 4)),
    ("Permute", {"dims": [0, 2, 1]}, (3, 4)),
    ("PixelShuffle", {"upscale_factor": 3}, (18, 2, 3)),
    ("PixelUnshuffle", {}, (3, 4, 6)),
    ("Upsample", {}, (2, 3, 5)),
    ("Upsample", {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True}, (2, 5, 3)),
    ("Upsample", {"scale_factor": 2.5, "mode": "linear"}, (2, 5)),
    ("Upsample", {"size": [7, 4], "scale_factor": None, "mode": "bilinear"}, (2, 3, 5)),
    ("Upsample", {"size": 9, "scale_factor": None}, (2, 4)),
    ("ZeroPad2d", {"padding": [1, 2, 0, 3]}, (2, 4, 5)),
    ("ZeroPad2d", {}, (4, 5)),
    ("ReflectionPad2d", {"padding": [2, 1, 3, 0]}, (2, 4, 5)),
    ("ReplicationPad2d", {"padding": 3}, (2, 2, 2)),
    ("Add", {}, [(3, 4), (3, 4), (1, 4)]),
    ("Multiply", {}, [(5,), (1,)]),
    ("Concat", {}, [(3,), (5,)]),
    ("Concat", {"dim": 2}, [(2, 3, 4), (2, 1, 4)]),
]


def _batched(per_sample):
    if isinstance(per_sample, dict):
        return {k: (None, *v) for k, v in per_sample.items()}
    if isinstance(per_sample, list):
        return {"in": [(None, *s) for s in per_sample]}
    return {"in": (None, *per_sample)}


def _tensor(shape, integer=False):
    real = tuple(N if d is None else d for d in shape)
    return torch.randint(0, 5, real) if integer else torch.randn(real)


def _run_torch(type_, params, in_shapes):
    """Build the torch layer from the catalogue and run it; returns (output, layer or None)."""
    spec = get_spec(type_)
    resolved = spec.resolve_params(params)
    kwargs = spec.engine_kwargs(params, in_shapes)
    if spec.inputs and spec.inputs[0].variadic:
        xs = [_tensor(s) for s in in_shapes["in"]]
        if type_ == "Add":
            return sum(xs[1:], xs[0]), None
        if type_ == "Multiply":
            out = xs[0]
            for x in xs[1:]:
                out = out * x
            return out, None
        return torch.cat(xs, dim=kwargs["dim"] if "dim" in kwargs else resolved["dim"]), None
    if type_ == "Reshape":
        return _tensor(in_shapes["in"]).reshape(N, *kwargs["shape"]), None
    if type_ == "Permute":
        return _tensor(in_shapes["in"]).permute(*kwargs["dims"]), None
    layer = getattr(torch.nn, spec.torch_class)(**kwargs)
    layer.eval()
    if type_ == "Bilinear":
        return layer(_tensor(in_shapes["in1"]), _tensor(in_shapes["in2"])), layer
    x = _tensor(in_shapes["in"], integer=type_ == "Embedding")
    if type_ in ("RNN", "LSTM", "GRU"):
        out = layer(x)[0]
        return (out[:, -1] if resolved["return"] == "last" else out), layer
    if type_ == "MultiheadAttention":
        return layer(x, x, x)[0], layer
    return layer(x), layer


@pytest.mark.parametrize("type_,params,per_sample", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_shape_rule_and_param_count_match_the_torch_layer(type_, params, per_sample):
    spec = get_spec(type_)
    in_shapes = _batched(per_sample)
    expected = spec.shape_rule(params, in_shapes)["out"]
    assert expected[0] is None
    out, layer = _run_torch(type_, params, in_shapes)
    assert tuple(out.shape) == tuple(N if d is None else d for d in expected)
    torch_count = sum(p.numel() for p in layer.parameters()) if layer is not None else 0
    assert spec.param_count(params, in_shapes) == torch_count


def test_cases_cover_every_node_type_except_input_and_output():
    covered = {c[0] for c in CASES}
    # Unknown (imported modules Wiregrad can't run) has no shape by design; tests/app/export cover it. The
    # block types are expanded away before shapes are inferred (tests/app/document/test_blocks.py)
    assert set(catalogue()) - covered == {"Input", "Output", "Unknown", "Block", "BlockInput", "BlockOutput",
                                          "BlockPort"}


@pytest.mark.parametrize("loss", get_spec("Output").param("loss").choices)
def test_output_node_builds_every_torch_loss_with_its_kwargs(loss):
    spec = get_spec("Output")
    params = {"loss": loss, "label_smoothing": 0.1, "beta": 0.5, "log_target": True, "delta": 0.5,
              "log_input": False, "full": True, "p": 2, "margin": 0.5,
              "reduction": "batchmean" if loss == "KLDivLoss" else "mean"}
    kwargs = spec.engine_kwargs(params, {"in": (None, 4)})
    assert spec.class_name(params, torch=True) == loss
    fn = getattr(torch.nn, loss)(**kwargs)
    pred = torch.rand(N, 4)
    if loss in CLASS_LOSSES:
        target = torch.tensor([1, 3])
    else:
        assert loss in FLOAT_TARGET_LOSSES
        target = torch.rand(N, 4)
    assert fn(pred, target).ndim == 0
    assert ("label_smoothing" in kwargs) == (loss == "CrossEntropyLoss")
    # each loss gets exactly the options it has, under PyTorch's names
    accepted = set(inspect.signature(getattr(torch.nn, loss)).parameters)
    assert set(kwargs) <= accepted and set(kwargs) - {"reduction", "ignore_index"} == {
        p.name for p in spec.params if p.only_when and p.applies(params) and p.name != "ignore_index"}


@pytest.mark.parametrize("loss", ["HuberLoss", "PoissonNLLLoss", "MultiMarginLoss",
                                  "MultiLabelSoftMarginLoss"])
def test_the_engine_losses_match_torch_with_the_output_node_options(loss):
    import engine

    spec = get_spec("Output")
    params = {"loss": loss, "delta": 0.3, "log_input": False, "full": True, "p": 2, "margin": 0.7}
    kwargs = spec.engine_kwargs(params, {"in": (None, 3)})
    pred = torch.rand(4, 3) * 3
    target = torch.tensor([0, 2, 1, 2]) if loss in CLASS_LOSSES else (torch.rand(4, 3) > 0.5).float()
    ours = getattr(engine.nn, loss)(**kwargs)(engine.from_numpy(pred.numpy()),
                                              engine.from_numpy(target.numpy())).item()
    assert ours == pytest.approx(getattr(torch.nn, loss)(**kwargs)(pred, target).item(), rel=1e-5)


def test_losses_that_take_a_matrix_refuse_other_shapes():
    for loss in ("MultiMarginLoss", "MultiLabelSoftMarginLoss"):
        with pytest.raises(ShapeError, match=rf"{loss} expects scores \(N, C\), got \(N, 3, 4\)"):
            get_spec("Output").shape_rule({"loss": loss}, {"in": (None, 3, 4)})


def test_engine_kwargs_use_the_torch_constructor_argument_names():
    for spec in catalogue().values():
        if spec.torch_class is None:
            continue
        accepted = set(inspect.signature(getattr(torch.nn, spec.torch_class)).parameters)
        for p in spec.params:
            if p.ctor:
                assert p.name in accepted or "kwargs" in accepted, (spec.type, p.name)


# --- conv / pool formulas under random parameters, against torch ------------------------------
_small = st.integers(min_value=1, max_value=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(type_=st.sampled_from(["Conv2d", "MaxPool2d", "AvgPool2d", "Conv1d", "MaxPool1d", "AvgPool1d",
                              "ConvTranspose2d", "ConvTranspose1d"]),
       size=st.integers(1, 12), k=_small, s=st.integers(1, 3), p=st.integers(0, 2), d=st.integers(1, 2),
       ceil=st.booleans(), same=st.booleans())
def test_conv_and_pool_shape_rules_agree_with_torch_or_both_refuse(type_, size, k, s, p, d, ceil, same):
    spec = get_spec(type_)
    params = {"kernel_size": k, "stride": s, "padding": p}
    if "Conv" in type_:
        params["dilation"] = d
        params["out_channels"] = 2
        if type_.startswith("ConvTranspose"):
            params["output_padding"] = min(1, max(s, d) - 1)
        elif same:
            params["padding"] = "same"
    elif "Max" in type_:
        params.update(dilation=d, ceil_mode=ceil)
    else:
        params["ceil_mode"] = ceil
    ndim = 1 if type_.endswith("1d") else 2
    in_shapes = {"in": (None, 2, *(size,) * ndim)}
    try:
        ours = spec.shape_rule(params, in_shapes)["out"]
    except (ShapeError, ParamError):
        ours = None
    try:
        out, _ = _run_torch(type_, params, in_shapes)
        theirs = tuple(out.shape)
    except (RuntimeError, ValueError, ParamError):
        theirs = None
    if ours is None:
        assert theirs is None or 0 in theirs
    else:
        assert theirs == (N, *ours[1:])


def test_conv_formula_floors_like_pytorch_docs():
    spec = get_spec("Conv2d")
    # H_out = floor((H + 2p - d(k-1) - 1) / s + 1) = floor((10 + 2 - 4 - 1) / 3 + 1) = 3
    out = spec.shape_rule({"out_channels": 5, "kernel_size": 3, "padding": 1, "dilation": 2, "stride": 3},
                          {"in": (None, 1, 10, 10)})
    assert out == {"out": (None, 5, 3, 3)}


def test_padding_same_is_refused_with_a_stride():
    with pytest.raises(ParamError, match='"same" only works with stride 1'):
        get_spec("Conv2d").shape_rule({"padding": "same", "stride": 2}, {"in": (None, 1, 8, 8)})


def test_shape_errors_speak_in_shapes():
    with pytest.raises(ShapeError, match=r"expects a 4-D input \(N, C, H, W\), got \(N, 64\)"):
        get_spec("Conv2d").shape_rule({}, {"in": (None, 64)})
    with pytest.raises(ShapeError, match=r"expects \(N, 64\) .*got \(N, 32\)") as info:
        get_spec("Add").shape_rule({}, {"in": [(None, 64), (None, 32)]})
    assert info.value.port == "in"
    with pytest.raises(ShapeError, match="too small"):
        get_spec("Conv2d").shape_rule({"kernel_size": 5}, {"in": (None, 1, 3, 3)})
    with pytest.raises(ShapeError, match="not divisible by num_heads=3"):
        get_spec("MultiheadAttention").shape_rule({"num_heads": 3}, {"in": (None, 5, 8)})
    with pytest.raises(ShapeError, match="batch dimension"):
        get_spec("Softmax").shape_rule({"dim": 0}, {"in": (None, 8)})


def test_format_shape_writes_the_batch_as_n():
    assert format_shape((None, 64)) == "(N, 64)"
    assert format_shape((None,)) == "(N)"


# --- the catalogue itself ----------------------------------------------------------------------
def test_every_spec_is_complete_and_weighted_layers_declare_init():
    specs = catalogue()
    assert list(dict.fromkeys(s.category for s in specs.values())) == [
        c for c in CATEGORIES if any(s.category == c for s in specs.values())]
    for name, spec in specs.items():
        assert spec.type == name and spec.category in CATEGORIES
        assert spec.description and "\n" not in spec.description
        assert spec.icon and spec.id_prefix.isidentifier()
        assert all(p.help for p in spec.params), name
        spec.resolve_params({})  # the defaults are valid
    for type_, params, per_sample in CASES:
        spec = get_spec(type_)
        # norm scales and PReLU slopes are vectors: the weight-matrix schemes don't apply to them
        vectors_only = type_.startswith(("BatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm", "RMSNorm",
                                         "PReLU"))
        if spec.param_count(params, _batched(per_sample)) and not vectors_only:
            assert spec.param("init").choices == INIT_CHOICES, type_


def test_unknown_type_lookup_suggests_close_names():
    with pytest.raises(DocumentError, match="did you mean Linear"):
        get_spec("Lineer")


def test_param_checks_cover_type_range_and_choices():
    spec = get_spec("Conv2d")
    with pytest.raises(ParamError, match="out_channels must be a whole number"):
        spec.check_param("out_channels", 2.5)
    with pytest.raises(ParamError, match="out_channels must be at least 1"):
        spec.check_param("out_channels", 0)
    with pytest.raises(ParamError, match="padding_mode must be one of zeros, reflect"):
        spec.check_param("padding_mode", "mirror")
    with pytest.raises(ParamError, match="kernel_size must have 2 entries"):
        spec.check_param("kernel_size", [3, 3, 3])
    assert spec.check_param("kernel_size", (3, 5)) == [3, 5]
    with pytest.raises(ParamError, match="has no parameter 'kernel'"):
        spec.check_param("kernel", 3)


def test_lstm_last_can_feed_a_linear():
    doc = _chain(("Input", {"shape": [10, 3]}), ("LSTM", {"hidden_size": 8, "return": "last"}),
                 ("Linear", {"out_features": 2}), ("Output", {}))
    info = infer_shapes(doc)
    assert info.shape_of("lstm1") == (None, 8)
    assert info.shape_of("fc1") == (None, 2)


# --- inference and validation on small documents -----------------------------------------------
def _chain(*nodes):
    doc = Document()
    ids = [doc.add_node(t, p) for t, p in nodes]
    for a, b in zip(ids, ids[1:]):
        doc.connect(a, "out", b, "in")
    return doc


def _mlp():
    return _chain(("Input", {"shape": [64]}), ("Linear", {"out_features": 32}), ("ReLU", {}),
                  ("Linear", {"out_features": 10}), ("Output", {}))


def test_a_good_mlp_has_no_problems_and_sums_params_and_macs():
    doc = _mlp()
    assert validate(doc) == []
    info = infer_shapes(doc)
    assert info.order == ["x1", "fc1", "relu1", "fc2", "loss1"]
    assert info.total_params == 64 * 32 + 32 + 32 * 10 + 10
    assert info.total_macs == 64 * 32 + 32 * 10
    assert info.edge_shape(doc.edges[1]) == (None, 32)


def test_dataset_shape_overrides_a_dataset_driven_input():
    doc = _mlp()
    assert infer_shapes(doc, input_shape=(20,)).nodes["fc1"].param_count == 20 * 32 + 32
    doc.set_param("x1", "dataset_driven", False)
    assert infer_shapes(doc, input_shape=(20,)).nodes["fc1"].param_count == 64 * 32 + 32


def test_cycle_is_reported_on_each_node_naming_the_cycle():
    doc = _mlp()
    doc.edges.append(Edge("relu1", "out", "fc1", "in"))  # as a file could have it; connect() refuses
    problems = validate(doc)
    cyc = [p for p in problems if "cycle" in p.message]
    assert {p.node_id for p in cyc} == {"fc1", "relu1"}
    assert any("fc1 → relu1 → fc1" in p.message for p in cyc)


def test_unconnected_required_input_names_the_port():
    doc = _mlp()
    doc.disconnect("relu1", "out", "fc2", "in")
    problems = validate(doc)
    assert Problem("fc2", "in", "is not connected: it needs an input") in problems
    # the Output downstream of the error gets no shape and no error of its own
    info = infer_shapes(doc)
    assert info.nodes["loss1"].blocked and info.nodes["loss1"].problem is None
    assert not [p for p in problems if p.node_id == "loss1"]  # ... and no graph-level duplicate pinned to it


def test_a_node_off_the_path_to_the_output_is_a_warning_and_the_graph_still_compiles():
    from app.compile import compile_document

    doc = _mlp()
    doc.add_node("Linear", {"out_features": 8}, node_id="stray")  # just dropped, not wired yet
    problems = validate(doc)
    stray = [p for p in problems if p.node_id == "stray"]
    assert [p.severity for p in stray] == ["warning"]
    assert "needs an input" in stray[0].message and "leaves it out" in stray[0].message
    assert not [p for p in problems if p.severity == "error"]
    model = compile_document(doc)
    assert "stray" not in model.order and "fc2" in model.order
    # the same problem on the path to the Output still refuses
    doc.disconnect("relu1", "out", "fc2", "in")
    assert any(p.severity == "error" and p.node_id == "fc2" for p in validate(doc))


def test_incompatible_shapes_name_both_shapes_and_downstream_stays_quiet():
    doc = _chain(("Input", {"shape": [64]}), ("Linear", {"out_features": 64}), ("Add", {}), ("ReLU", {}),
                 ("Output", {}))
    side = doc.add_node("Linear", {"out_features": 32})
    doc.connect("x1", "out", side, "in")
    doc.connect(side, "out", "add1", "in")
    problems = validate(doc)
    assert [format_problem(p) for p in problems] == [
        "node add1, port in: expects (N, 64) (the shape of its first input), got (N, 32) on input 2; "
        "Add needs matching or broadcastable shapes"]
    assert infer_shapes(doc).nodes["relu1"].shape is None


def test_bad_param_values_unknown_types_and_duplicate_ids_from_a_raw_dict():
    d = _mlp().to_dict()
    d["nodes"][1]["params"]["out_features"] = -3
    d["nodes"][2]["type"] = "Relu"
    d["nodes"].append({"id": "fc2", "type": "Linear", "params": {}, "pos": [0, 0]})
    d["edges"].append({"from": ["ghost", "out"], "to": ["fc2", "in"]})
    text = [format_problem(p) for p in validate(d)]
    assert "node fc2: the id fc2 is used by 2 nodes; only the first is kept" in text
    assert "node fc2: edge 5 (ghost -> fc2) is dropped: there is no node ghost" in text
    assert "node fc1: out_features must be at least 1, got -3" in text
    assert "node relu1: unknown node type 'Relu' (did you mean ReLU?)" in text


def test_cross_parameter_conflicts_are_validation_problems():
    doc = _chain(("Input", {"shape": [1, 8, 8]}), ("Conv2d", {"padding": "same"}), ("Flatten", {}),
                 ("Output", {"loss": "MSELoss"}))
    doc.set_param("conv1", "stride", 2)  # allowed as an edit ...
    assert format_problem(validate(doc)[0]) == 'node conv1: padding "same" only works with stride 1'


def test_missing_input_output_and_path():
    doc = Document()
    doc.add_node("Linear")
    messages = {p.message for p in validate(doc)}
    assert "the graph has no Input node" in messages
    assert "the graph has no Output node (the loss)" in messages
    doc = _mlp()
    doc.disconnect("x1", "out", "fc1", "in")
    problems = validate(doc)
    assert Problem(None, None, "no path leads from an Input node to loss1") in problems
    assert Problem("x1", None, "is not connected to anything", "warning") in problems
    assert format_problem(Problem("x1", None, "is not connected to anything", "warning")) == \
        "node x1: warning: is not connected to anything"


def test_port_problems_occupied_input_and_merge_arity():
    doc = _mlp()
    doc.edges.append(Edge("x1", "out", "fc2", "in"))  # as a file could have it
    assert any(p.node_id == "fc2" and "takes one input but has 2" in p.message for p in validate(doc))
    doc = _chain(("Input", {"shape": [4]}), ("Add", {}), ("Output", {"loss": "MSELoss"}))
    assert Problem("add1", "in", "needs at least 2 inputs, has 1") in validate(doc)


def test_classification_loss_needs_class_scores():
    assert validate(_chain(("Input", {"shape": [4]}), ("Output", {}))) == []
    info = infer_shapes(_chain(("Input", {"shape": [4, 2]}), ("Permute", {"dims": [0, 2, 1]}),
                               ("Output", {"loss": "CrossEntropyLoss"})))
    assert info.nodes["loss1"].problem is None
    assert get_spec("Output").shape_rule({}, {"in": (None, 4)}) == {}
    with pytest.raises(ShapeError, match=r"expects class scores \(N, C\), got \(N\)"):
        get_spec("Output").shape_rule({}, {"in": (None,)})


def test_validate_never_raises_on_garbage():
    assert validate([]) == [Problem(None, None, "a graph document is a JSON object, got a list")]
    assert "newer Wiregrad" in validate({"format": "wiregrad.graph", "version": 99})[0].message


def test_every_node_icon_has_an_svg_in_assets():
    from pathlib import Path

    icons = Path(__file__).resolve().parents[3] / "assets" / "icons"
    missing = sorted({s.icon for s in catalogue().values() if not (icons / f"{s.icon}.svg").exists()})
    assert missing == []
