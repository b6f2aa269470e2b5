"""The environments' recipe: the workload environment's pins, each framework's (its pins.py), and Horovod's
version, source edits and build settings. build.py hashes this content: a change builds a new environment."""

from dlscale.workloads import frameworks

# The workload environment (`.venv`): pipeline, analysis, tests' tools and image maker; no framework
# and no Horovod in either variant (each framework has an environment of its own).
TOOL_PINS = {
    "snakemake": "9.27.1",
    "pandas": "2.3.3",  # < 3: the newest Slurm executor plugin that accepts numpy 1.26 (2.6.1) wants it
    "matplotlib": "3.11.2",
    "seaborn": "0.13.2",
    "pillow": "13.0.0",  # its libjpeg fixes the bytes of the training images made here (workloads/images.py)
    "scipy": "1.17.1",
    "jsonschema": "4.26.0",
    "pyyaml": "6.0.3",
    "pytest": "9.2.0",
    "hypothesis": "6.170.15",  # property-based tests of the analysis
    "pytest-timeout": "2.4.0",  # a time limit on every test that could hang
    # The documentation site and the lint and format checks CI runs.
    "mkdocs": "1.6.1",
    "mkdocs-material": "9.8.1",
    "ruff": "0.17.5",
    "snakefmt": "2.1.0",
    "black": "26.10.1",
    "snakemake-executor-plugin-slurm": "2.6.1",  # profiles/slurm
    "snakemake-executor-plugin-slurm-jobstep": "0.6.1",  # the job-step executor it runs inside each job
    "build": "1.6.1",  # the release's sdist and wheel, built and checked
    "twine": "6.2.0",  # 7 needs packaging >= 26.1, snakemake 9.27 packaging < 26
    # The overlay's editable install of the checkout (build.link, no build isolation).
    "setuptools": "84.2.1",
    "wheel": "0.48.0",
}

# What dlscale's commands import that a bare Python lacks: where one is missing, an installed
# `dlscale` builds the workload environment and re-runs itself there (rerun.py).
WORKLOAD_IMPORTS = ("snakemake", "jsonschema", "yaml", "pandas", "matplotlib", "scipy")

# What every environment holds: numpy (1.26.4 satisfies TensorFlow 2.21, >= 1.26, and MXNet 1.9.1, < 2,
# with its `numpy.bool` shim; JAX's own has numpy 2) and the ranks' MPI bindings.
RANK_PINS = {"numpy": "1.26.4", "mpi4py": "4.1.2"}
# Horovod's own run requirements and the tools its build needs, pinned so that pip does not pick them.
HOROVOD_PINS = {"cloudpickle": "3.1.2", "cffi": "2.1.1", "psutil": "7.2.2", "pyyaml": "6.0.3", "packaging": "25.0"}
HOROVOD_PINS |= {tool: TOOL_PINS[tool] for tool in ("setuptools", "wheel")}
# NCCL, which Horovod's GPU collectives (and libmxnet.so) link: one release in every framework's cuda
# variant, so their allreduces run the same library (each package's NCCL_WHEEL, of its CUDA release).
NCCL_VERSION = "2.29.7"
VARIANTS = ("cpu", "cuda")


# What a framework's pins.py declares (frameworks/torch/pins.py says what each means).
DECLARED = ("PINS", "WORKLOAD_PINS", "EXACT_CUDA_PINS", "NCCL_WHEEL", "HOROVOD_BUILD", "CUDA_HEADERS")
DECLARED += ("INCLUDE_DIR", "HOROVOD_INCLUDES", "SITE_SHIM", "DRIVER_LINKED")


def declared(name):
    """Framework `name`'s pins.py: its pins per variant and what Horovod's build of it needs."""
    pins = frameworks.module(name, "pins")
    missing = [key for key in DECLARED if not hasattr(pins, key)]
    if missing or set(pins.PINS) != set(VARIANTS):
        raise AttributeError(
            f"{pins.__file__}: declares no {', '.join(missing)}" if missing else f"{pins.__file__}: PINS for {VARIANTS}"
        )
    return pins


# The frameworks Horovod is built into: (the name `horovodrun --check-build` lists, the build switch).
HOROVOD_FRAMEWORKS = {name: declared(name).HOROVOD_BUILD for name in frameworks.NAMES if declared(name).HOROVOD_BUILD}


def own_pins(name, variant="cpu"):
    """Framework `name`'s own environment's pins in `variant` (its package's may override a rank pin: JAX's
    numpy 2). One environment per framework: a pin change of one rebuilds no other's Horovod."""
    own = declared(name)
    nccl = {own.NCCL_WHEEL: NCCL_VERSION} if variant == "cuda" and own.NCCL_WHEEL else {}
    shared = {pin: TOOL_PINS[pin] for pin in own.WORKLOAD_PINS}
    return {**RANK_PINS, **shared, **own.PINS[variant], **nccl, **(HOROVOD_PINS if own.HOROVOD_BUILD else {})}


# Every framework's own environment, per variant (older revisions' name, read by bench/bootstrap.py).
OWN_ENVIRONMENTS = {name: {v: own_pins(name, v) for v in VARIANTS} for name in frameworks.NAMES}


