"""The convolution and fully connected layers of one image's forward pass through a TensorFlow
network (Keras layers, built for the input size; what dlscale/workloads/flops.py counts)."""

import math

from keras import layers as kl

from dlscale.workloads.registry import build_model


def layers(model, image_size, classes):
    """[(weight elements, output elements, output channels)] of one image_size x image_size image."""
    net = build_model("tensorflow", model, classes, image_size)
    return [
        (math.prod(layer.kernel.shape), math.prod(layer.output.shape[1:]), layer.kernel.shape[-1])
        for layer in net.weight_layers
        if isinstance(layer, (kl.Conv2D, kl.Dense))
    ]
