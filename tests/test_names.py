"""Runtime names -> graph name, scope, op type and kind (docs/figures.md, "Runtime names")."""

import numpy as np
import pytest

from tb_memory_plugin import figures, names
from tb_memory_plugin.figures import ACTIVATIONS, GRADIENTS, OPTIMIZER, OTHER, PARAMETERS
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


def test_a_recomputed_layout_transpose_is_charged_to_its_nodes_scope():
    """Grappler's memory optimizer prefixes the whole name of a node it recomputes, a layout transpose's
    too: the transpose is its node's, in that node's scope, not in a `Recomputed` scope."""
    info = names.classify("Recomputed/block0/conv/Conv2D-0-TransposeNHWCToNCHW-LayoutOptimizer")
    assert info.kind == names.LAYOUT_TRANSPOSE and info.graph_name == "block0/conv/Conv2D"
    assert names.scope_of(info.path) == "block0/conv"
    assert names.classify("RecomputeTrigger/block0/conv/Relu").graph_name == "block0/conv/Relu"
    assert names.classify("Recomputed/").graph_name == "Recomputed/"  # nothing after the prefix: kept


def test_constant_foldings_control_identity_is_its_switchs():
    """Constant folding puts an Identity on a Switch's output for a control dependency, named
    `ConstantFoldingCtrl/<switch>_<port>` (trial AG: a RaggedTensor's checks under a tf.cond made a
    top-level `ConstantFoldingCtrl` scope): it is in its switch's scope."""
    info = names.classify("ConstantFoldingCtrl/ragged/RaggedFromRowLengths/assert_equal_1/Assert/AssertGuard/Switch_1")
    assert info.graph_name == "ragged/RaggedFromRowLengths/assert_equal_1/Assert/AssertGuard/Switch_1"
    assert names.scope_of(info.path) == "ragged/RaggedFromRowLengths/assert_equal_1/Assert/AssertGuard"


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
    for raw in ("_retval_loss_0_0", "_SOURCE", "_SINK", "_Recv_x", "_Send_y", "_send_cond/else/_1/cond/Cast_0",
                "_send_ConstantFolding/gradient_tape/seqconv/conv_a/convolution/ShapeN-matshapes-1_0", "_recv_x_0"):
        info = names.classify(raw)
        assert info.kind == names.PLUMBING, raw
        assert info.path == f"{names.PLUMBING_SCOPE}/{raw}", raw


@pytest.mark.parametrize("raw, path", [
    # A loop body's call (`body/_1`) is the runtime's, dropped as from the body's own ops.
    ("Func/encoder/rnn/while/body/_1/input/_291", "encoder/rnn/while/input/_291"),
    ("Func/StatefulPartitionedCall/output_control_node/_12", "StatefulPartitionedCall/output_control_node/_12"),
])
def test_an_inlined_calls_plumbing_goes_in_the_calls_scope(raw, path):
    info = names.classify(raw)
    assert (info.graph_name, info.path, info.kind) == (raw, path, names.PLUMBING)
    assert names.categorise(info.path, "Identity", info.kind) == names.categorise("x", "NoOp", names.PLUMBING)


@pytest.mark.parametrize("kernel, op", [
    ("_MklMatMul", "MatMul"), ("_MklNativeFusedMatMul", "_FusedMatMul"), ("_MklFusedConv2D", "_FusedConv2D"),
    ("_MklFusedBatchNormV3", "FusedBatchNormV3"), ("_MklNativeConv2DBackpropInput", "Conv2DBackpropInput"),
    ("_MklEinsum", "Einsum"), ("MatMul", "MatMul"), ("_Mkl", "_Mkl"), ("_MklToTf", "_MklToTf"), (None, None),
    # Fusions only oneDNN makes have no op of TensorFlow's: the kernel's name stays.
    ("_MklLayerNorm", "_MklLayerNorm"), ("_MklConv2DWithBias", "_MklConv2DWithBias"),
    ("_MklFusedBatchMatMulV2", "_MklFusedBatchMatMulV2"), ("_MklPadWithFusedConv2D", "_MklPadWithFusedConv2D"),
    ("_MklSwish", "_MklSwish"),
])
def test_graph_op_type_of_a_onednn_kernel(kernel, op):
    assert names.graph_op_type(kernel) == op


