"""The four frameworks' definitions are the same networks: equal parameters layer by layer, and
equal logits for equal weights and input (inference mode), within float32 tolerance."""

import jax
import mxnet as mx
import numpy as np
import pytest
import torch

from dlscale.workloads import frameworks
from dlscale.workloads.batches import SyntheticData
from dlscale.workloads.registry import build_model

reference = frameworks.module(frameworks.REFERENCE, "weights")
tf_weights = frameworks.module("tensorflow", "weights")
mx_weights = frameworks.module("mxnet", "weights")
jax_weights = frameworks.module("jax", "weights")

NETWORKS = ["alexnet", "googlenet", "resnet50", "tinynet"]
# float32 through up to 50 layers in three libraries: relative to the largest logit.
LOGIT_RTOL = 1e-4


def torch_model(name, seed=0):
    torch.manual_seed(seed)
    model = build_model("torch", name, 1000)
    with torch.no_grad():  # non-trivial batch-norm state, so that it is compared too
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def counts(shapes):
    return [int(np.prod(s)) for s in shapes]


@pytest.mark.parametrize("name", NETWORKS)
def test_parameters_equal_layer_by_layer(name):
    source = reference.layers(build_model("torch", name, 1000))
    torch_counts = [counts(a.shape for a in arrays) for _, _, arrays in source]

    tf_model = build_model("tensorflow", name, 1000, 64)
    tf_counts = [counts(w.shape for w in layer.weights) for layer in tf_model.weight_layers]
    assert tf_counts == torch_counts

    net = build_model("mxnet", name, 1000, 64)
    net.initialize()
    mx_counts = [int(np.prod(p.shape)) for p in net.collect_params().values()]
    assert mx_counts == [c for layer in torch_counts for c in layer]

    # trainable parameters and batch-norm running statistics, separately
    bn_stats = sum(c for (kind, _, _), layer in zip(source, torch_counts) if kind == "bn" for c in layer[2:])
    trainable = sum(map(sum, torch_counts)) - bn_stats
    assert sum(int(np.prod(v.shape)) for v in tf_model.trainable_weights) == trainable
    assert sum(int(np.prod(v.shape)) for v in tf_model.non_trainable_weights) == bn_stats
    mx_params = net.collect_params().values()
    assert sum(int(np.prod(p.shape)) for p in mx_params if p.grad_req != "null") == trainable
    assert sum(int(np.prod(p.shape)) for p in mx_params if p.grad_req == "null") == bn_stats

    jax_model, variables = jax_network(name)
    jax_counts = [
        counts(a.shape for c in ("params", "batch_stats") for a in variables.get(c, {}).get(layer, {}).values())
        for layer, _ in jax_model.weight_layers(variables)
    ]
    assert sorted(map(sorted, jax_counts)) == sorted(map(sorted, torch_counts))
    assert [kind for _, kind in jax_model.weight_layers(variables)] == [kind for kind, _, _ in source]
    assert sum(a.size for a in jax.tree.leaves(variables["params"])) == trainable
    assert sum(a.size for a in jax.tree.leaves(variables.get("batch_stats", {}))) == bn_stats


def jax_network(name):
    model = build_model("jax", name, 1000, 64)
    return model, model.init(jax.random.PRNGKey(0), np.zeros((1, 64, 64, 3), np.float32), train=False)


@pytest.mark.parametrize("name", NETWORKS)
def test_same_weights_same_logits(name):
    model = torch_model(name)
    x = np.random.default_rng(1).standard_normal((2, 3, 64, 64), dtype=np.float32)
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
    source = reference.layers(model)

    tf_model = build_model("tensorflow", name, 1000, 64)
    tf_weights.load(tf_model, source)
    tf_logits = tf_model(x.transpose(0, 2, 3, 1), training=False).numpy()

    net = build_model("mxnet", name, 1000, 64)
    net.initialize()
    mx_weights.load(net, source)
    mx_logits = net(mx.nd.array(x)).asnumpy()

    jax_model, variables = jax_network(name)
    loaded = jax_weights.load(jax_model, variables, source)
    jax_logits = np.asarray(jax.jit(lambda v, x: jax_model.apply(v, x, train=False))(loaded, x.transpose(0, 2, 3, 1)))

    scale = np.abs(ref).max()
    assert np.abs(tf_logits - ref).max() <= LOGIT_RTOL * scale
    assert np.abs(mx_logits - ref).max() <= LOGIT_RTOL * scale
    assert np.abs(jax_logits - ref).max() <= LOGIT_RTOL * scale
    # and the comparison can fail: other weights give other logits
    other = torch_model(name, seed=1)
    with torch.no_grad():
        assert np.abs(other(torch.from_numpy(x)).numpy() - ref).max() > LOGIT_RTOL * scale


def test_transfer_refuses_a_mismatched_network():
    source = reference.layers(build_model("torch", "tinynet", 1000))
    with pytest.raises(ValueError, match="TensorFlow model has 8 weight layers, PyTorch 3"):
        tf_weights.load(build_model("tensorflow", "alexnet", 1000, 64), source)
    alexnet, variables = jax_network("alexnet")
    with pytest.raises(ValueError, match="JAX model has 8 weight layers, PyTorch 3"):
        jax_weights.load(alexnet, variables, source)
    wider = reference.layers(build_model("torch", "tinynet", 10))
    tinynet, variables = jax_network("tinynet")
    with pytest.raises(ValueError, match=r"layer 6: shapes .* do not fit 002_dense"):
        jax_weights.load(tinynet, variables, wider)


def test_every_framework_sees_the_same_data():
    nchw = SyntheticData(7, 1, 4, 64, 10)
    nhwc = SyntheticData(7, 1, 4, 64, 10, layout="NHWC")
    other_rank = SyntheticData(7, 0, 4, 64, 10)
    for it in range(6):
        np.testing.assert_array_equal(nchw(it)[0].transpose(0, 2, 3, 1), nhwc(it)[0])
        np.testing.assert_array_equal(nchw(it)[1], nhwc(it)[1])
        assert not np.array_equal(nchw(it)[0], other_rank(it)[0])
    assert not np.array_equal(nchw(0)[0], nchw(1)[0])
    np.testing.assert_array_equal(nchw(0)[0], nchw(4)[0])  # a pool of 4 batches, used in turn
