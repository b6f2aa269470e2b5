"""What each output file of a study is and each column of its tables means: docs/reference/outputs.md is
generated from here, tests/test_docs.py fails on a column without one. Which columns, in what order, is the code's."""

from dlscale.core import paths, vocabulary
from dlscale.core.vocabulary import BASELINE_KEYS, PHASE_COLUMNS, RUN_KEYS, seconds
from dlscale.environment.build import RECORD as ENVIRONMENT_RECORD

# The run keys: config keys, wildcards of the results tree and columns of every per-run table.
RUN = {
    "framework": "the framework (`torch`, `tensorflow`, `mxnet`, `jax`)",
    "model": "the network (`alexnet`, `googlenet`, `resnet50`, `tinynet`)",
    "allreduce_schedule": "gradient communication: `overlap` (allreduces during backward) or `sequential` (one grouped "
    "allreduce after backward)",
    "allreduce_library": "the library the gradients went through: `horovod`, or `native` (the framework's own: "
    "PyTorch's DistributedDataParallel, TensorFlow's MultiWorkerMirroredStrategy, JAX's collectives)",
    "layout": "the layout asked for (`best`, `NCHW`, `NHWC`); `layout_used` in runs.csv is what ran",
    "timing": "`native` (the framework's own step, one wait per iteration) or `phased` (a wait after every phase)",
    "nodes": "nodes the run spans (the first N hosts of the hostfile, or N emulated nodes)",
    "ranks_per_node": "MPI ranks on each node",
    "batch_size": "images per rank per iteration",
    "loader_workers": "loader worker processes or threads per rank",
    "image_size": "input images are image_size x image_size pixels",
    "classes": "classifier outputs",
    "threads_per_rank": "compute threads per rank",
    "precision": "`fp32` or `mixed`",
    "repeat": "which repeat of the configuration (from 0)",
}
assert set(RUN) == set(RUN_KEYS), "a run key without a description (dlscale/core/vocabulary.py RUN_KEYS)"

_PHASE = {
    vocabulary.IO: "waiting for the next batch and copying it into the host staging buffer",
    vocabulary.H2D: "moving the batch to the device (a no-op on the CPU)",
    vocabulary.FORWARD: "the forward pass and the loss",
    vocabulary.BACKWARD: "the backward pass",
    vocabulary.COMM: "exposed communication: what the step still waits for after backward",
    vocabulary.UPDATE: "the optimizer step and zeroing the gradients",
    vocabulary.COMM_TOTAL: "all allreduce time of the iteration, overlapped or not (native runs' traces)",
    "overlap": "the part of comm_total during which the rank also computed (native runs' traces)",
}
assert set(_PHASE) == set(PHASE_COLUMNS), "a phase without a description (dlscale/core/vocabulary.py PHASE_COLUMNS)"

# A configuration's 1-rank baseline keys: the replay's and the extrapolation's identity.
_BASELINE = {k: RUN[k] for k in BASELINE_KEYS}

TIDY = {
    **RUN,
    "rank": "the MPI rank",
    "host": "the host the rank ran on",
    "iteration": "the iteration's number (from 0, warm-up included)",
    "warmup": "true for a warm-up iteration (recorded, excluded from every result)",
    "profiled": "true for a native run's traced iteration (run under the profiler; never counts for throughput)",
    "source": "`records` (the rank's own timing) or `trace` (phases derived from a native run's trace)",
    "phase": "`wall` (the iteration's wall time) or a phase: " + "; ".join(f"`{p}`: {d}" for p, d in _PHASE.items()),
    "seconds": "the phase's time in seconds",
}