def test_a_scope_the_user_named_func_stays():
    assert names.classify("Func/dense/MatMul").path == "Func/dense/MatMul"


def test_plain_names_are_kept():
    info = names.classify("shared_model/unet_01/LeakyRelu")
    assert info == names.NameInfo("shared_model/unet_01/LeakyRelu", "shared_model/unet_01/LeakyRelu", names.OP, None)


@pytest.mark.parametrize("graph_name, layer", [
    ("gradients/shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput",
     "shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput"),
    ("gradients_1/shared_model/unet_01/BiasAdd_grad/BiasAddGrad", "shared_model/unet_01/BiasAdd_grad/BiasAddGrad"),
    ("Adam/update_shared_model/unet_01/weights/ResourceApplyAdam", "shared_model/unet_01/weights/ResourceApplyAdam"),
    ("training/Adam/update_dense/kernel/ResourceApplyAdam", "dense/kernel/ResourceApplyAdam"),
    ("adam/update_0_2/mul", "adam/update_0_2/mul"),  # Keras 3 numbers its updates: no variable's name
    ("training/Adam/Adam/update_fc/kernel/ResourceApplyAdam", "fc/kernel/ResourceApplyAdam"),  # tf_keras
    ("model/dense/dense/update_x/y", "model/dense/dense/update_x/y"),  # no optimizer's scope first
    ("training/adam/update_1/mul", "training/adam/update_1/mul"),
    ("gradients/AddN", "gradients/AddN"),  # nothing after the prefix: stays
    # The gradients' own sums, sparse ones with helpers below them: no layer's, they stay.
    ("gradients/AddN_9/strided_slice", "gradients/AddN_9/strided_slice"),
    ("gradients_1/AddN/inputs_1", "gradients_1/AddN/inputs_1"),
    ("gradients/AddNorm/dense/MatMul_grad/MatMul", "AddNorm/dense/MatMul_grad/MatMul"),  # a scope of the user's
    # tf.recompute_grad: its gradient taken inside the tape's; both fold away.
    ("gradient_tape/gradients/model/ckpt_block/IdentityN_grad/Conv2DBackpropInput",
     "model/ckpt_block/IdentityN_grad/Conv2DBackpropInput"),
    ("gradients/gradients_1/x", "gradients_1/x"),  # nothing after the inner prefix: it stays
    # A gradients scope the user named (tf.gradients(..., name="my_grads")), where an op's gradient follows.
    ("my_grads/body/dense/MatMul_grad/MatMul", "body/dense/MatMul_grad/MatMul"),
    ("my_grads/Fill", "my_grads/Fill"),
    ("my_grads/body/Fill", "my_grads/body/Fill"),  # no op's gradient below it: a scope of the user's
    ("Grads_1/dense/MatMul_grad/MatMul", "dense/MatMul_grad/MatMul"),
    # Scopes that merely hold the word are no gradients scope: a gradient penalty's own ops stay in it...
    ("gradient_penalty/norm/Sqrt", "gradient_penalty/norm/Sqrt"),
    ("upgrade_net/dense/MatMul_grad/MatMul", "upgrade_net/dense/MatMul_grad/MatMul"),
    # ... and a gradients scope below the first component (tf.gradients or `minimize` under a name
    # scope) folds as a first one does, where an op's gradient follows: the penalty's gradient
    # through the critic, the training gradients of `train`, Keras' `training/<optimizer>/gradients`.
    ("gradient_penalty/gradients/critic/MatMul_grad/MatMul", "critic/MatMul_grad/MatMul"),
    ("train/gradients/model/dense_1/MatMul_grad/MatMul_1", "model/dense_1/MatMul_grad/MatMul_1"),
    ("training/Adam/gradients/gradients/dense/MatMul_grad/MatMul", "dense/MatMul_grad/MatMul"),
    ("train/gradients_2/model/conv/Conv2D_grad/Conv2DBackpropFilter", "model/conv/Conv2D_grad/Conv2DBackpropFilter"),
    ("train/gradients/AddN_3", "train/gradients/AddN_3"),  # no op's gradient below it: stays
    # Below it, what a first gradients scope folds: a loop's gradient.
    ("train/gradients/rnn/while_grad/rnn/while_grad/gradients/cell/MatMul_grad/MatMul", "rnn/while/cell/MatMul_grad/MatMul"),
    # A gradients scope below a first one stays: a second order's (`gradient_penalty/gradients`), or
    # in a loop's gradient the body's own, whose names start at the body's root.
    ("gradients/gradient_penalty/gradients/critic/MatMul_grad/MatMul_grad/MatMul",
     "gradient_penalty/gradients/critic/MatMul_grad/MatMul_grad/MatMul"),
    ("gradients/encoder/rnn/while_grad/gradients/TensorArrayV2Read/TensorListGetItem_grad/x",
     "encoder/rnn/while_grad/gradients/TensorArrayV2Read/TensorListGetItem_grad/x"),
    ("train/gradients/model/Fill", "train/gradients/model/Fill"),
    ("model/gradients/Conv2D_grad", "model/gradients/Conv2D_grad"),  # nothing below the op's gradient
    ("Mean_grad/Tile/x", "Mean_grad/Tile/x"),  # a root op's own gradient scope
    ("Adam/learning_rate", "Adam/learning_rate"),
    ("shared_model/unet_01/BiasAdd", "shared_model/unet_01/BiasAdd"),
    # A LossScaleOptimizer applies its update inside a `cond`: the optimizer's, as without one; a
    # branch of the user's, or an op at the branch's root, stays in it.
    ("cond/adam/Sub_10", "adam/Sub_10"),
    ("cond_1/adam/update_mlp/fc1/kernel/x", "mlp/fc1/kernel/x"),
    ("cond/dense/MatMul", "cond/dense/MatMul"),
    ("cond/adam", "cond/adam"),
    ("gradients/cond/mul_grad/Mul", "cond/mul_grad/Mul"),
    ("conditioner/adam/x", "conditioner/adam/x"),
    # Another replica's ops (MirroredStrategy) are their layers', as replica 0's: forward, gradients (as a
    # profile's names are cleaned, and as a graph names them), updates (trial AH: `replica_1` had held 40% of
    # a step's rise apart from the layers, where the what-if read them in).
    ("replica_1/cnn/conv1/Conv2D", "cnn/conv1/Conv2D"),
    ("gradient_tape/replica_1/cnn/gap/Tile", "cnn/gap/Tile"),
    ("replica_1/gradients/cnn/conv1/Conv2D_grad/Conv2DBackpropInput", "cnn/conv1/Conv2D_grad/Conv2DBackpropInput"),
    ("replica_1/Add_1", "Add_1"),
    ("replica_1", "replica_1"),
    ("replica_cnn/conv/Conv2D", "replica_cnn/conv/Conv2D"),
    # A tape opened inside a loop or a function (gradient accumulation): its gradients fold beside the body's
    # forward ops (trial AH: `while/gradient_tape/enc2` had held 69 MiB apart from `while/enc2`).
    ("while/gradient_tape/enc2/MatMul/MatMul_1", "while/enc2/MatMul/MatMul_1"),
    ("train_step/gradient_tape_1/dense/MatMul", "train_step/dense/MatMul"),
    ("while/gradient_tape", "while/gradient_tape"),  # nothing below it: kept
    ("gradient_tape/dense/MatMul", "dense/MatMul"),
])
def test_layer_path_folds_gradients_and_updates(graph_name, layer):
    assert names.layer_path(graph_name) == layer