def own_horovod_build_env(name, variant="cpu"):
    """Horovod's build switches for framework `name` alone, with MPI (and NCCL in the cuda variant)."""
    switches = [switch for _, switch in HOROVOD_FRAMEWORKS.values()]
    common = {key: value for key, value in horovod_build_env(variant).items() if key not in switches}
    own = HOROVOD_FRAMEWORKS[name][1]
    without = {switch.replace("_WITH_", "_WITHOUT_"): "1" for switch in switches if switch != own}
    return {**common, **without, own: "1"}


def horovod_features(name, variant="cpu"):
    """What `horovodrun --check-build` must list as built in framework `name`'s own environment."""
    return [HOROVOD_FRAMEWORKS[name][0], "MPI", *(["NCCL"] if variant == "cuda" else [])]


# Tools that build the environment (pip itself, and cmake for Horovod's build).
BUILD_PINS = {"pip": "24.3.1", "cmake": "3.31.6"}

HOROVOD_VERSION = "0.28.1"

# Horovod's build switches: every framework and MPI, no Gloo (the harness launches with MPI).
HOROVOD_BUILD_ENV = {switch: "1" for _, switch in HOROVOD_FRAMEWORKS.values()}
HOROVOD_BUILD_ENV |= {"HOROVOD_WITH_MPI": "1", "HOROVOD_WITHOUT_GLOO": "1", "HOROVOD_CPU_OPERATIONS": "MPI"}

# The CUDA variant: Horovod built with NCCL by the site's CUDA toolkit, whose headers its PyTorch extension
# compiles against: the release PyTorch's wheel was built with, for every framework (one toolkit to load).
CUDA_TOOLKIT_MAJOR = "13"
# Pins the cuda variant asks for with `===` (the packages' EXACT_CUDA_PINS say why), and each
# framework's CUDA wheels' header folders (site-packages/nvidia) Horovod's build needs on CPATH.
CUDA_EXACT_PINS = tuple(pin for name in frameworks.NAMES for pin in declared(name).EXACT_CUDA_PINS)
CUDA_WHEEL_HEADERS = {fw: list(declared(fw).CUDA_HEADERS) for fw in frameworks.NAMES if declared(fw).CUDA_HEADERS}
CUDA_HOROVOD_BUILD_ENV = {**HOROVOD_BUILD_ENV, "HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_NCCL_LINK": "SHARED"}


def _replaced_in(path, old, new, *contexts):
    """An edit of `path` per context (a text that occurs once): `old` replaced by `new` in it."""
    return [(path, context, context.replace(old, new)) for context in contexts]


# Source edits to the Horovod sdist, as (file, old text, new text). Each old text must occur
# exactly once, otherwise the build stops: a silent no-op edit would build a broken Horovod.
HOROVOD_EDITS = [
    # torch >= 2.1 headers need C++17; Horovod compiles its torch extension as C++14.
    ("horovod/torch/CMakeLists.txt", "    set(CMAKE_CXX_STANDARD 14)", "    set(CMAKE_CXX_STANDARD 17)"),
    # MXNet's target sees TensorFlow's abseil headers when both are built: C++17 everywhere.
    ("CMakeLists.txt", "set(CMAKE_CXX_STANDARD 14)", "set(CMAKE_CXX_STANDARD 17)"),
    # TF >= 2.19 moved xla_builder.h.
    (
        "horovod/tensorflow/xla_mpi_ops.cc",
        '#include "tensorflow/compiler/xla/client/xla_builder.h"',
        '#include "tensorflow/compiler/xla/hlo/builder/xla_builder.h"\n#include "absl/status/statusor.h"',
    ),
    # ::xla::StatusOr no longer exists; absl::StatusOr replaces it (two occurrences, two edits).
    *_replaced_in(
        "horovod/tensorflow/xla_mpi_ops.cc",
        "::xla::StatusOr",
        "::absl::StatusOr",
        "  ::xla::StatusOr<::xla::XlaOp> BuildAllreduceCustomCall(",
        "::xla::StatusOr<::xla::XlaOp> HVDAllreduceOp::BuildAllreduceCustomCall(",
    ),
    # With HOROVOD_TIMELINE=DYNAMIC every rank keeps a timeline (hvd.start_timeline, a file each), not
    # only the coordinator: every rank's allreduces on record. A fixed HOROVOD_TIMELINE file stays its alone.
    (
        "horovod/common/operations.cc",
        "  if (timeline_env) {\n    if (is_coordinator) {\n",
        '  if (timeline_env) {\n    if (is_coordinator || std::string(timeline_env) == "DYNAMIC") {\n',
    ),
    *_replaced_in(
        "horovod/common/operations.cc",
        "  if (is_coordinator) {",
        "  if (true) {  // dlscale: every rank (DYNAMIC)",
        "  if (is_coordinator) {\n    horovod_global.timeline.Initialize(\n",
        '  if (is_coordinator) {\n    horovod_global.timeline.SetPendingTimelineFile(std::string(""));\n',
    ),
    # The timeline's writer thread spins (sched_yield) all run once a timeline exists, even with no file
    # open, taking CPU from training. It sleeps 1 ms when it has nothing to write instead (events carry
    # their enqueue time, so writing later changes no timestamp).
    (
        "horovod/common/timeline.cc",
        "    // Allow scheduler to schedule other work for this core.\n    std::this_thread::yield();\n",
        "    // dlscale: sleep while there is nothing to write instead of spinning.\n"
        "    if (record_queue_.empty()) {\n"
        "      std::this_thread::sleep_for(std::chrono::milliseconds(1));\n"
        "    } else {\n"
        "      std::this_thread::yield();\n"
        "    }\n",
    ),
    # horovod.mxnet hands a broadcast (and alltoall) its name as a reference into parameters the completion
    # callback deletes, maybe before EnqueueTensorBroadcast's trace log reads it: a preempted rank crashed in
    # memcpy ("Segmentation fault: 11", twice in CI). A temporary copy lives until the call returns; four
    # call sites (broadcast and alltoall, host and GPU tensors).
    *_replaced_in(
        "horovod/mxnet/mpi_ops.cc",
        "ops_param->op_names[0]",
        "std::string(ops_param->op_names[0])",
        "          ready_event_lists[0], ops_param->op_names[0], device, callbacks[0],\n",
        "\n          ops_param->op_names[0], device, callbacks[0], process_set_id);",
        "ready_event_lists[0], ops_param->op_names[0],\n",
        "\n        ops_param->op_names[0], device, callbacks[0], process_set_id);",
    ),
]