RUNS = {
    **RUN,
    "status": "`ok` or `failed`",
    "reasons": "why the run failed (the launcher's or the rank's first error line, the file found broken ...)",
    "elapsed_s": "the run's wall-clock time, launcher included",
    "run_dir": "the run's folder",
    "framework_version": "the framework's version",
    "horovod_version": "Horovod's version",
    "intra_op_threads": "the framework's intra-op threads",
    "inter_op_threads": "the framework's inter-op threads (MXNet: engine workers)",
    "layout_used": "the layout the run used (`best` resolved)",
    "onednn": "the framework's CPU kernels ran in oneDNN",
    "math_build": "the math libraries the framework's build runs its kernels in (BLAS, oneDNN, Eigen, XLA), as it "
    "reports them",
    "data": "`images` or `synthetic`",
    "data_images": "images in the training set",
    "data_skipped": "files left out as corrupt (`data.on_corrupt: skip`)",
    "data_hash": "the training set's content hash (SHA-256 of the tree)",
    "autotune": "cuDNN autotuning on",
    "tf32": "TF32 matrix maths on",
    "device": "`cpu` or `gpu`",
    "python_version": "the ranks' Python",
    "mpi_version": "the MPI library's version",
    "environment": "the workload environment's folder (named by its recipe's hash)",
    "dlscale_commit": "the dlscale commit that launched the run (`git describe --always --dirty`; empty for runs "
    "launched before it was recorded)",
    "hosts": "the hosts the ranks ran on",
    "link_rate_mbit": "the emulated link's rate (emulated clusters only)",
    "link_delay_ms": "the emulated link's one-way delay",
    "comm_overlaps_backward": "the framework starts allreduces during backward in this run",
    "allreduce_library_used": "the communication library as the run reported it (version, controller or backend)",
    "grad_tensors": "gradient tensors per iteration",
    "grad_bytes": "gradient bytes per iteration",
    "fusion_threshold_bytes": "the largest buffer gradients are fused into: Horovod's (`HOROVOD_FUSION_THRESHOLD`), "
    "DistributedDataParallel's bucket, or all gradients where a native library reduces them in one buffer",
    "cycle_time_s": "Horovod's cycle time (`HOROVOD_CYCLE_TIME`) the run had; a native library's smallest step "
    "where it starts each buffer as soon as it is full (1 us)",
    "command": "the exact command the run was launched with",
    "loader_img_per_s": "the loader's own rate before training, images/s (slowest rank)",
    "timeline_comm_s": "allreduce time per measured iteration from Horovod's timeline (phased runs of 2 or more ranks)",
    "samples_target": "the median iteration time's interval the run measured towards (half-width over the "
    "median; empty: a fixed count, `iterations`)",
    "samples_stopped_by": "why the run stopped measuring: `target` (met on every rank), `max_iterations`, "
    "`max_seconds` (a bound reached on some rank), `iterations` (a fixed count)",
    "median_ci_rel": "rank 0's 95% interval of its median iteration time (order statistics, steady iterations), "
    "half-width over the median",
    "timeline_ops": "fused allreduce operations per measured iteration (tensors executed together count once)",
    "cores_used": "cores in use: CPU time of a rank's processes (every thread, the loader's worker processes) over "
    "the wall time of its measured iterations, the most of any rank (dlscale/core/processes.py)",
    "rank_threads": "threads of a rank's processes at the end of its measured iterations, the most of any rank",
    "started": "when the run started (UTC, ISO 8601)",
    "hardware": "every host the ranks ran on, by name: CPU model, sockets, cores, logical CPUs, the fewest CPUs "
    "a rank's affinity allowed (cpus_allowed), the CPU's "
    "family/model/stepping, clock (MHz), vector instructions, kernel, OS, virtualization, memory (GiB), GPUs "
    "(name, memory, driver), as a JSON object (dlscale/core/hardware.py)",
}

TENSORS = {
    **RUN,
    "tensor": "the gradient's index",
    "bytes": "the gradient's size",
    "ready_s": "when the gradient was complete, seconds after backward started (median over the measured "
    "iterations; PyTorch overlap runs only): what the performance model replays",
}

_VALUES = {
    "iteration_s": "mean iteration time (the slowest rank's wall time), seconds",
    "throughput_img_per_s": "throughput, images/s over all ranks (ranks x batch / iteration time)",
    **{seconds(p): f"mean {p} time per iteration, seconds: {d}" for p, d in _PHASE.items()},
}

_SPREAD = {
    "iteration_s_median": "median iteration time, seconds",
    "outlier_iterations": "far-out iterations (above the third quartile + 3 interquartile ranges, e.g. a garbage "
    "collection): kept in the means, counted here",
}

RUN_METRICS = {
    **RUN,
    "iterations": "measured iterations (warm-up, traced and unsteady ones excluded)",
    "ranks": "nodes x ranks_per_node",
    **{col: f"{text}; over the run's measured iterations" for col, text in (_VALUES | _SPREAD).items()},
    "iteration_s_p95": "95th percentile of the iteration time, seconds; over the run's measured iterations",
    "unsteady_iterations": "leading measured iterations above the run's steady level (its second half's "
    "median + 3 robust standard deviations; at most half), left out of the iteration time and throughput",
}