@pytest.mark.parametrize("path", ["adam_w/Mul_23", "rm_sprop/Sqrt", "loss_scale_optimizer/add"])
def test_keras_3_optimizer_scopes_are_the_optimizers(path):
    """Keras 3 scopes an optimizer's ops under its class name in snake case (AdamW -> adam_w)."""
    assert names.categorise(path, "Mul", names.OP) == OPTIMIZER


@pytest.mark.parametrize("path, category", [
    ("g_adam/Mul", OPTIMIZER), ("d_adam/ReadVariableOp", OPTIMIZER), ("disc_optimizer/Sqrt", OPTIMIZER),
    ("gen_sgd_1/Mul", OPTIMIZER),
    ("momentum_encoder/dense/MatMul", ACTIVATIONS),  # MoCo's momentum encoder is a model
    ("adamant_block/Mul", ACTIVATIONS), ("GAdam/Mul", ACTIVATIONS), ("dense/Mul", ACTIVATIONS),
    ("adam_lstm/lstm/MatMul", ACTIVATIONS), ("sgd_baseline/dense/MatMul", ACTIVATIONS),  # models named by training
])
def test_an_optimizer_named_by_the_user_is_the_optimizers(path, category):
    """Keras 3 scopes an optimizer's ops under the name it is given: a GAN's `g_adam` and `d_adam`
    (a trial's two named optimizers had been activations: no byte counted as optimizer)."""
    assert names.categorise(path, "Mul", names.OP) == category


