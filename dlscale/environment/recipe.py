"""The environments' recipe: the workload environment's pins, and each framework's own environment made
from what its package declares (dlscale/workloads/frameworks/<name>/pins.py: its pins per variant and
what Horovod's build of it needs).

Everything that decides what an environment contains is read here: the Python package pins, the
Horovod version, the source edits Horovod 0.28.1 needs for the current frameworks, and the build
settings. `dlscale.environment.build` hashes this content; a change here or in a framework's pins
builds a new environment beside the old one instead of patching it. The pins are recorded with every
result (see `dlscale/workloads/rank.py` `provenance`, and the environment record, `environment.json`).
"""

from dlscale.workloads import frameworks

# The workload environment: the pipeline, the analysis, the tests' tools and the training images'
# maker, in one interpreter (`.venv`); no framework and no Horovod in either variant (each framework
# has an environment of its own: OWN_ENVIRONMENTS).
TOOL_PINS = {
    "snakemake": "9.27.1",
    # pandas < 3: the newest Slurm executor plugin that accepts numpy 1.26 (2.6.1) wants pandas < 3.
    "pandas": "2.3.3",
    "matplotlib": "3.11.2",
    "seaborn": "0.13.2",
    # JPEG coding of the training set made here (dlscale/workloads/images.py): its libjpeg fixes the files' bytes.
    "pillow": "13.0.0",
    "scipy": "1.17.1",
    "jsonschema": "4.26.0",
    "pyyaml": "6.0.3",
    "pytest": "9.2.0",
    # Property-based tests of the analysis (tests/test_properties.py) and a time limit on every test
    # that could hang (pytest-timeout).
    "hypothesis": "6.170.15",
    "pytest-timeout": "2.4.0",
    # The documentation site (docs/, mkdocs build --strict) and the lint and format checks CI runs.
    "mkdocs": "1.6.1",
    "mkdocs-material": "9.8.1",
    "ruff": "0.17.5",
    "snakefmt": "2.1.0",
    "black": "26.10.1",
    # Snakemake's Slurm executor (profiles/slurm) and the job-step executor it runs inside each job.
    "snakemake-executor-plugin-slurm": "2.6.1",
    "snakemake-executor-plugin-slurm-jobstep": "0.6.1",
    # The release's sdist and wheel, built and checked (docs/contributing.md#releasing, tests/test_package.py).
    "build": "1.6.1",
    "twine": "6.2.0",  # 7 needs packaging >= 26.1, snakemake 9.27 packaging < 26
    # The overlay's editable install of the checkout (dlscale.environment.build `link`, no build isolation).
    "setuptools": "84.2.1",
    "wheel": "0.48.0",
}

# What a dlscale command other than `env build` imports that a bare Python lacks: where one is missing,
# an installed `dlscale` builds the workload environment and re-runs itself there (dlscale/cli.py).
WORKLOAD_IMPORTS = ("snakemake", "jsonschema", "yaml", "pandas", "matplotlib", "scipy")

# What every environment holds: arrays (numpy 1.26.4 satisfies TensorFlow 2.21, >= 1.26, and MXNet
# 1.9.1, < 2, with the `numpy.bool` shim below; JAX's own has numpy 2) and the ranks' MPI bindings
# (dlscale/workloads/rendezvous.py).
RANK_PINS = {"numpy": "1.26.4", "mpi4py": "4.1.2"}
# Horovod's own run requirements and the tools its build needs, pinned so that pip does not pick them.
HOROVOD_PINS = {
    "cloudpickle": "3.1.2",
    "cffi": "2.1.1",
    "psutil": "7.2.2",
    "pyyaml": "6.0.3",
    "packaging": "25.0",
    "setuptools": TOOL_PINS["setuptools"],
    "wheel": TOOL_PINS["wheel"],
}
# NCCL, which Horovod's GPU collectives (and MXNet's own libmxnet.so) link: one release in every
# framework's cuda variant, so their allreduces run the same library; each framework's package names
# the wheel of its CUDA release (pins.py NCCL_WHEEL), which installs nvidia/nccl/lib/libnccl.so.2,
# what Horovod builds against.
NCCL_VERSION = "2.29.7"
VARIANTS = ("cpu", "cuda")


# What a framework's pins.py declares (frameworks/torch/pins.py says what each means).
DECLARED = (
    "PINS",
    "WORKLOAD_PINS",
    "EXACT_CUDA_PINS",
    "NCCL_WHEEL",
    "HOROVOD_BUILD",
    "CUDA_HEADERS",
    "INCLUDE_DIR",
    "HOROVOD_INCLUDES",
    "SITE_SHIM",
    "DRIVER_LINKED",
)