SUMMARY = {
    **{k: v for k, v in RUN.items() if k != "repeat"},
    "ranks": "nodes x ranks_per_node",
    "repeats_ok": "repeats that succeeded",
    **{
        c: d
        for col, text in _VALUES.items()
        for c, d in (
            (col, f"{text}; mean over repeats"),
            (f"{col}_ci_lo", f"lower end of {col}'s two-sided 95% interval over repeats (iteration_s_ci_method)"),
            (f"{col}_ci_hi", f"upper end of {col}'s 95% interval"),
        )
    },
    "throughput_img_per_s": "throughput, images/s over all ranks: the harmonic mean over repeats (ranks x batch / "
    "the mean iteration time), a rate never averaged arithmetically",
    "throughput_img_per_s_ci_lo": "lower end of the throughput's 95% interval: the iteration time's, carried through "
    "ranks x batch / time (empty, unresolved, where a time bound is not positive: never infinite)",
    "iteration_s_ci_method": "how the cost intervals were made: Student-t where a Shapiro-Wilk test on the repeats "
    "does not reject normality (p >= 0.05), else a percentile bootstrap of the mean; with its p; Student-t on the "
    "log scale where the plain t interval reached zero (so no bound is at or below zero)",
    "iteration_s_median": "median over repeats of each run's median iteration time, seconds",
    "outlier_iterations": "far-out iterations of all repeats (kept in the means; see run_metrics.csv)",
    "unsteady_iterations": "leading iterations of all repeats left out as not yet steady (see run_metrics.csv)",
    "throughput_se": "standard error of the throughput over repeats (delta method from the iteration time's)",
    "iteration_s_cv": "run-to-run coefficient of variation of the iteration time",
    "iteration_s_ci_rel": "the 95% interval's half-width over the mean iteration time",
    "repeats_needed": "the repeats that would bring the 95% interval within 5% of the mean at the measured CV",
    "noise_warning": "set where the CV or the relative interval is above 5%",
    "repeats_failed": "repeats that failed",
    "failure_reasons": "the failed repeats' reasons",
    "loader_img_per_s": "the loader's own rate (mean over ok runs of the slowest rank's), images/s",
    "loader_img_per_s_ci_lo": "95% interval of the loader's rate over the ok runs, lower bound, images/s",
    "loader_img_per_s_ci_hi": "95% interval of the loader's rate over the ok runs, upper bound, images/s",
    "loader_utilisation": "throughput per rank / loader rate: near 1 the step waits for its input",
    "cores_used": "cores a rank used over its measured iterations (runs.csv), mean over ok repeats",
    "cores_given": "cores a rank was given: threads_per_rank + loader_workers (each loader worker a core) + "
    "the allowance for the communication library's and the interpreter's threads (CORES_ALLOWANCE)",
    "cores_over": "true where cores_used is above cores_given: the configuration used more of the machine "
    "than its settings promise (the report names it)",
    "runs_target_met": "ok runs whose median iteration time's interval met the samples' target on every rank "
    "(only where the config sets `samples`)",
    "median_ci_rel_max": "the widest of those runs' median intervals (rank 0's, half-width over the median)",
    "iteration_s_ci_rel_first": "with `second_pass`: the first pass's 95% interval half-width over the mean "
    "(second_pass.csv)",
    "repeats_planned": "with `second_pass`: the repeats the configuration got in all (first pass and second)",
    "second_pass": "with `second_pass`: why it got them (second_pass.csv)",
    "speedup": "throughput(N) / throughput(1), against the 1-rank configuration with the same baseline keys",
    "speedup_ci_lo": "lower end of the speedup's 95% interval (delta method on the log scale: always positive)",
    "speedup_ci_hi": "upper end of the speedup's 95% interval",
    "efficiency": "speedup / ranks (weak scaling)",
    "efficiency_ci_lo": "lower end of the efficiency's 95% interval",
    "efficiency_ci_hi": "upper end of the efficiency's 95% interval",
    "train_flops_per_image": "training FLOPs per image (3 x forward; convolutions and fully connected layers)",
    "matmul_flops_s": "the framework's matrix-multiply rate on the study's device (peak.csv)",
    "matmul_cores_used": "the cores that multiply used (peak.csv `cores_used`)",
    "matmul_flops_s_bound": "the same multiply bound to threads_per_rank CPUs (peak.csv): what that many cores can do",
    "mfu": "model FLOP utilisation: throughput per rank x training FLOPs per image / matmul_flops_s",
}

