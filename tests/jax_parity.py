"""JAX's side of the parity tests (tests/test_parity.py), run in JAX's own environment: the tests'
own interpreter, the workload environment, has no JAX (dlscale/environment/recipe.py).

    python tests/jax_parity.py IN.npz OUT.json

IN.npz: `network`, `classes`, and optionally the reference network's layers (`kinds`, `names`,
`layer{i}_{j}`: PyTorch's weights.layers) and an input `x` (NHWC). OUT.json: the JAX network's
weight layers (kind and parameter counts), its trainable and batch-norm totals and, with layers,
the logits for `x` with those weights loaded, or the error the load raised; and the digest of the
synthetic batches this Python makes (`batches`: JAX's numpy is not the workload environment's).
"""

import hashlib
import json
import sys

import numpy as np

from dlscale.workloads import frameworks
from dlscale.workloads.batches import SyntheticData
from dlscale.workloads.registry import build_model


def source(given):
    """The reference layers as weights.load takes them: [(kind, name, [arrays])]."""
    kinds, names = given["kinds"].tolist(), given["names"].tolist()
    arrays = [sorted(k for k in given.files if k.startswith(f"layer{i}_")) for i in range(len(kinds))]
    return [
        (k, n, [given[a] for a in sorted(keys, key=lambda a: int(a.rsplit("_", 1)[1]))])
        for k, n, keys in zip(kinds, names, arrays)
    ]


def batches_digest(layout):
    """sha256 of ranks 0 and 1's synthetic batches (seed 7, 4 images of 64 px, 10 classes) in `layout`."""
    digest = hashlib.sha256()
    for rank in (0, 1):
        for x, y in SyntheticData(7, rank, 4, 64, 10, layout=layout).batches:
            digest.update(x.tobytes() + y.tobytes())
    return digest.hexdigest()


def main(in_path, out_path):
    import jax  # here, not above: tests/test_parity.py imports batches_digest in a Python without JAX

    weights = frameworks.module("jax", "weights")
    given = np.load(in_path)
    model = build_model("jax", str(given["network"]), int(given["classes"]), 64)
    variables = model.init(jax.random.PRNGKey(0), np.zeros((1, 64, 64, 3), np.float32), train=False)

    def sizes(layer):
        return [int(a.size) for c in ("params", "batch_stats") for a in variables.get(c, {}).get(layer, {}).values()]

    out = {
        "layers": [[kind, sizes(layer)] for layer, kind in model.weight_layers(variables)],
        "trainable": int(sum(a.size for a in jax.tree.leaves(variables["params"]))),
        "bn_stats": int(sum(a.size for a in jax.tree.leaves(variables.get("batch_stats", {})))),
        "batches": batches_digest("NHWC"),
    }
    if "kinds" in given.files:
        try:
            loaded = weights.load(model, variables, source(given))
        except ValueError as e:
            out["error"] = str(e)
        else:
            apply = jax.jit(lambda v, x: model.apply(v, x, train=False))
            out["logits"] = np.asarray(apply(loaded, given["x"])).tolist()
    with open(out_path, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main(*sys.argv[1:])