@pytest.mark.parametrize("path, category", [
    ("replica_1/Momentum/update/mul", OPTIMIZER),
    ("replica_1/gradient_tape/model/dense/MatMul", GRADIENTS),
    ("replica_1/model/dense/MatMul", ACTIVATIONS),
    ("replica_1", ACTIVATIONS),  # an op named so, at the root
])
def test_a_distribution_strategys_other_replicas_are_categorised_as_the_first(path, category):
    """MirroredStrategy names replica N's ops as replica 0's under `replica_<N>/`."""
    assert names.categorise(path, "Mul", names.OP) == category


def test_a_moving_averages_shadow_is_optimizer_state_not_a_parameter():
    assert names.categorise("net/w/ExponentialMovingAverage", "VarHandleOp", names.OP) == OPTIMIZER
    assert names.categorise("net/w", "VarHandleOp", names.OP) == PARAMETERS


@pytest.mark.parametrize("op", ["QueueDequeueManyV2", "QueueDequeueV2", "IteratorGetNextSync"])
def test_a_queues_batch_is_an_input(op):
    assert names.categorise("input/batch", op, names.OP) == figures.INPUTS


@pytest.mark.parametrize("path", ["Adam_1/update_w/ApplyAdam", "adam_1/Mul_19", "training_1/Adam/x", "Adam/m"])
def test_a_numbered_optimizer_scope_is_the_optimizers(path):
    """TensorFlow and Keras number a second optimizer (`Adam_1`, `adam_1` for a model built again)."""
    assert names.categorise(path, "Mul", names.OP) == OPTIMIZER
    assert names.optimizer_scope(path.partition("/")[0])
    assert not names.optimizer_scope("dense_1") and not names.optimizer_scope("Adam_x")


@pytest.mark.parametrize("path, category", [
    # Gradients taken under the optimizer's scope are gradients (tf_keras, `minimize` under a scope).
    ("training/Adam/gradients/gradients/dense/MatMul_grad/MatMul", GRADIENTS),
    ("optimizer/gradients/decoder/rnn/while_grad/x_grad/y", GRADIENTS),
    ("replica_1/training/Adam/gradients/dense/MatMul_grad/MatMul", GRADIENTS),
    ("training/Adam/gradients/AddN", OPTIMIZER),  # no op's gradient below: the optimizer's own
    ("training/Adam/Adam/update_fc/kernel/ResourceApplyAdam", OPTIMIZER),
])
def test_gradients_under_an_optimizer_scope_are_gradients(path, category):
    assert names.categorise(path, "MatMul", names.OP) == category
    assert names.categorise_all([path, "x"], np.zeros(2, np.int64), ["MatMul", "MatMul"]).tolist()[0] == category