COMPARISONS = {
    "dimension": "what the two sides differ in: `framework` (each at its default library) or `allreduce_library` "
    "(native / horovod, one framework)",
    "a": "the first side: a framework (name order) or `native`",
    "b": "the second side: a framework or `horovod`",
    "a_library": "the communication library side a ran with",
    "b_library": "the communication library side b ran with",
    **{k: v for k, v in RUN.items() if k not in ("allreduce_library", "repeat")},
    "ranks": "nodes x ranks_per_node",
    **{
        c: d
        for side in "ab"
        for c, d in (
            (f"{side}_img_per_s", f"side {side}'s throughput (summary.csv's harmonic mean), images/s"),
            (f"{side}_img_per_s_ci_lo", f"lower end of side {side}'s throughput's 95% interval"),
            (f"{side}_img_per_s_ci_hi", f"upper end of side {side}'s throughput's 95% interval"),
            (f"{side}_img_per_s_se", f"standard error of side {side}'s throughput"),
            (f"{side}_repeats", f"side {side}'s ok repeats"),
        )
    },
    "blocks": "blocks (repeat indices) in which both sides ran ok: the paired analysis's sample",
    "ratio": "block model (the verdict): a / b throughput, exp of the difference of the two cells' estimates in "
    "the configuration's fit of log throughput on cell and block (blocks.csv)",
    "ratio_ci_lo": "lower end of the block model's simultaneous 95% interval (Tukey-Kramer over the "
    "configuration's cells; empty without residual degrees of freedom)",
    "ratio_ci_hi": "upper end of the block model's simultaneous 95% interval",
    "p_tukey": "block model: p-value of the ratio being 1, Tukey-adjusted over the configuration's pairs of cells",
    "p_equal_tukey": "block model: p-value of the ratio lying outside 0.95-1.05 (two one-sided tests at the same "
    "family's critical values)",
    "verdict": "block model, at 5% per configuration: `a faster`, `b faster`, `equal` (within 0.95-1.05) or "
    "`unresolved`; agrees with the interval (faster exactly when it excludes 1)",
    "blocks_needed": "for an unresolved comparison: the complete blocks at which the block model would resolve it "
    "at its measured ratio and residual spread; 201: out of reach",
    "ratio_paired": "paired: a / b throughput, the geometric mean of the blocks' within-block ratios",
    "ratio_paired_ci_lo": "lower end of the paired ratio's 95% interval (Student-t on the log scale; empty below 2 "
    "blocks; not adjusted)",
    "ratio_paired_ci_hi": "upper end of the paired ratio's 95% interval",
    "p_paired": "paired: p-value of the ratio being 1 (two-sided t on the blocks' log ratios), unadjusted",
    "p_holm_paired": "p_paired, Holm-adjusted over the study's paired family (2 hypotheses per comparison)",
    "p_equal_holm_paired": "paired: p-value of the ratio lying outside 0.95-1.05 (two one-sided tests), Holm-adjusted",
    "verdict_paired": "paired, at a family-wise 5% over the study: `a faster`, `b faster`, `equal` or `unresolved`",
    "blocks_needed_paired": "for an unresolved paired comparison: the blocks that would resolve it at its measured "
    "mean and spread (Bonferroni level, Holm's strictest step); 201: out of reach",
    "ratio_independent": "independent: a / b of the two throughputs (summary.csv's harmonic means)",
    "ratio_independent_ci_lo": "lower end of the independent ratio's 95% interval (delta method on the log scale; "
    "not adjusted)",
    "ratio_independent_ci_hi": "upper end of the independent ratio's 95% interval",
    "p_independent": "independent: p-value of the ratio being 1, unadjusted",
    "p_holm_independent": "p_independent, Holm-adjusted over the study's independent family",
    "p_equal_holm_independent": "independent: p-value of the ratio lying outside 0.95-1.05, Holm-adjusted",
    "verdict_independent": "independent, at a family-wise 5%: `a faster`, `b faster`, `equal` or `unresolved`",
}

BLOCKS = {
    **{k: v for k, v in RUN.items() if k not in ("framework", "allreduce_library", "repeat")},
    "ranks": "nodes x ranks_per_node",
    "cells": "the (framework, library) cells that ran ok in this configuration: the model's levels",
    "blocks": "the blocks (repeat indices) with an ok run of this configuration",
    "runs": "ok runs fitted",
    "residual_df": "the fit's residual degrees of freedom: runs - cells - blocks + 1 ((cells-1)(blocks-1) when "
    "complete)",
    "residual_sd_log": "the fit's residual standard deviation of log throughput (about the run-to-run CV)",
    "shapiro_p": "Shapiro-Wilk p of the residuals (normality; empty below 3 runs or without spread)",
    "levene_p": "Levene p (about the median) of equal residual variance across the cells (empty below 2 runs a cell)",
    "bartlett_p": "Bartlett p of equal residual variances across the study's configurations (each with its own "
    "degrees of freedom; empty below two)",
    "pooled": "whether the comparisons use the pooled variance: True where Bartlett's test did not reject at 5%",
    "df": "the degrees of freedom the comparisons use: pooled over the configurations, or this one's own",
    "sd_log": "the residual standard deviation the comparisons use: pooled, or this one's own",
}

SEQUENTIAL = {
    **{k: v for k, v in BLOCKS.items() if k in RUN or k == "ranks"},
    "look": "the look (from 0: after the planned blocks); the last row of each configuration is the final analysis",
    "blocks": "the blocks with an ok run of this configuration at the look",
    "pairs": "the block model's pairs of cells in this configuration",
    "unresolved": "of them, unresolved at the look's error (`alpha`)",
    "blocks_needed": "the fewest complete blocks one of its unresolved pairs needs at its measured ratio and spread",
    "run_s": "a whole block of this configuration: its cells' mean run time so far, summed (seconds)",
    "alpha": "the error each analysis tests at: 5% split over the study's possible looks (Bonferroni)",
    "decision": "`block added`, or why not: `every pair resolved`, `budget spent`, `max_blocks reached`, "
    "`within the noise` (every unresolved pair needs more blocks than max_blocks), `no look left` (final analysis "
    "only)",
}

ORDER = {
    "block": "the run's block: its repeat index (design `blocked`: every configuration runs once per block)",
    "position": "the run's place within its block (from 0), seeded by `design.seed`; empty for `unordered`",
    "run": "the run's path under runs/ (its identity)",
}