def declared(name):
    """Framework `name`'s environment as its package declares it (frameworks/<name>/pins.py: its
    pins per variant and what Horovod's build of it needs; no framework imported)."""
    pins = frameworks.module(name, "pins")
    missing = [key for key in DECLARED if not hasattr(pins, key)]
    if missing or set(pins.PINS) != set(VARIANTS):
        raise AttributeError(
            f"{pins.__file__}: declares no {', '.join(missing)}" if missing else f"{pins.__file__}: PINS for {VARIANTS}"
        )
    return pins


# The frameworks Horovod is built into, each in its own environment: the name `horovodrun
# --check-build` lists it by and the build switch that asks for it (their packages' HOROVOD_BUILD).
HOROVOD_FRAMEWORKS = {name: declared(name).HOROVOD_BUILD for name in frameworks.NAMES if declared(name).HOROVOD_BUILD}


def own_pins(name, variant="cpu"):
    """The pins of framework `name`'s own environment in `variant`: what every rank holds (RANK_PINS),
    the workload environment's pins it shares, its package's own (which may override a rank pin: JAX's
    numpy 2), its NCCL wheel in the cuda variant, and Horovod's requirements where Horovod is built
    into it. Each framework's environment of its own sits beside the workload environment, so a study
    builds only the frameworks it names and a pin change of one rebuilds no other's Horovod."""
    own = declared(name)
    nccl = {own.NCCL_WHEEL: NCCL_VERSION} if variant == "cuda" and own.NCCL_WHEEL else {}
    shared = {pin: TOOL_PINS[pin] for pin in own.WORKLOAD_PINS}
    return {**RANK_PINS, **shared, **own.PINS[variant], **nccl, **(HOROVOD_PINS if own.HOROVOD_BUILD else {})}


# Every framework's own environment, per variant (older revisions' name, read by bench/bootstrap.py).
OWN_ENVIRONMENTS = {name: {v: own_pins(name, v) for v in VARIANTS} for name in frameworks.NAMES}


def own_horovod_build_env(name, variant="cpu"):
    """Horovod's build switches for framework `name`'s own environment: that framework and MPI alone
    (and NCCL in the cuda variant)."""
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
HOROVOD_BUILD_ENV = {
    **{switch: "1" for _, switch in HOROVOD_FRAMEWORKS.values()},
    "HOROVOD_WITH_MPI": "1",
    "HOROVOD_WITHOUT_GLOO": "1",
    "HOROVOD_CPU_OPERATIONS": "MPI",
}

