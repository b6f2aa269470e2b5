"""bench/bindings_model.py's table on known numbers: which path's per-tensor cost each way reads, and
the per-configuration and whole-study medians."""

import pandas as pd

from bench import bindings_model as bm

FITS = pd.DataFrame(
    {"path": ["horovod", "horovod:mxnet", "jax", "mpi"], "per_tensor_s": [8e-6, 30e-6, 200e-6, float("nan")]}
)


def test_each_way_reads_the_per_tensor_cost_of_the_path_the_model_takes():
    assert bm.per_tensor_us(FITS, ("mxnet", "alexnet", 2), "horovod", "instrument") == 8.0
    assert bm.per_tensor_us(FITS, ("mxnet", "alexnet", 2), "horovod", "own") == 30.0
    assert bm.per_tensor_us(FITS, ("tensorflow", "alexnet", 2), "horovod", "own") == 8.0  # not swept: the instrument's
    assert bm.per_tensor_us(FITS, ("jax", "alexnet", 2), "native", "own") == 200.0
    assert bm.per_tensor_us(FITS, ("jax", "alexnet", 2), "native", "instrument") == 200.0


def test_rows_give_each_configurations_medians_and_the_studys_median_absolute_error():
    def table(errors):
        return pd.DataFrame(
            {
                "framework": ["mxnet"] * 3 + ["torch"] * 3,
                "model": ["alexnet"] * 6,
                "ranks": [2] * 6,
                "allreduce_library": ["horovod"] * 6,
                "error_iteration": errors,
                "error_comm_total": [e * 2 for e in errors],
            }
        )

    tables = {"instrument": table([0.1, -0.2, 0.3, 0.0, 0.05, -0.05]), "own": table([0.2, 0.2, 0.4, 0.0, 0.05, -0.05])}
    rows = bm.rows_of(1, tables, FITS, {"note": "n"})
    assert [(r["framework"], r["error_iteration_instrument"], r["error_iteration_own"]) for r in rows[:2]] == [
        ("mxnet", 0.1, 0.2),
        ("torch", 0.0, 0.0),
    ]
    assert rows[0]["error_comm_total_own"] == 0.4 and rows[0]["per_tensor_us_own"] == 30.0
    assert rows[2]["model"] == "median |error|" and rows[2]["runs"] == 6
    assert rows[2]["error_iteration_instrument"] == 0.075 and rows[2]["error_iteration_own"] == 0.125