# The cuda variant's edits (after HOROVOD_EDITS): Horovod's TensorFlow ops get a device context's CUDA
# stream through stream_executor::gpu::AsGpuStreamValue, which TensorFlow 2.21 no longer exports (an
# undefined symbol at load); the stream's platform handle is that CUDA stream.
CUDA_HOROVOD_EDITS = [
    (
        "horovod/tensorflow/mpi_ops.cc",
        """// Forward declaration of AsGpuStreamValue
namespace stream_executor {
namespace gpu {
GpuStreamHandle AsGpuStreamValue(Stream* stream);
} // namespace stream_executor
} // namespace gpu
""",
        "",
    ),
    (
        "horovod/tensorflow/mpi_ops.cc",
        """#include "tensorflow/stream_executor/stream.h"
#endif // TENSORFLOW_VERSION >= 2011000000
""",
        """#include "tensorflow/stream_executor/stream.h"
#endif // TENSORFLOW_VERSION >= 2011000000
namespace stream_executor {
namespace gpu {
inline GpuStreamHandle AsGpuStreamValue(Stream* stream) {
  return static_cast<GpuStreamHandle>(stream->platform_specific_handle().stream);
}
} // namespace gpu
} // namespace stream_executor
""",
    ),
]


def horovod_build_env(variant="cpu"):
    return CUDA_HOROVOD_BUILD_ENV if variant == "cuda" else HOROVOD_BUILD_ENV


def horovod_edits(variant="cpu"):
    return HOROVOD_EDITS + (CUDA_HOROVOD_EDITS if variant == "cuda" else [])


def all_pins():
    """Every pinned Python package of the workload environment (the same in both variants)."""
    return {**RANK_PINS, **TOOL_PINS}


def requirements(variant="cpu", own=None):
    """The pip requirements of the workload environment, or (`own`) of that framework's in `variant`."""
    if own is None:
        return [f"{name}=={version}" for name, version in all_pins().items()]
    exact = CUDA_EXACT_PINS if variant == "cuda" else ()
    return [f"{name}{'===' if name in exact else '=='}{version}" for name, version in own_pins(own, variant).items()]


def _quirks(own, variant):
    """What else Horovod's build of a framework takes: extra header folders and the module its
    environment imports first (keys `tf_extra_includes`, `numpy_shim`: old names, so the content hashes as before)."""
    quirks = {"tf_extra_includes": list(own.HOROVOD_INCLUDES)} if own.HOROVOD_INCLUDES else {}
    return quirks | ({"numpy_shim": own.SITE_SHIM["text"][variant]} if own.SITE_SHIM else {})


def content(variant="cpu", own=None):
    """Everything that decides the workload environment's content (or `own` framework's), as plain data."""
    if own is not None:
        made = {"variant": variant, "own": own, "pins": own_pins(own, variant), "build_pins": BUILD_PINS}
        if own in HOROVOD_FRAMEWORKS:
            made |= {
                "horovod": HOROVOD_VERSION,
                "horovod_build_env": own_horovod_build_env(own, variant),
                "horovod_edits": horovod_edits(variant),
                **_quirks(declared(own), variant),
            }
            if variant == "cuda":
                made |= {"exact_pins": CUDA_EXACT_PINS, "toolkit": CUDA_TOOLKIT_MAJOR}
                made |= {"wheel_headers": CUDA_WHEEL_HEADERS.get(own, [])}
        return made
    return {"variant": variant, "pins": all_pins(), "build_pins": BUILD_PINS}
