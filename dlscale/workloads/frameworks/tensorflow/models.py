"""The networks in TensorFlow (Keras 3, NHWC), layer for layer the PyTorch definitions, created in its order.
PyTorch pads symmetrically where "same" padding is asymmetric for strided layers, so every padded layer pads
explicitly (max pooling with -inf) and runs "valid"; batch norm takes PyTorch's epsilon and momentum."""

import keras
import tensorflow as tf
from keras import layers

from dlscale.workloads.frameworks import GOOGLENET_POOLS, GOOGLENET_STAGES
from dlscale.workloads.pooling import adaptive_bins, pool_pads
from dlscale.workloads.registry import register

TORCH_BN_MOMENTUM = 0.1
_TRACKED = []  # weight-bearing layers of the model being built, in PyTorch's definition order


def track(layer):
    _TRACKED.append(layer)
    return layer


def tf_model(name):
    """Register a builder; the model it returns carries `weight_layers` in PyTorch's order."""

    def decorate(fn):
        def build(classes, image_size):
            _TRACKED.clear()
            model = fn(classes, image_size)
            model.weight_layers = list(_TRACKED)
            return model

        return register("tensorflow", name)(build)

    return decorate


def dense(units):
    return track(layers.Dense(units))


class MaxPool(layers.Layer):
    """PyTorch's MaxPool2d(k, s, p, ceil_mode) on NHWC: pad with -inf, then a valid max pool."""

    def __init__(self, k, s, p=0, ceil=False, **kw):
        super().__init__(**kw)
        self.k, self.s, self.p, self.ceil = k, s, p, ceil

    def call(self, x):
        pads = [[0, 0], *(list(pool_pads(n, self.k, self.s, self.p, self.ceil)) for n in x.shape[1:3]), [0, 0]]
        if any(a or b for a, b in pads):
            x = tf.pad(x, pads, constant_values=float("-inf"))
        return tf.nn.max_pool2d(x, self.k, self.s, "VALID")


class AdaptiveAvgPool(layers.Layer):
    """PyTorch's AdaptiveAvgPool2d(n) on NHWC: bin i spans [floor(i*H/n), ceil((i+1)*H/n))."""

    def __init__(self, n, **kw):
        super().__init__(**kw)
        self.n = n

    def call(self, x):
        h, w = x.shape[1], x.shape[2]
        if h % self.n == 0 and w % self.n == 0:
            return tf.nn.avg_pool2d(x, (h // self.n, w // self.n), (h // self.n, w // self.n), "VALID")
        rows = [
            tf.stack(
                [tf.reduce_mean(x[:, r0:r1, c0:c1, :], axis=[1, 2]) for c0, c1 in adaptive_bins(w, self.n)], axis=1
            )
            for r0, r1 in adaptive_bins(h, self.n)
        ]
        return tf.stack(rows, axis=1)


class TorchFlatten(layers.Layer):
    """Flatten in PyTorch's (C, H, W) order, so a dense layer after it takes PyTorch's weights as is."""

    def call(self, x):
        return tf.reshape(tf.transpose(x, [0, 3, 1, 2]), [-1, x.shape[1] * x.shape[2] * x.shape[3]])


def conv(x, filters, k, s=1, p=0, bias=True):
    if p:
        x = layers.ZeroPadding2D(p)(x)
    return track(layers.Conv2D(filters, k, strides=s, padding="valid", use_bias=bias))(x)


def bn(x, eps):
    return track(layers.BatchNormalization(epsilon=eps, momentum=1 - TORCH_BN_MOMENTUM))(x)


def basic_conv(x, filters, k, s=1, p=0):
    return layers.ReLU()(bn(conv(x, filters, k, s, p, bias=False), 1e-3))


def inception(x, widths):
    """An inception module of `widths` (frameworks.GOOGLENET_STAGES says which)."""
    ch1, ch3red, ch3, ch5red, ch5, pool_proj = widths
    b1 = basic_conv(x, ch1, 1)
    b2 = basic_conv(basic_conv(x, ch3red, 1), ch3, 3, p=1)
    b3 = basic_conv(basic_conv(x, ch5red, 1), ch5, 3, p=1)  # 3x3, as torchvision
    b4 = basic_conv(MaxPool(3, 1, 1, ceil=True)(x), pool_proj, 1)
    return layers.Concatenate(axis=-1)([b1, b2, b3, b4])


@tf_model("googlenet")
def googlenet(classes, image_size):
    inp = keras.Input((image_size, image_size, 3))
    x = basic_conv(inp, 64, 7, 2, 3)
    x = MaxPool(3, 2, ceil=True)(x)
    x = basic_conv(x, 64, 1)
    x = basic_conv(x, 192, 3, p=1)
    for pool, stage in zip(GOOGLENET_POOLS, GOOGLENET_STAGES):
        x = MaxPool(pool, 2, ceil=True)(x)
        for widths in stage:
            x = inception(x, widths)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(0.2)(x)
    return keras.Model(inp, dense(classes)(x), name="googlenet")


@tf_model("alexnet")
def alexnet(classes, image_size):
    inp = keras.Input((image_size, image_size, 3))
    x = layers.ReLU()(conv(inp, 64, 11, 4, 2))
    x = MaxPool(3, 2)(x)
    x = layers.ReLU()(conv(x, 192, 5, p=2))
    x = MaxPool(3, 2)(x)
    x = layers.ReLU()(conv(x, 384, 3, p=1))
    x = layers.ReLU()(conv(x, 256, 3, p=1))
    x = layers.ReLU()(conv(x, 256, 3, p=1))
    x = MaxPool(3, 2)(x)
    x = TorchFlatten()(AdaptiveAvgPool(6)(x))
    x = layers.ReLU()(dense(4096)(layers.Dropout(0.5)(x)))
    x = layers.ReLU()(dense(4096)(layers.Dropout(0.5)(x)))
    return keras.Model(inp, dense(classes)(x), name="alexnet")


def bottleneck(x, planes, stride):
    cin, cout = x.shape[-1], planes * 4
    y = layers.ReLU()(bn(conv(x, planes, 1, bias=False), 1e-5))
    y = layers.ReLU()(bn(conv(y, planes, 3, stride, 1, bias=False), 1e-5))
    y = bn(conv(y, cout, 1, bias=False), 1e-5)
    if stride != 1 or cin != cout:
        x = bn(conv(x, cout, 1, stride, bias=False), 1e-5)
    return layers.ReLU()(layers.Add()([y, x]))


@tf_model("resnet50")
def resnet50(classes, image_size):
    inp = keras.Input((image_size, image_size, 3))
    x = layers.ReLU()(bn(conv(inp, 64, 7, 2, 3, bias=False), 1e-5))
    x = MaxPool(3, 2, 1)(x)
    for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            x = bottleneck(x, planes, stride if i == 0 else 1)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, dense(classes)(x), name="resnet50")


@tf_model("tinynet")
def tinynet(classes, image_size):
    inp = keras.Input((image_size, image_size, 3))
    x = layers.ReLU()(conv(inp, 8, 3, 2, 1))
    x = layers.ReLU()(conv(x, 16, 3, 2, 1))
    x = TorchFlatten()(AdaptiveAvgPool(4)(x))
    return keras.Model(inp, dense(classes)(x), name="tinynet")