SECOND_PASS = {
    **{k: v for k, v in RUN.items() if k != "repeat"},
    "repeats_first": "the config's `repeats`: the first pass's runs of the configuration",
    "iteration_s_ci_rel_first": "the first pass's 95% interval of the mean iteration time, half-width over the mean "
    "(as summary.csv computes it over the ok runs)",
    "repeats_needed": "the fewest repeats n with t(0.975, n-1) x CV / sqrt(n) within `second_pass.target` at the "
    "first pass's run-to-run CV",
    "run_s": "the configuration's mean first-pass run time (elapsed_s), seconds: each added run's estimated cost",
    "repeats_planned": "the repeats the configuration gets in all: the first pass's and those the second adds",
    "second_pass": "why: within target, repeats added, repeats added up to max_repeats, max_seconds spent, or "
    "fewer than 2 ok runs",
}

PEAK = {
    "framework": RUN["framework"],
    "device": "`cpu` or `gpu`",
    "precision": "`fp32` (float32 multiply) or `mixed` (float16)",
    "threads": "threads the multiply ran with (`threads_per_rank`)",
    "n": "the square matrices' size (2048 on the CPU, 8192 on a GPU)",
    "matmul_flops_s": "2 n^3 / the median time of 10 multiplies",
    "matmul_flops_s_min": "the rate of the slowest multiply",
    "matmul_flops_s_max": "the rate of the fastest multiply",
    "repeats": "multiplies timed (0 where the framework could not run)",
    "cores_used": "the probe process's CPU time (all its threads) over the timed multiplies' wall time: more than "
    "`threads` means the rate came from more cores than a rank is given",
    "matmul_flops_s_bound": "the same multiply with the process bound to `threads` CPUs (CPU only): what that many "
    "cores can do; a rate far above it took more cores than it was given",
    "failure": "why there is no rate (a framework that cannot use the device)",
}

FLOPS = {
    **{k: RUN[k] for k in ("model", "image_size", "classes")},
    "forward_macs": "multiply-adds of one image's forward pass (convolutions and fully connected layers)",
    "train_flops": "training FLOPs per image: 2 FLOPs per multiply-add, 3 x the forward pass",
}

_SWEEP_KEYS = {
    **{k: RUN[k] for k in ("nodes", "ranks_per_node")},
    "ranks": "nodes x ranks_per_node",
    "path": "`mpi` (MPI_Allreduce of host buffers: the network's reference), `horovod` (Horovod's allreduce of "
    "4 tensors it fuses: the path gradients take), `horovod_tensors` (the same bytes in 128 tensors) or "
    "`horovod_one` (one tensor, which Horovod reduces without its fusion buffer; from 1 MiB up); a framework's "
    "own library's paths are named after it (`jax`, `jax_tensors`)",
}

ALLREDUCE = {
    **_SWEEP_KEYS,
    "bytes": "message size",
    "repetitions": "allreduces timed at this size (until 2 s, 5 to 50)",
    "median_s": "median time of one allreduce (the slowest rank's)",
    "min_s": "fastest repetition",
    "max_s": "slowest repetition",
    "algbw_bytes_per_s": "algorithm bandwidth: bytes / median time (nccl-tests' definition)",
    "busbw_bytes_per_s": "bus bandwidth: algbw x 2(n-1)/n",
    "transport": "the transport measured",
    "cores_used": "cores each rank's process used while it reduced (CPU time of every thread over wall time, "
    "the mean over ranks; empty in sweeps made before it was recorded): on a CPU an allreduce takes cores "
    "a rank's compute beside it would use",
}

ALLREDUCE_FIT = {
    **_SWEEP_KEYS,
    "alpha_s": "ring model's per-message latency alpha, T(m) = 2(n-1) alpha + 2(n-1)/n m beta",
    "beta_s_per_byte": "ring model's seconds per byte",
    "bandwidth_bytes_per_s": "1 / beta",
    "fit_median_rel_error": "the fit's median relative error over the sizes",
    "per_tensor_s": "what each tensor of a message adds (horovod row: median over sizes of the two Horovod "
    "paths' difference / 124 tensors)",
    "sizes": "sizes the fit used",
    "failure": "why the sweep failed (allreduce.csv keeps the sizes measured before; the model takes no T(m) from it)",
}