@pytest.mark.parametrize("path, category", [
    ("cond/adam/Sub_10", OPTIMIZER),  # a LossScaleOptimizer applies its update inside a `cond`
    ("cond_1/Adam/mul", OPTIMIZER),
    ("cond/gradients/dense/MatMul_grad/MatMul", GRADIENTS),
    ("cond/dense/MatMul", ACTIVATIONS),
    ("second/adam/Sub_10", ACTIVATIONS),  # only a control-flow scope is looked through
    ("while/RMSprop/mul_8", OPTIMIZER),  # Keras 2's steps_per_execution loop, its optimizer's class name
    ("RMSprop/mul_8", OPTIMIZER),
    ("while_1/mlp/dense_1/MatMul", ACTIVATIONS),
])
def test_categories_look_through_a_control_flow_scope(path, category):
    assert names.categorise(path, "Sub", names.OP) == category
    assert names.categorise_all([path, "x"], np.zeros(2, np.int64), ["Sub", "Sub"]).tolist()[0] == category


_LAYERS = {
    "gradients/shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput": "shared_model/unet_01",
    "shared_model/unet_01/Conv2D": "shared_model/unet_01",
    "Adam/update_shared_model/unet_01/weights/ResourceApplyAdam": "shared_model/unet_01/weights",
    # A while loop's gradient (control flow v2) goes to the loop's op, its body's call dropped:
    # the layer of the forward `rnn/while/body/_1/lstm/MatMul`.
    "gradients/rnn/while_grad/rnn/while_grad/body/_5/gradients/lstm/MatMul_grad/MatMul": "rnn/while/lstm",
    "rnn/while/body/_1/lstm/MatMul": "rnn/while/lstm",
    # Nested `_grad` scopes of no loop: cut before the first.
    "gradients/a_grad/b_grad/MatMul": "a_grad",
    # A second-order gradient (a gradient penalty's) repeats an op's `_grad` scope: no control flow.
    "gradients_1/gradients/MatMul_grad/MatMul_grad/MatMul": "MatMul_grad",
    # Nested control flow: a loop in a loop's body, a branch in one; the loop's plumbing.
    "gradients/enc/outer_grad/enc/outer_grad/body/_3/gradients/inner_grad/inner_grad/body/_9/gradients/"
    "MatMul_grad/MatMul": "enc/outer/inner",
    "gradients/enc/while_grad/enc/while_grad/body/_3/gradients/cond_grad/StatelessIf/then/_7/gradients/"
    "MatMul_grad/MatMul_1": "enc/while/cond",
    "gradients/rnn/while_grad/rnn/while_grad/merge/_5": "rnn/while/merge",
    # A switch_case's branch (`branch1/_1`) and its gradient (the gradient's Case op is named `gradient`).
    "router/indexed_case/branch1/_1/Tile": "router/indexed_case",
    "gradients/router/indexed_case_grad/gradient/branch1/_41/gradients/mul_grad/Mul_1": "router/indexed_case",
    "gradients/router/indexed_case_grad/gradient/branch0/_40/gradients/AddN": "router/indexed_case",
    "gradients/Mean_grad/Tile": "Mean_grad",  # a root op's gradient scope: its own layer, as in the tree
    # Gradients taken under a name scope; in a loop's body, from the body's root (its call dropped).
    "train/gradients/model/dense_1/MatMul_grad/MatMul_1": "model/dense_1",
    "acc/while/body/_1/micro/gradients/micro/cnn/conv/Conv2D_grad/Conv2DBackpropInput": "acc/while/micro/cnn/conv",
    "acc/while/body/_1/micro/cnn/conv/Conv2D": "acc/while/micro/cnn/conv",
    "acc/while/body/_1/gradients/cnn/conv/Conv2D_grad/Conv2DBackpropInput": "acc/while/cnn/conv",
    # A loop's gradient under a name scope: its call is in the gradient, not before the scope.
    "train/gradients/rnn/while_grad/rnn/while_grad/body/_52/gradients/cell/MatMul_grad/MatMul": "rnn/while/cell",
    "rnn/while/body/_1/cell/MatMul": "rnn/while/cell",
    "clip_grad/mul": "clip_grad",
    "Mean": "Mean",
}