# The CUDA variant (DLSCALE_ENV_VARIANT=cuda, for GPU clusters): each Horovod framework's GPU build
# from PyPI (OWN_ENVIRONMENTS' "cuda" pins), with Horovod built into it with NCCL for GPU
# collectives, compiled by the site's CUDA toolkit. Horovod's PyTorch extension compiles against the
# CUDA headers of that toolkit, so it must be the release PyTorch's wheel was built with (CUDA 13);
# the builder asks the same release of every framework's build (one toolkit to load, and the one
# release built and checked here), whose nvcc makes Horovod's kernels for sm_75 on.
CUDA_TOOLKIT_MAJOR = "13"
# Pins the cuda variant asks for with `===` (exactly this version string; the packages' EXACT_CUDA_PINS
# say why), and the header folders of each framework's CUDA wheels (under site-packages/nvidia) that
# Horovod's build of it needs on CPATH (CUDA_HEADERS).
CUDA_EXACT_PINS = tuple(pin for name in frameworks.NAMES for pin in declared(name).EXACT_CUDA_PINS)
CUDA_WHEEL_HEADERS = {
    name: list(declared(name).CUDA_HEADERS) for name in frameworks.NAMES if declared(name).CUDA_HEADERS
}
CUDA_HOROVOD_BUILD_ENV = {**HOROVOD_BUILD_ENV, "HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_NCCL_LINK": "SHARED"}

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
    (
        "horovod/tensorflow/xla_mpi_ops.cc",
        "  ::xla::StatusOr<::xla::XlaOp> BuildAllreduceCustomCall(",
        "  ::absl::StatusOr<::xla::XlaOp> BuildAllreduceCustomCall(",
    ),
    (
        "horovod/tensorflow/xla_mpi_ops.cc",
        "::xla::StatusOr<::xla::XlaOp> HVDAllreduceOp::BuildAllreduceCustomCall(",
        "::absl::StatusOr<::xla::XlaOp> HVDAllreduceOp::BuildAllreduceCustomCall(",
    ),
    # Timelines on every rank, not only the coordinator, when HOROVOD_TIMELINE=DYNAMIC: each rank
    # calls hvd.start_timeline with a file of its own, so every rank's allreduces are on record
    # (native-timing traces). A fixed HOROVOD_TIMELINE file stays the coordinator's alone.
    (
        "horovod/common/operations.cc",
        "  if (timeline_env) {\n    if (is_coordinator) {\n",
        '  if (timeline_env) {\n    if (is_coordinator || std::string(timeline_env) == "DYNAMIC") {\n',
    ),
    (
        "horovod/common/operations.cc",
        "  if (is_coordinator) {\n    horovod_global.timeline.Initialize(\n",
        "  if (true) {  // dlscale: every rank (DYNAMIC)\n    horovod_global.timeline.Initialize(\n",
    ),
    (
        "horovod/common/operations.cc",
        '  if (is_coordinator) {\n    horovod_global.timeline.SetPendingTimelineFile(std::string(""));\n',
        '  if (true) {  // dlscale: every rank (DYNAMIC)\n    horovod_global.timeline.SetPendingTimelineFile(std::string(""));\n',  # noqa: E501 (a patch's exact text)
    ),
    # The timeline's writer thread spins (sched_yield) for the whole run once a timeline exists,
    # also while no file is open (HOROVOD_TIMELINE=DYNAMIC): on a node whose cores all compute, that
    # takes CPU from training. It sleeps 1 ms when it has nothing to write instead (events carry the
    # time they were enqueued, so writing later changes no timestamp).
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
    # horovod.mxnet hands a broadcast (and alltoall) its name as a reference into the operation's
    # parameters, which the completion callback deletes. Once the tensor is queued, Horovod's thread
    # can finish the operation and delete them before EnqueueTensorBroadcast's trace log reads the
    # name (logging.h streams every level): a rank whose engine thread is preempted there crashes in
    # memcpy ("Segmentation fault: 11" during broadcast_parameters; seen twice in CI, 2-rank MXNet).
    # A temporary copy lives until the call returns. Four call sites: broadcast and alltoall, of host
    # tensors and (CUDA builds) of GPU tensors staged on the host.
    (
        "horovod/mxnet/mpi_ops.cc",
        "          ready_event_lists[0], ops_param->op_names[0], device, callbacks[0],\n",
        "          ready_event_lists[0], std::string(ops_param->op_names[0]), device, callbacks[0],\n",
    ),
    (
        "horovod/mxnet/mpi_ops.cc",
        "\n          ops_param->op_names[0], device, callbacks[0], process_set_id);",
        "\n          std::string(ops_param->op_names[0]), device, callbacks[0], process_set_id);",
    ),
    (
        "horovod/mxnet/mpi_ops.cc",
        "ready_event_lists[0], ops_param->op_names[0],\n",
        "ready_event_lists[0], std::string(ops_param->op_names[0]),\n",
    ),
    (
        "horovod/mxnet/mpi_ops.cc",
        "\n        ops_param->op_names[0], device, callbacks[0], process_set_id);",
        "\n        std::string(ops_param->op_names[0]), device, callbacks[0], process_set_id);",
    ),
]

# Source edits for the cuda variant's GPU operations (applied after HOROVOD_EDITS). Horovod's
# TensorFlow ops take the CUDA stream of a TF device context through
# stream_executor::gpu::AsGpuStreamValue, which TensorFlow 2.21 no longer exports (the library
# loads, then fails on the undefined symbol); the stream's platform handle is that CUDA stream.
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
    """The pip requirement strings of the workload environment's pins, or (`own`) of that framework's
    own environment in `variant`."""
    if own is None:
        return [f"{name}=={version}" for name, version in all_pins().items()]
    exact = CUDA_EXACT_PINS if variant == "cuda" else ()
    return [f"{name}{'===' if name in exact else '=='}{version}" for name, version in own_pins(own, variant).items()]


def _quirks(own, variant):
    """What else Horovod's build of a framework takes, as its package declares it: header folders its
    headers include (`tf_extra_includes`, a name kept so that the content hashes as before) and the
    module its environment imports first (`numpy_shim`: MXNet's, named for what it was first)."""
    quirks = {"tf_extra_includes": list(own.HOROVOD_INCLUDES)} if own.HOROVOD_INCLUDES else {}
    return quirks | ({"numpy_shim": own.SITE_SHIM["text"][variant]} if own.SITE_SHIM else {})


def content(variant="cpu", own=None):
    """Everything that decides an environment's content, as plain data (hashed by
    dlscale.environment.build): the workload environment's, or (`own`) that framework's own."""
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