MODEL = {
    **RUN,
    "ranks": "nodes x ranks_per_node",
    **{k: RUNS[k] for k in ("grad_tensors", "grad_bytes", "link_rate_mbit")},
    "iteration_s": "measured mean iteration time",
    "comm_total_s": "measured allreduce work per iteration, overlapped or not",
    "comm_exposed_s": "measured exposed communication: what the step waited for",
    "overlap_ratio": "1 - comm_exposed_s / comm_total_s",
    "compute_slowdown": "what the model multiplied the 1-rank compute by: the slowdown of a rank sharing its node "
    "with ranks_per_node - 1 others (contention.csv), 1 with one rank per node",
    "slowdown_source": "where compute_slowdown came from: `measured (contention.csv)`, `one rank per node`, or "
    "`assumed 1 (...)` where no calibration measured it",
    "comm_cores": "cores an allreduce keeps busy per rank on these nodes: the median of the sweep's cores_used over "
    "its sizes (allreduce.csv; 0 where the sweep did not record it)",
    "shared_rate": "how fast a rank's compute and its allreduce each progress while both run (0 to 1): the node's "
    "logical CPUs per rank over what a rank then asks (threads_per_rank + comm_cores), 1 with CPUs to spare; below "
    "1 an allreduce overlapped with backward slows backward and runs longer than the sweep's (docs/methods/model.md)",
    "ready_from": "when the model starts each gradient's allreduce: `measured` (the framework's backward hooks), "
    "another framework's ready times of the same network as fractions of backward (a framework that starts each "
    "allreduce as its gradient is ready but reports no times), `end of backward`, or `sequential`",
    "predicted_iteration_s": "the model's iteration: 1-rank compute x compute_slowdown, longer by what allreduces "
    "beside backward took from it (shared_rate below 1), + exposed communication",
    "predicted_comm_total_s": "the model's sum of the fused buffers' allreduce times (each slowed while it ran beside "
    "backward, shared_rate below 1)",
    "predicted_comm_exposed_s": "how far the model's last allreduce ends after backward",
    "error_iteration": "(predicted - measured) / measured iteration time",
    "error_comm_total": "(predicted - measured) / measured communication time",
    "error_from_compute": "the part of error_iteration from compute (the 1-rank compute against the N-rank run's), "
    "a share of the measured iteration",
    "error_from_exposed": "the part from exposed communication; error_from_compute + error_from_exposed = "
    "error_iteration",
    "error_ci_lo": "lower end of the configuration's median error_iteration's 95% interval, from the spread of its "
    "runs, its 1-rank baseline's and its compute slowdown's calibration (the same on each of its rows; empty with "
    "one run)",
    "error_ci_hi": "upper end of that interval",
    "not_predicted": "why the run has no prediction (no 1-rank baseline, no sweep, no phases ...)",
}

REPLAY = {
    **_BASELINE,
    "nodes": "replayed nodes",
    "ranks": "replayed ranks (one per node)",
    "iterations": "replayed iterations",
    "iteration_s": "replayed iteration time, mean over ranks and iterations",
    "iteration_ci95": "its 95% interval's half-width relative to the mean",
    "comm_exposed_s": "replayed exposed communication",
    "predicted_iteration_s": "the model's prediction from the Horovod sweep on the same nodes",
    "predicted_comm_exposed_s": "the model's exposed communication",
    "error_iteration": "(predicted - replayed) / replayed iteration time",
    **{k: MODEL[k] for k in ("error_from_compute", "error_from_exposed")},
    "extrapolated_iteration_s": "the extrapolation's prediction from the ring fit of the smallest multi-node sweep",
    "error_extrapolated": "(extrapolated - replayed) / replayed iteration time",
    "failure": "why the replay failed",
}

REPLAYED = {
    "plan": "the replayed configuration's key (JSON of the keys beside it)",
    **{k: REPLAY[k] for k in ("nodes", "ranks", "iterations", "iteration_s", "iteration_ci95", "comm_exposed_s")},
    **_BASELINE,
    "failure": REPLAY["failure"],
}

GRADIENTS = {k: RUN[k] for k in ("framework", "model")} | {k: RUNS[k] for k in ("grad_tensors", "grad_bytes")}

EXTRAPOLATION = {
    **_BASELINE,
    "link": "the link's name under `extrapolate.links`",
    "ranks": "ranks in the predicted cluster, one per node (2, 4 ... `extrapolate.max_ranks`)",
    "predicted_iteration_s": "PREDICTED iteration time over that link",
    "predicted_efficiency": "PREDICTED weak-scaling efficiency T(1) / T(N)",
    "input_efficiency_lo": "the efficiency at either end of the 95% interval of the 1-rank runs' mean iteration "
    "(the model's measured input: its phases and ready times scaled alike), the lower; none with one 1-rank run",
    "input_efficiency_hi": "the same, the higher",
    "model_error": "the model's median |error| of the iteration time over this study's predicted runs of that "
    "framework and network (none: it predicted none)",
    "predicted_efficiency_lo": "input_efficiency_lo x (1 - model_error) (predicted_efficiency where the input has "
    "no interval): the band the figure draws, from the model's input and its measured error",
    "predicted_efficiency_hi": "input_efficiency_hi x (1 + model_error)",
}

_OFF_TARGET = (
    "every configuration whose median error is over 5%, with its medians, the measured reason and the error's "
    "95% interval (error_ci_lo, error_ci_hi, as in model.csv; beyond_noise: whether it lies wholly beyond 5%, null "
    "with one run)"
)