def test_the_layer_of_a_node_is_one_rule_for_findings_and_the_whatif():
    """Findings ask one name's layer, the what-if every name's (NameTable.layer / .layers): alike."""
    raw = list(_LAYERS)
    table = names.NameTable.build(raw, {}, {}, None)
    distinct, code = table.layers
    assert [distinct[c] for c in code.tolist()] == [table.layer(i) for i in range(len(raw))] == list(_LAYERS.values())
    # A name that is not ASCII sends the whole table through the one-name rules: the same layers.
    table = names.NameTable.build([*raw, "ünï/x"], {}, {}, None)
    assert [table.layer(i) for i in range(len(raw))] == list(_LAYERS.values())
    # A source that knows a name's layer (a profile's Keras 3 layers) is taken at its word.
    keras = ["gradient_tape/cnn/c2/convolution/Conv2DBackpropInput", "cnn/c2/Relu"]
    table = names.NameTable.build(keras, {}, {}, None, source_layers={name: "cnn/c2" for name in keras})
    assert [table.layer(0), table.layer(1)] == ["cnn/c2", "cnn/c2"] and table.layers[0] == ["cnn/c2"]


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


# -- categories: variable ops hold the variable's buffer, an embedding lookup does not ----------

CATEGORY_CASES = [
    # tf.clip_by_global_norm's outputs are the clipped gradients; a user's `global_norm` scope is not.
    ("clip_by_global_norm/clip_by_global_norm/_0", "Identity", names.OP, GRADIENTS),
    ("clip_by_global_norm_1/mul_1", "Mul", names.OP, GRADIENTS),
    ("replica_1/clip_by_global_norm/mul", "Mul", names.OP, GRADIENTS),
    ("global_norm/L2Loss", "L2Loss", names.OP, ACTIVATIONS),
    ("model/clip_by_global_norm_layer/mul", "Mul", names.OP, ACTIVATIONS),
    # ResourceGather outputs the gathered rows, a new tensor sized by the batch: the pass decides.
    ("embedding/embedding_lookup", "ResourceGather", names.OP, ACTIVATIONS),
    ("gradients/embedding/embedding_lookup_grad/ResourceGather", "ResourceGather", names.OP, GRADIENTS),
    ("Adam/update_embedding/table/ResourceGather", "ResourceGather", names.OP, OPTIMIZER),
    ("embedding/embedding_lookup_nd", "ResourceGatherNd", names.OP, ACTIVATIONS),
    # Ops whose bytes are the variable's own buffer stay parameters.
    ("embedding/table", "VarHandleOp", names.OP, PARAMETERS),
    ("embedding/table", "VariableV2", names.OP, PARAMETERS),
    ("embedding/table_v1", "Variable", names.OP, PARAMETERS),
    ("embedding/embedding_lookup/ReadVariableOp", "ReadVariableOp", names.OP, PARAMETERS),
    ("embedding/reads", "_ReadVariablesOp", names.OP, PARAMETERS),
    ("embedding/table/Assign", "Assign", names.OP, PARAMETERS),
    ("embedding/table/Assign_1", "AssignVariableOp", names.OP, PARAMETERS),
    # An add into a resource variable whose buffer a read still shares gives it a new buffer, kept
    # after the op (a gradient accumulator's: a trial's 3.2 MiB had read as activations).
    ("while/AssignAddVariableOp_4", "AssignAddVariableOp", names.OP, PARAMETERS),
    ("acc/AssignSubVariableOp", "AssignSubVariableOp", names.OP, PARAMETERS),
    ("acc/AssignAdd", "AssignAdd", names.OP, PARAMETERS),
    ("adam/AssignAddVariableOp", "AssignAddVariableOp", names.OP, OPTIMIZER),  # the optimizer's iteration count
    ("embedding/table/Adam", "VarHandleOp", names.OP, OPTIMIZER),  # a slot
    # A new bool about the variable, as Shape is about a tensor.
    ("embedding/table/IsInitialized/VarIsInitializedOp", "VarIsInitializedOp", names.OP, OTHER),
    # A LossScaleOptimizer checks every gradient (bool masks shaped like them), at the root.
    ("IsFinite_4", "IsFinite", names.OP, GRADIENTS),
    ("cond/IsFinite", "IsFinite", names.OP, GRADIENTS),
    ("All_4", "All", names.OP, ACTIVATIONS),
]


