"""The networks in JAX (Flax linen, NHWC), layer for layer the PyTorch definitions: padding and pooling
as PyTorch's, its batch-norm epsilon and momentum, its (C, H, W) flatten. Weight-bearing layers are
named in PyTorch's definition order ("000_conv", "001_bn", ...): sorted, they are the reference's."""

import flax.linen as nn
import jax.numpy as jnp

from dlscale.workloads.frameworks import GOOGLENET_POOLS, GOOGLENET_STAGES
from dlscale.workloads.pooling import adaptive_bins, pool_pads
from dlscale.workloads.registry import register

TORCH_BN_MOMENTUM = 0.1


def max_pool(x, k, s, p=0, ceil=False):
    """PyTorch's MaxPool2d(k, s, p, ceil_mode) on NHWC (Flax pads a max pool with -inf)."""
    return nn.max_pool(x, (k, k), (s, s), padding=[pool_pads(n, k, s, p, ceil) for n in x.shape[1:3]])


def adaptive_avg_pool(x, n):
    """PyTorch's AdaptiveAvgPool2d(n) on NHWC: bin i spans [floor(i*H/n), ceil((i+1)*H/n))."""
    h, w = x.shape[1], x.shape[2]
    if h % n == 0 and w % n == 0:
        return nn.avg_pool(x, (h // n, w // n), (h // n, w // n))
    rows = [
        jnp.stack([x[:, r0:r1, c0:c1, :].mean(axis=(1, 2)) for c0, c1 in adaptive_bins(w, n)], axis=1)
        for r0, r1 in adaptive_bins(h, n)
    ]
    return jnp.stack(rows, axis=1)


def torch_flatten(x):
    """Flatten in PyTorch's (C, H, W) order, so a dense layer after it takes PyTorch's weights as is."""
    return x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)


class Layers:
    """Creates the network's layers inside its compact call, named in creation order."""

    def __init__(self, train):
        self.train, self.count = train, 0

    def _name(self, kind):
        self.count += 1
        return f"{self.count - 1:03d}_{kind}"

    def conv(self, x, features, k, s=1, p=0, bias=True):
        conv = nn.Conv(features, (k, k), (s, s), padding=[(p, p), (p, p)], use_bias=bias, name=self._name("conv"))
        return conv(x)

    def bn(self, x, eps):
        norm = nn.BatchNorm(
            use_running_average=not self.train, momentum=1 - TORCH_BN_MOMENTUM, epsilon=eps, name=self._name("bn")
        )
        return norm(x)

    def dense(self, x, units):
        return nn.Dense(units, name=self._name("dense"))(x)

    def dropout(self, x, rate):
        return nn.Dropout(rate, deterministic=not self.train)(x)

    def basic_conv(self, x, features, k, s=1, p=0):
        return nn.relu(self.bn(self.conv(x, features, k, s, p, bias=False), 1e-3))


def _inception(L, x, widths):
    """An inception module of `widths` (frameworks.GOOGLENET_STAGES says which)."""
    ch1, ch3red, ch3, ch5red, ch5, pool_proj = widths
    b1 = L.basic_conv(x, ch1, 1)
    b2 = L.basic_conv(L.basic_conv(x, ch3red, 1), ch3, 3, p=1)
    b3 = L.basic_conv(L.basic_conv(x, ch5red, 1), ch5, 3, p=1)  # 3x3, as torchvision
    b4 = L.basic_conv(max_pool(x, 3, 1, 1, ceil=True), pool_proj, 1)
    return jnp.concatenate([b1, b2, b3, b4], axis=-1)


def _googlenet(L, x, classes):
    x = L.basic_conv(x, 64, 7, 2, 3)
    x = max_pool(x, 3, 2, ceil=True)
    x = L.basic_conv(x, 64, 1)
    x = L.basic_conv(x, 192, 3, p=1)
    for pool, stage in zip(GOOGLENET_POOLS, GOOGLENET_STAGES):
        x = max_pool(x, pool, 2, ceil=True)
        for widths in stage:
            x = _inception(L, x, widths)
    x = L.dropout(x.mean(axis=(1, 2)), 0.2)
    return L.dense(x, classes)


def _alexnet(L, x, classes):
    x = max_pool(nn.relu(L.conv(x, 64, 11, 4, 2)), 3, 2)
    x = max_pool(nn.relu(L.conv(x, 192, 5, p=2)), 3, 2)
    x = nn.relu(L.conv(x, 384, 3, p=1))
    x = nn.relu(L.conv(x, 256, 3, p=1))
    x = max_pool(nn.relu(L.conv(x, 256, 3, p=1)), 3, 2)
    x = torch_flatten(adaptive_avg_pool(x, 6))
    x = nn.relu(L.dense(L.dropout(x, 0.5), 4096))
    x = nn.relu(L.dense(L.dropout(x, 0.5), 4096))
    return L.dense(x, classes)


def _bottleneck(L, x, planes, stride):
    cin, cout = x.shape[-1], planes * 4
    y = nn.relu(L.bn(L.conv(x, planes, 1, bias=False), 1e-5))
    y = nn.relu(L.bn(L.conv(y, planes, 3, stride, 1, bias=False), 1e-5))
    y = L.bn(L.conv(y, cout, 1, bias=False), 1e-5)
    if stride != 1 or cin != cout:  # after the body, as in PyTorch's definition order
        x = L.bn(L.conv(x, cout, 1, stride, bias=False), 1e-5)
    return nn.relu(y + x)


def _resnet50(L, x, classes):
    x = nn.relu(L.bn(L.conv(x, 64, 7, 2, 3, bias=False), 1e-5))
    x = max_pool(x, 3, 2, 1)
    for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            x = _bottleneck(L, x, planes, stride if i == 0 else 1)
    return L.dense(x.mean(axis=(1, 2)), classes)


def _tinynet(L, x, classes):
    x = nn.relu(L.conv(x, 8, 3, 2, 1))
    x = nn.relu(L.conv(x, 16, 3, 2, 1))
    return L.dense(torch_flatten(adaptive_avg_pool(x, 4)), classes)


ARCHITECTURES = {"alexnet": _alexnet, "googlenet": _googlenet, "resnet50": _resnet50, "tinynet": _tinynet}


class Network(nn.Module):
    """One of the networks; `image_size` is carried so that a model knows the input it was built for."""

    arch: str
    classes: int
    image_size: int = 224

    @nn.compact
    def __call__(self, x, train=True):
        return ARCHITECTURES[self.arch](Layers(train), x, self.classes)

    def weight_layers(self, variables):
        """[(name, kind)] of the weight-bearing layers, in PyTorch's definition order."""
        return [(name, name.split("_", 1)[1]) for name in sorted(variables["params"])]


for _name in ARCHITECTURES:
    register("jax", _name)(lambda classes, image_size, _arch=_name: Network(_arch, classes, image_size or 224))
