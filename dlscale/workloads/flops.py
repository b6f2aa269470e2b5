"""Floating-point work per image of each network, counted from its definition.

Convention (stated with every number it produces):
- one multiply-add is 2 FLOPs;
- only convolutions and fully connected layers are counted (their multiply-adds: output elements x
  input channels per group x kernel area, and output features x input features); batch norm,
  activations, pooling, additions and the loss are left out (well under 1% of these networks' work);
- a training step costs 3x the forward pass: backward computes the gradients of the inputs and of
  the weights, each about as costly as the forward.
The networks are the same in every framework (tests/test_parity.py), so they are counted once, on
the definition of one framework the study runs (`counter`: the reference, PyTorch, where the study
runs it; each package's flops.py lists its layers, every framework's count is tested equal), at the
study's input size. At 224x224 the forward multiply-adds are torchvision's published figures
(AlexNet 0.714 G, GoogLeNet 1.498 G, ResNet-50 4.089 G; tested).
"""

import json
import sys
from functools import cache

from dlscale.workloads import frameworks

CONVENTION = "2 FLOPs per multiply-add; conv and linear layers only; training = 3 x forward"


COLUMNS = ["model", "image_size", "classes", "forward_macs", "train_flops"]


def counter(study):
    """The framework whose definitions count the networks of a study of the frameworks `study`."""
    return frameworks.first_with("flops", study) or frameworks.REFERENCE


def table(models, image_size, classes, framework=frameworks.REFERENCE):
    """flops.csv: one row per network of a study at its input size and classes (`per_image`)."""
    return [
        {"model": m, "image_size": image_size, "classes": classes, **per_image(m, image_size, classes, framework)}
        for m in models
    ]


def forward_macs(layers):
    """Multiply-adds of one image's forward pass over its convolution and fully connected `layers`,
    each (weight elements, output elements, output channels): every output element of a layer costs
    its weights per output channel (a fully connected layer's one image has one output per channel)."""
    return sum(weights * (outputs // channels) for weights, outputs, channels in layers)


@cache
def per_image(model, image_size, classes=1000, framework=frameworks.REFERENCE):
    """{"forward_macs", "train_flops"} of one image through `model` at image_size x image_size,
    counted on `framework`'s definition."""
    forward = forward_macs(frameworks.module(framework, "flops").layers(model, image_size, classes))
    return {"forward_macs": forward, "train_flops": 3 * 2 * forward}


def main(argv=None):
    """`python -m dlscale.workloads.flops FRAMEWORK MODELS IMAGE_SIZE CLASSES` (MODELS comma-separated):
    `table` as JSON, in the Python that has FRAMEWORK (the pipeline's flops step runs it there)."""
    argv = sys.argv[1:] if argv is None else argv
    print(json.dumps(table(argv[1].split(","), int(argv[2]), int(argv[3]), argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
