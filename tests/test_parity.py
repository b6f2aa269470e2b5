"""The four frameworks' definitions are the same networks: equal parameters layer by layer, and
equal logits for equal weights and input (inference mode), within float32 tolerance. JAX's side runs
in JAX's own environment (tests/jax_parity.py), given the reference weights and input in a file."""

import json
import os
import re
import subprocess
from pathlib import Path

import mxnet as mx
import numpy as np
import pytest
import torch

from dlscale.core.paths import SOURCE
from dlscale.workloads import frameworks
from dlscale.workloads.batches import SyntheticData
from dlscale.workloads.registry import build_model
from tests.conftest import env_record
from tests.jax_parity import batches_digest

reference = frameworks.module(frameworks.REFERENCE, "weights")
tf_weights = frameworks.module("tensorflow", "weights")
mx_weights = frameworks.module("mxnet", "weights")

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


def jax_side(tmp_path, name, source=None, x=None, classes=1000):
    """JAX's network `name` (tests/jax_parity.py, in JAX's own environment): its weight layers and
    totals and, given reference layers `source` and input `x` (NHWC), its logits or the load's error."""
    given = {"network": name, "classes": classes}
    if source is not None:
        given.update(kinds=[k for k, _, _ in source], names=[n for _, n, _ in source], x=x)
        given.update({f"layer{i}_{j}": a for i, (_, _, arrays) in enumerate(source) for j, a in enumerate(arrays)})
    in_path, out_path = tmp_path / f"{name}-in.npz", tmp_path / f"{name}-out.json"
    np.savez(in_path, **given)
    script = Path(__file__).with_name("jax_parity.py")
    subprocess.run(
        [env_record("jax")["python"], str(script), str(in_path), str(out_path)],
        check=True,
        env={**os.environ, "PYTHONPATH": str(SOURCE)},
        timeout=600,
    )
    return json.loads(out_path.read_text())


@pytest.mark.parametrize("name", NETWORKS)
def test_every_framework_builds_the_same_network(tmp_path, name):
    """Equal parameters layer by layer (trainable and batch-norm statistics apart), then, with the reference's
    weights loaded, equal logits for the same input: each framework's network built once, JAX's in one process."""
    model = torch_model(name)
    source = reference.layers(model)
    torch_counts = [counts(a.shape for a in arrays) for _, _, arrays in source]
    x = np.random.default_rng(1).standard_normal((2, 3, 64, 64), dtype=np.float32)
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()

    tf_model = build_model("tensorflow", name, 1000, 64)
    assert [counts(w.shape for w in layer.weights) for layer in tf_model.weight_layers] == torch_counts
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

    jax = jax_side(tmp_path, name, source, x.transpose(0, 2, 3, 1))
    assert "error" not in jax, jax["error"]
    assert sorted(sorted(c) for _, c in jax["layers"]) == sorted(map(sorted, torch_counts))
    assert [kind for kind, _ in jax["layers"]] == [kind for kind, _, _ in source]
    assert (jax["trainable"], jax["bn_stats"]) == (trainable, bn_stats)

    tf_weights.load(tf_model, source)
    tf_logits = tf_model(x.transpose(0, 2, 3, 1), training=False).numpy()
    mx_weights.load(net, source)
    mx_logits = net(mx.nd.array(x)).asnumpy()
    scale = np.abs(ref).max()
    assert np.abs(tf_logits - ref).max() <= LOGIT_RTOL * scale
    assert np.abs(mx_logits - ref).max() <= LOGIT_RTOL * scale
    assert np.abs(np.asarray(jax["logits"]) - ref).max() <= LOGIT_RTOL * scale
    # and the comparison can fail: other weights give other logits
    other = torch_model(name, seed=1)
    with torch.no_grad():
        assert np.abs(other(torch.from_numpy(x)).numpy() - ref).max() > LOGIT_RTOL * scale


def test_transfer_refuses_a_mismatched_network(tmp_path):
    source = reference.layers(build_model("torch", "tinynet", 1000))
    with pytest.raises(ValueError, match="TensorFlow model has 8 weight layers, PyTorch 3"):
        tf_weights.load(build_model("tensorflow", "alexnet", 1000, 64), source)
    x = np.zeros((1, 64, 64, 3), np.float32)
    assert jax_side(tmp_path, "alexnet", source, x)["error"] == "JAX model has 8 weight layers, PyTorch 3"
    wider = reference.layers(build_model("torch", "tinynet", 10))
    assert re.search(r"layer 6: shapes .* do not fit 002_dense", jax_side(tmp_path, "tinynet", wider, x)["error"])


def test_jaxs_own_python_makes_the_same_synthetic_batches(tmp_path):
    """JAX runs in its own environment, with another numpy (2.x, the others' 1.26): its ranks'
    synthetic batches are still the very same numbers."""
    assert jax_side(tmp_path, "tinynet")["batches"] == batches_digest("NHWC")
    assert batches_digest("NHWC") != batches_digest("NCHW")  # the digest sees the data


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
