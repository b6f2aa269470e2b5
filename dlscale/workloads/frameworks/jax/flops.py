"""The convolution and fully connected layers of one image's pass through a Flax network, found by
intercepting their calls while its shapes are traced (what dlscale/workloads/flops.py counts)."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from dlscale.workloads.registry import build_model


def layers(model, image_size, classes):
    """[(weight elements, output elements, output channels)] of one image_size x image_size image."""
    net = build_model("jax", model, classes, image_size)
    found = []

    def intercept(call, args, kwargs, context):
        out = call(*args, **kwargs)
        module = context.module
        if context.method_name == "__call__" and isinstance(module, (nn.Conv, nn.Dense)):
            inputs = args[0].shape[-1] // getattr(module, "feature_group_count", 1)
            kernel = math.prod(getattr(module, "kernel_size", ()))
            found.append((module.features * inputs * kernel, math.prod(out.shape[1:]), module.features))
        return out

    with nn.intercept_methods(intercept):
        jax.eval_shape(lambda: net.init(jax.random.key(0), jnp.zeros((1, image_size, image_size, 3)), train=False))
    return found