@pytest.mark.parametrize("path, op_type, kind, category", CATEGORY_CASES)
def test_categorise_variable_ops_and_embedding_lookups(path, op_type, kind, category):
    assert names.categorise(path, op_type, kind) == category


def test_categorise_all_agrees_on_variable_ops_and_embedding_lookups():
    paths, op_types, kinds, expected = map(list, zip(*CATEGORY_CASES))
    kind_code = np.array([names.KINDS.index(kind) for kind in kinds], dtype=np.int64)
    assert names.categorise_all(paths, kind_code, op_types).tolist() == expected


def _build_embedding(batch, size, seed=0, vocab=5000, dim=64):
    """Ids -> tf.nn.embedding_lookup on a resource variable (a ResourceGather: a new tensor of
    batch x size x dim rows) -> a square, whose gradient keeps the rows alive into the backward
    pass -> mean -> dense -> loss; SGD, whose sparse update adds no dense copy of the table."""
    import models
    import tensorflow as tf

    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(seed)
        ids = tf1.placeholder(tf.int32, [batch, size], name="ids")
        y = tf1.placeholder(tf.float32, [batch, 1], name="y")
        with tf1.variable_scope("embedding"):
            table = tf1.get_variable("table", [vocab, dim], use_resource=True)
            rows = tf.nn.embedding_lookup(table, ids)
        with tf1.variable_scope("head"):
            pooled = tf.reduce_mean(tf.square(rows), axis=1)
            w = tf1.get_variable("weights", [dim, 1])
            loss = tf.reduce_mean(tf.square(tf.matmul(pooled, w) - y), name="l2")
        train_step = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)

    def feeds(step=0):
        rng = np.random.RandomState(seed * 1000 + step)
        return {ids: rng.randint(0, vocab, size=(batch, size)).astype(np.int32),
                y: rng.uniform(-1, 1, size=(batch, 1)).astype(np.float32)}

    return models._finish("embedding", g, loss, train_step, feeds)


def test_embedding_lookup_output_is_not_parameters_on_a_real_step(tf_models):
    from tensorboard.compat.proto import config_pb2
    from tracedata import records_peak

    from tb_memory_plugin import graph, store

    batch, size, dim = 32, 16, 64
    rm_bytes, gd_bytes = tf_models.traced_step(lambda b, s, seed: _build_embedding(b, s, seed, dim=dim),
                                               batch, size)
    lookups = [n for d in config_pb2.RunMetadata.FromString(rm_bytes).step_stats.dev_stats
               for n in d.node_stats if n.timeline_label.split(" = ")[-1].startswith("ResourceGather(")]
    assert lookups and all(n.node_name == "embedding/embedding_lookup" for n in lookups)
    step = store.analyse_bytes(rm_bytes, graph.RunGraph.from_bytes(gd_bytes))
    space = next(s for s in step.spaces if "embedding/embedding_lookup" in s.names.raw)
    execs = [i for i in range(space.trace.exec_count) if space.trace.name(i) == "embedding/embedding_lookup"]
    assert [space.op_type(i) for i in execs] == ["ResourceGather"]
    (lookup,) = execs
    # It outputs batch x size x dim float32: activations, not parameters. It holds them at the peak
    # where the schedule puts the peak before they are freed (the executor's schedule moves the
    # peak from run to run: all of them or none).
    rows = batch * size * dim * 4
    assert space.exec_columns[figures.OUTPUT][lookup] == rows
    assert figures.CATEGORIES[int(space.category[lookup])] == "activations"
    held = int(space.exec_columns[figures.AT_PEAK][lookup])
    # The records' own word (read from the protos, apart from the engine): the lookup's net up to
    # the peak of its allocator's records.
    records = [(r.alloc_micros, r.alloc_bytes, n.node_name)
               for d in config_pb2.RunMetadata.FromString(rm_bytes).step_stats.dev_stats
               if d.device == space.trace.device for n in d.node_stats for m in n.memory
               if m.allocator_name == space.trace.allocator for r in m.allocation_records]
    assert any(name == "embedding/embedding_lookup" for _, _, name in records)
    peak_time = records_peak(records)[1]
    assert held == sum(size for t, size, name in records if name == "embedding/embedding_lookup" and t <= peak_time)
    assert held in (0, rows)
    split = space.category_split([lookup])
    assert split[figures.ACTIVATIONS] == held and split[figures.PARAMETERS] == 0
    assert dict((name, at) for name, at, _ in space.by_category())["parameters"] == 0  # no variable allocates


