"""Floating-point work per image of each network by CONVENTION: batch norm, activations, pooling, additions and
the loss are under 1% of the work; backward computes inputs' and weights' gradients, each costing a forward."""

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
    """Multiply-adds of one image's forward pass over `layers` of (weights, outputs, output channels)."""
    return sum(weights * (outputs // channels) for weights, outputs, channels in layers)


@cache
def per_image(model, image_size, classes=1000, framework=frameworks.REFERENCE):
    """{"forward_macs", "train_flops"} of one image through `model`, on `framework`'s definition."""
    forward = forward_macs(frameworks.module(framework, "flops").layers(model, image_size, classes))
    return {"forward_macs": forward, "train_flops": 3 * 2 * forward}


def main(argv=None):
    """`python -m dlscale.workloads.flops FRAMEWORK MODELS IMAGE_SIZE CLASSES`: `table` as JSON."""
    argv = sys.argv[1:] if argv is None else argv
    print(json.dumps(table(argv[1].split(","), int(argv[2]), int(argv[3]), argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
