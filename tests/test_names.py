"""Runtime names -> graph name, scope, op type and kind (docs/figures.md, "Runtime names")."""

import pytest

from tb_memory_plugin import names
from tb_memory_plugin.trace import parse_device


def test_layout_transpose_is_charged_to_its_node_scope():
    raw = "shared_model/unet_01/BiasAdd-0-1-TransposeNCHWToNHWC-LayoutOptimizer"
    info = names.classify(raw)
    assert info.kind == names.LAYOUT_TRANSPOSE
    assert info.fixed_op_type == "Transpose (layout)"
    assert info.graph_name == "shared_model/unet_01/BiasAdd"
    assert names.scope_of(info.path) == "shared_model/unet_01"


def test_layout_transpose_other_direction_and_single_port():
    info = names.classify("gradients/shared_model/unet_02/Conv2D_grad/Conv2DBackpropInput-0-TransposeNHWCToNCHW-LayoutOptimizer")
    assert info.kind == names.LAYOUT_TRANSPOSE
    assert info.graph_name == "gradients/shared_model/unet_02/Conv2D_grad/Conv2DBackpropInput"
    assert names.scope_of(info.path) == "gradients/shared_model/unet_02/Conv2D_grad"


@pytest.mark.parametrize("raw, graph_name", [
    ("ConstantFolding/shared_model/unet_02/Conv2D", "shared_model/unet_02/Conv2D"),
    ("ConstantFolding/gradients/shared_model/unet_01/Conv2D_grad/ShapeN-matshapes-1",
     "gradients/shared_model/unet_01/Conv2D_grad/ShapeN"),
    ("ArithmeticOptimizer/AddOpsRewrite_loss/total", "loss/total"),
    ("shared_model/unet_02/Conv2D-folded-1", "shared_model/unet_02/Conv2D"),
])
def test_grappler_prefixes_and_suffixes_are_stripped(raw, graph_name):
    info = names.classify(raw)
    assert info.kind == names.OP
    assert info.graph_name == graph_name
    assert info.path == graph_name


def test_stream_suffix_is_cut():
    assert names.strip_stream_suffix("shared_model/unet_01/Conv2D:Conv2D") == "shared_model/unet_01/Conv2D"
    assert names.classify("shared_model/unet_01/Conv2D:Conv2D").path == "shared_model/unet_01/Conv2D"
    assert names.strip_stream_suffix("a/b") == "a/b"


def test_feeds_and_plumbing():
    feed = names.classify("_arg_frames_0_0")
    assert feed.kind == names.FEED
    assert feed.graph_name == "frames"
    assert feed.fixed_op_type == "_Arg"
    assert names.scope_of(feed.path) == names.FEEDS_SCOPE
    assert names.classify("_arg_target_flow_0_1").graph_name == "target_flow"
    for raw in ("_retval_loss_0_0", "_SOURCE", "_SINK", "_Recv_x", "_Send_y"):
        info = names.classify(raw)
        assert info.kind == names.PLUMBING, raw
        assert names.scope_of(info.path) == names.PLUMBING_SCOPE


def test_plain_names_are_kept():
    info = names.classify("shared_model/unet_01/LeakyRelu")
    assert info == names.NameInfo("shared_model/unet_01/LeakyRelu", "shared_model/unet_01/LeakyRelu", names.OP, None)


@pytest.mark.parametrize("graph_name, layer", [
    ("gradients/shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput",
     "shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput"),
    ("gradients_1/shared_model/unet_01/BiasAdd_grad/BiasAddGrad", "shared_model/unet_01/BiasAdd_grad/BiasAddGrad"),
    ("Adam/update_shared_model/unet_01/weights/ResourceApplyAdam", "shared_model/unet_01/weights/ResourceApplyAdam"),
    ("training/Adam/update_dense/kernel/ResourceApplyAdam", "dense/kernel/ResourceApplyAdam"),
    ("gradients/AddN", "gradients/AddN"),  # nothing after the prefix: stays
    ("Adam/learning_rate", "Adam/learning_rate"),
    ("shared_model/unet_01/BiasAdd", "shared_model/unet_01/BiasAdd"),
])
def test_layer_path_folds_gradients_and_updates(graph_name, layer):
    assert names.layer_path(graph_name) == layer


@pytest.mark.parametrize("label, op", [
    ("shared_model/unet_01/Relu = _MklNativeFusedConv2D(a, b)", "_MklNativeFusedConv2D"),
    ("[cpu 0.1MB 0.1MB] x = Conv2D(a)", "Conv2D"),
    ("x = Const()", "Const"),
    ("no label here", None),
    ("", None),
])
def test_op_type_from_label(label, op):
    assert names.op_type_from_label(label) == op


@pytest.mark.parametrize("device, parsed", [
    ("/job:localhost/replica:0/task:0/device:GPU:0", ("GPU", 0)),
    ("/job:localhost/replica:0/task:0/device:CPU:0", ("CPU", 0)),
    ("/job:localhost/replica:0/task:0/gpu:1", ("GPU", 1)),
    ("/job:localhost/replica:0/task:0/device:GPU:0/stream:all", None),
    ("/job:localhost/replica:0/task:0/device:GPU:0/stream:14", None),
    ("/device:GPU:0/stream:all", None),
    ("/gpu:0/memcpy", None),
    ("/gpu:0/stream:14", None),
])
def test_parse_device_keeps_real_devices_only(device, parsed):
    assert parse_device(device) == parsed