MODEL_ERROR = {
    "runs": "predicted runs",
    "median_abs_error_iteration": "median absolute relative error of the predicted iteration time",
    "median_abs_error_comm_total": "median absolute relative error of the predicted communication time",
    "off_target": _OFF_TARGET,
    "not_predicted": "runs of 2 or more ranks not predicted, counted by why",
    "reason": "why nothing was predicted (only where no run was)",
    "by_library": "the same medians per communication library (`allreduce_library`): runs, "
    "median_abs_error_iteration, median_abs_error_comm_total",
    "replay": "with `replay`: the same over the replayed configurations (keys below)",
    "replay.replays": "replayed configurations with a prediction",
    "replay.nodes": "the node counts replayed",
    "replay.median_abs_error_iteration": "the model's median absolute relative error",
    "replay.median_abs_error_extrapolated": "the extrapolation's median absolute relative error",
    "replay.worst_iteration_ci95": "the widest replay's 95% interval relative to its mean",
    "replay.off_target": _OFF_TARGET,
}

CONTENTION = {
    **_BASELINE,
    "ranks_per_node": "ranks sharing one node: the copies of the 1-rank run that ran at once",
    "trials": "trials measured (each: the 1-rank run alone and the copies together, alternating which first)",
    "alone_s": "mean iteration time of the copy alone, seconds (mean over trials)",
    "together_s": "mean iteration time of the copies together, seconds (mean over copies and trials)",
    "slowdown": "a rank's compute beside the others over alone: the geometric mean of the trials' paired ratios",
    "slowdown_ci_lo": "lower end of the slowdown's 95% interval (Student-t on the log scale; empty with one trial)",
    "slowdown_ci_hi": "upper end of the slowdown's 95% interval",
    "failure": "why the calibration measured nothing (a copy that failed, and its reason)",
}

# Every table the pipeline writes under `results/`, by file name (paths.TABLES names each).
_NAMED = dict(tidy=TIDY, runs=RUNS, tensors=TENSORS, run_metrics=RUN_METRICS, summary=SUMMARY)
_NAMED |= dict(second_pass=SECOND_PASS, comparisons=COMPARISONS, blocks=BLOCKS, sequential=SEQUENTIAL, order=ORDER)
_NAMED |= dict(peak=PEAK, flops=FLOPS, allreduce=ALLREDUCE, allreduce_fit=ALLREDUCE_FIT, model=MODEL, replayed=REPLAYED)
_NAMED |= dict(replay=REPLAY, gradients=GRADIENTS, extrapolation=EXTRAPOLATION, contention=CONTENTION)
TABLES = {paths.TABLES[name]: described for name, described in _NAMED.items()}
# JSON outputs' keys (nested keys joined by a dot).
JSON_KEYS = {paths.TABLES["model_error"]: MODEL_ERROR}

# The results tree's paths, with <placeholders> for what varies.
_VARIES = {k: f"<{k}>" for k in paths.WORD_KEYS}
_VARIES |= {"batch_size": "<B>", "loader_workers": "<W>", "threads_per_rank": "<T>", "ranks_per_node": "<R>"}
_RUN_PATH = paths.run_folder(_VARIES | {"nodes": "<N>", "repeat": "<K>"})
_CALIBRATION = paths.contention(_VARIES)
_T = paths.TABLES
_REPLAY_FILES = f"{paths.REPLAY_PLANS}, {paths.replay('<N>')}.jsonl, {paths.replay('<N>')}.spec.json"