def test_an_inlined_functions_ops_and_their_layout_transposes_share_the_calls_scope():
    """A tf.function called in a TF1 graph runs inlined under its call's node: the path drops the call
    (`fwd/StatefulPartitionedCall/Conv2D` is `fwd/Conv2D`), and a layout transpose grappler put before the op
    sits beside it there, not in a scope of the call's own (the review found it under
    `fwd/StatefulPartitionedCall`). The graph names keep the call: the run graph holds them so."""
    op = names.classify("fwd/StatefulPartitionedCall/Conv2D")
    assert (op.graph_name, op.path) == ("fwd/StatefulPartitionedCall/Conv2D", "fwd/Conv2D")
    transpose = names.classify("fwd/StatefulPartitionedCall/Conv2D-0-TransposeNHWCToNCHW-LayoutOptimizer")
    assert transpose.graph_name == op.graph_name and names.scope_of(transpose.path) == names.scope_of(op.path) == "fwd"
    # The call node's own name stays, and so does a nested call's inner scope.
    assert names.classify("fwd/StatefulPartitionedCall").path == "fwd/StatefulPartitionedCall"
    assert names.classify("a/PartitionedCall_3/inner/StatefulPartitionedCall/MatMul").path == "a/inner/MatMul"


@pytest.mark.parametrize("path, op_type, category", [
    ("adam/concat_1", "ConcatV2", GRADIENTS),  # every gradient packed for the all-reduce
    ("adam/split", "SplitV", GRADIENTS),  # the reduced gradients split back per variable
    ("replica_1/adam/concat", "ConcatV2", GRADIENTS),
    ("adam/CollectiveReduceV2", "CollectiveReduceV2", GRADIENTS),
    ("CollectiveAdapterImpl::TempChunk", "(unknown)", GRADIENTS),  # the collective's scratch
    ("adam/update_0/concat", "ConcatV2", OPTIMIZER),  # inside an update: the optimizer's own
    ("adam/Sqrt", "Sqrt", OPTIMIZER),
    ("model/concat", "ConcatV2", ACTIVATIONS),
])
def test_gradients_packed_for_an_all_reduce_are_gradients(path, op_type, category):
    """Under MirroredStrategy Keras 3's optimizer packs every gradient into one tensor at its scope's root
    (`adam/concat`, as long as the model's parameters), all-reduces it and splits it back: gradients, not
    optimizer state (trial AH: 29 of a step's 32.7 MiB had read as the optimizer's)."""
    assert names.categorise(path, op_type, names.OP) == category


@pytest.mark.parametrize("path", ["while/gradient_tape/enc/MatMul/MatMul_1", "replica_1/while/gradient_tape/enc/MatMul",
                                  "outer/gradient_tape_1/dense/MatMul"])
def test_a_tape_opened_inside_a_loop_computes_gradients(path):
    """Its scope below the first component is a tape's, whose ops are gradients, as the layer grouping folds them
    (review AJ: they had read as activations, the forward pass the what-if reads its batch from)."""
    assert names.categorise(path, "MatMul", names.OP) == GRADIENTS
