"""The convolution and fully connected layers of one image's forward pass through an MXNet Gluon
network, found by forward hooks (what dlscale/workloads/flops.py counts)."""

import mxnet as mx
from mxnet.gluon import nn

from dlscale.workloads.registry import build_model


def layers(model, image_size, classes):
    """[(weight elements, output elements, output channels)] of one image_size x image_size image."""
    net = build_model("mxnet", model, classes, image_size)
    net.initialize()
    found = []

    def hook(block, _inputs, out):
        found.append((block.weight.data().size, out.size, block.weight.shape[0]))

    net.apply(lambda block: block.register_forward_hook(hook) if isinstance(block, (nn.Conv2D, nn.Dense)) else None)
    with mx.autograd.predict_mode():
        net(mx.nd.zeros((1, 3, image_size, image_size))).wait_to_read()
    return found