# What lands where: every file and folder a study writes (under `results/` but for `data/` and `logs/`).
OUTPUTS = {
    ENVIRONMENT_RECORD: "the environment the study ran in: pins, MPI, `horovodrun --check-build`",
    "data/<recipe>/": "the training images (`data: {kind: images}`), made once per recipe (count, classes, seed, or "
    "your folder; shards; corrupt-file policy) and shared by every study in the checkout: `tree/` (ImageFolder JPEGs), "
    "`tfrecord/`, `recordio/train.{rec,idx}`, `manifest.json` (files, content hash, skipped and converted files)",
    f"{_RUN_PATH}/": "one run (`lw`: loader workers per rank): `spec.json` (everything the ranks were told), "
    "`rank<r>.jsonl` (one record per iteration per rank), `trace_rank<r>.json` (native timing: the rank's traced "
    "iterations as one Chrome trace, opens in Perfetto), `profile_rank<r>/` (the framework profiler's and Horovod's "
    "raw files behind it), `timeline.json` (phased timing: Horovod's timeline of the measured iterations, rank 0, 2 or "
    "more ranks), `status.json` (ok or failed, and why)",
    f"{paths.attempts('<run path>')}/<time>/": "earlier attempts of a redone run, whole (its files, `status.json`, "
    "`launch.log`), and earlier allreduce sweeps (`attempts/allreduce/`): measured data is never overwritten",
    _T["tidy"]: "one row per run x rank x iteration x phase",
    _T["runs"]: "one row per run: status, reasons, versions, settings, data, hosts, command, gradients, "
    "Horovod's fusion settings and timeline",
    _T["tensors"]: "one row per successful run x gradient tensor: what the performance model replays. The table stage "
    "(`dlscale/analysis/tidy.py`) is the only one that reads run folders; later stages read these tables",
    _T["run_metrics"]: "one row per run: its iteration time, throughput and mean phase times over its measured "
    "iterations, the table the summary, the replay plans and the model read",
    _T["comparisons"]: "one row per pair of frameworks (each at its default library) and per framework run through "
    "both libraries, in each configuration both sides ran: a / b by the block model (the verdict: Tukey's "
    "simultaneous 95% interval and tests per configuration), and beside it paired by block and independent, each "
    "with its 95% interval, Holm-adjusted tests and verdict (the report's tables and figure read it)",
    _T["sequential"]: "with `design.until_resolved`: one row per look and configuration (each look's own table "
    "is results/looks/look-N.csv), then the final analysis's rows: what each look decided and why "
    "(`dlscale/analysis/sequential.py`); empty without it",
    _T["blocks"]: "one row per configuration: the block model's fit of log throughput on cell (framework, "
    "library) and block, its residual checks, and whether its comparisons use the variance pooled over the "
    "configurations (`dlscale/analysis/blocks.py`)",
    _T["order"]: "the first pass's runs in the order the `design` gives them: block by block, each block in its "
    "seeded random order, a configuration's frameworks back to back (`dlscale/runtime/design.py`)",
    _T["second_pass"]: "with `second_pass`: one row per configuration of the first pass, its interval and the "
    "repeats the second pass gives it, and why (`dlscale/analysis/second_pass.py`)",
    _T["summary"]: "one row per configuration: throughput, speedup, efficiency, iteration and phase times with "
    "95% intervals, loader rate, MFU, noise, failed repeats",
    _T["flops"]: "the training FLOPs per image of each of the study's networks at its input size, counted from "
    "the reference framework's definition: MFU's numerator",
    _T["peak"]: "each framework's matrix-multiply rate with a rank's threads on the study's device: MFU's denominator",
    f"{paths.sweep('<N>', '<R>')}.jsonl": "the allreduce sweep (4 bytes to `allreduce_max_bytes`) on the same "
    "hosts and ranks as the training runs with 2 or more ranks, and on every node count "
    "under `replay`: every repetition's time per size and path",
    _T["allreduce"]: "per sweep, path and size: repetitions, times, algorithm and bus bandwidth",
    _T["allreduce_fit"]: "per sweep and path: the ring alpha-beta fit and Horovod's per-tensor cost",
    _T["model"]: "one row per run: measured and predicted communication and iteration time",
    _REPLAY_FILES: "with `replay`: what each replayed 1-rank configuration computes and sends, per node count every "
    "rank's replayed iteration, and the spec the ranks were handed",
    _T["replayed"]: "one row per replayed configuration and node count: what the replay measured (its "
    "output's every rank and iteration, summarised)",
    _T["replay"]: "per replayed configuration and node count: replayed time beside the model's and the "
    "extrapolation's prediction; empty without `replay`",
    _T["model_error"]: "the model's median errors, and the configurations off by more than 5% with the measured reason",
    _T["gradients"]: "gradient tensors and bytes per iteration, per framework and model",
    _T["contention"]: "each configuration's compute slowdown when ranks_per_node ranks share a node, measured "
    "(its 1-rank run alone and that many copies at once, `contention.trials` paired trials): what the model "
    "multiplies the 1-rank compute by",
    f"{_CALIBRATION}/": "one calibration: `trial<t>/{alone,together}/copy<i>/` (each a whole 1-rank run) "
    "and, beside the folder, its trials as JSON lines (`.jsonl`)",
    _T["extrapolation"]: "PREDICTED efficiency for 2 ... `extrapolate.max_ranks` ranks over each link in "
    "`extrapolate.links`",
    "figures/{throughput,efficiency}.{pdf,png}": "seaborn, faceted by model, hue framework, style the rest "
    "of the configuration (`setting`)",
    "figures/phases.{pdf,png}": "per network and phase (its own scale) the mean seconds per iteration with 95% "
    "intervals, a row per configuration, in the framework's colour",
    "figures/input.{pdf,png}": "per configuration and rank, the loader's own rate against what training takes "
    "from it, with 95% intervals",
    "figures/model.{pdf,png}": "predicted against measured iteration and communication time, one point per run",
    "figures/extrapolation.{pdf,png}": "predicted efficiency up to `extrapolate.max_ranks` ranks per link, titled as "
    "a prediction",
    "figures/replay.{pdf,png}": "replayed iteration time by node count beside the two predictions",
    _T["report"]: "the study for a paper: config, hosts, launcher, environment and git commit, the summary as "
    "Markdown and LaTeX (booktabs) tables, noise and failure warnings, the model's error, the figures",
    "logs/": "the environment build log, one log per run (mpirun's output of all ranks), one per analysis step "
    "(what it read, wrote and warned about)",
}
