"""The one place where the environments are pinned: the workload environment and the frameworks' own.

Everything that decides what an environment contains lives here: the Python package pins, the
Horovod version, the source edits Horovod 0.28.1 needs for the current frameworks, and the build
settings. `dlscale.environment.build` hashes this content; a change here builds a new environment beside the
old one instead of patching it. The pins are recorded with every result (see
`dlscale/workloads/rank.py` `provenance`, and the environment record, `environment.json`).
"""

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
# The frameworks Horovod is built into, each in its own environment (the cpu variant): the name
# `horovodrun --check-build` lists it by and the build switch that asks for it.
HOROVOD_FRAMEWORKS = {
    "torch": ("PyTorch", "HOROVOD_WITH_PYTORCH"),
    "tensorflow": ("TensorFlow", "HOROVOD_WITH_TENSORFLOW"),
    "mxnet": ("MXNet", "HOROVOD_WITH_MXNET"),
}

# Each framework's environment of its own, beside the workload environment, per variant: a venv of
# pinned wheels, and for a Horovod framework Horovod built into it alone (HOROVOD_FRAMEWORKS; in the
# cuda variant with NCCL for GPU collectives), so a study builds only the frameworks it names and a
# pin change of one rebuilds no other's Horovod.
# JAX: a current release (0.7 on) needs numpy >= 2, which MXNet 1.9.1 cannot import, and JAX has no
# Horovod binding; sharing the workload environment pinned it at 0.6.2
# (bench/results/jax-environment.csv measures both, docs/methods/jax.md says why it moved). Its image
# loader is TensorFlow's tf.data (CPU build in both variants: it only reads and decodes files), and
# every rank needs mpi4py (the hosts' rendezvous).
_JAX_COMMON = {
    "flax": "0.12.8",
    "optax": "0.2.8",
    "numpy": "2.4.6",
    "mpi4py": "4.1.2",
    "tensorflow-cpu": "2.21.0",
}
# The cuda variant's builds (for GPU clusters), as read from the wheels (November 2026; not yet run
# on a GPU by this project):
# - torch 2.13.0 from PyPI is the CUDA 13.0 build: compute capability 7.5-12.0 (T4, A100, H100,
#   B200), NVIDIA driver >= 580.
# - tensorflow[and-cuda] 2.21.0: CUDA 12.5+ libraries from PyPI; kernels for sm_60-sm_89, H100
#   (sm_90) through PTX compiled at start-up.
# - mxnet-cu117 1.9.1, the last CUDA build of MXNet: kernels for sm_50, 60, 70, 80, 86 and no PTX,
#   so it runs on V100/A100-class GPUs but not on H100 or newer: there its runs fail (MXNet
#   reports that no kernel image is available), they do not fall back to the CPU.
# mxnet-cu117 links CUDA 11 libraries by name (libcudart.so.11.0, libcublas.so.11, libcudnn.so.8,
# ...) and ships none of them; these wheels provide them (CUDA 11.8, which 11.7 builds run on).
MXNET_CUDA11_PINS = {
    "nvidia-cuda-runtime-cu11": "11.8.89",
    "nvidia-cublas-cu11": "11.11.3.6",
    "nvidia-cudnn-cu11": "8.9.6.50",
    "nvidia-cufft-cu11": "10.9.0.58",
    "nvidia-curand-cu11": "10.3.0.86",
    "nvidia-cusolver-cu11": "11.4.1.48",
    "nvidia-cusparse-cu11": "11.7.5.86",
    "nvidia-cuda-nvrtc-cu11": "11.8.89",
    "nvidia-nvtx-cu11": "11.8.86",
}
# NCCL, which Horovod's GPU collectives (and MXNet's own libmxnet.so) link: one release in all three,
# so their allreduces run the same library. PyTorch's wheel requires its CUDA 13 build; TensorFlow's
# and-cuda extra the CUDA 12 one, which MXNet takes too (it links libnccl.so.2 by name; NCCL carries
# its own CUDA runtime). Both wheels install nvidia/nccl/lib/libnccl.so.2, which Horovod builds against.
NCCL_VERSION = "2.29.7"
OWN_ENVIRONMENTS = {
    # its loader decodes JPEG files with Pillow
    "torch": {
        "cpu": {"torch": "2.13.0", "pillow": TOOL_PINS["pillow"], **RANK_PINS, **HOROVOD_PINS},
        "cuda": {
            "torch": "2.13.0",
            "nvidia-nccl-cu13": NCCL_VERSION,
            "pillow": TOOL_PINS["pillow"],
            **RANK_PINS,
            **HOROVOD_PINS,
        },
    },
    "tensorflow": {
        "cpu": {"tensorflow-cpu": "2.21.0", **RANK_PINS, **HOROVOD_PINS},
        "cuda": {"tensorflow[and-cuda]": "2.21.0", "nvidia-nccl-cu12": NCCL_VERSION, **RANK_PINS, **HOROVOD_PINS},
    },
    # numpy 1.26.4 with the `numpy.bool` shim (MXNET_SHIM, below): MXNet 1.9.1 needs numpy < 2
    "mxnet": {
        "cpu": {"mxnet": "1.9.1", **RANK_PINS, **HOROVOD_PINS},
        "cuda": {
            "mxnet-cu117": "1.9.1",
            **MXNET_CUDA11_PINS,
            "nvidia-nccl-cu12": NCCL_VERSION,
            **RANK_PINS,
            **HOROVOD_PINS,
        },
    },
    "jax": {
        "cpu": {"jax": "0.10.2", "jaxlib": "0.10.2", **_JAX_COMMON},
        # JAX's CUDA 13 build: its plugin wheels and the CUDA libraries they require from PyPI (not
        # yet run on a GPU by this project: see docs/limits.md).
        "cuda": {"jax[cuda13]": "0.10.2", "jaxlib": "0.10.2", **_JAX_COMMON},
    },
}


def own_pins(name, variant="cpu"):
    """The pins of the environment of its own that framework `name` has (OWN_ENVIRONMENTS)."""
    return OWN_ENVIRONMENTS[name][variant]


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
    "HOROVOD_WITH_PYTORCH": "1",
    "HOROVOD_WITH_TENSORFLOW": "1",
    "HOROVOD_WITH_MXNET": "1",
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
# Pins the cuda variant asks for with `===` (exactly this version string): PyPI's torch 2.13.0 is
# the CUDA build, and `==` would also take a local CPU build `2.13.0+cpu` that a site's pip
# configuration offers (find-links), as it does on this project's machines.
CUDA_EXACT_PINS = ("torch",)
# Header folders of a framework's CUDA library wheels (under site-packages/nvidia) that Horovod's
# build of it needs on CPATH: MXNet's headers include the headers of CUDA's libraries (cuBLAS,
# cuRAND, cuSOLVER, ...), which a minimal CUDA toolkit lacks: its CUDA 11 wheels' (not the CUDA
# runtime's, which would hide the toolkit's own); PyTorch's CUDA 13 wheels hold its own release's.
CUDA_WHEEL_HEADERS = {
    "torch": ["cu13"],
    "mxnet": ["cublas", "curand", "cusolver", "cusparse", "cufft", "cuda_nvrtc", "cudnn"],
}
CUDA_HOROVOD_BUILD_ENV = {**HOROVOD_BUILD_ENV, "HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_NCCL_LINK": "SHARED"}
VARIANTS = ("cpu", "cuda")

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


# Header folders inside the TensorFlow wheel that its own headers include but that are not on
# the default include path (relative to tensorflow's include directory).
TF_EXTRA_INCLUDES = ["external/highwayhash", "external/farmhash_archive/src"]

# MXNet 1.9.1 reads the alias `numpy.bool`, removed in numpy 1.24. This shim installs an
# import hook that restores the alias just before mxnet is first imported (and only then), so
# every process of the environment (Horovod's build included) can import mxnet.
MXNET_SHIM = '''\
"""Installed by dlscale's environment builder: numpy.bool shim for MXNet 1.9.1."""
import importlib.abc
import sys


class _MxnetNumpyShim(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "mxnet":
            sys.meta_path.remove(self)
            import numpy

            if "bool" not in numpy.__dict__:
                numpy.bool = bool
        return None


sys.meta_path.insert(0, _MxnetNumpyShim())
'''

# MXNet's own environment installs the shim (`mxnet_shim(variant)`) as a module its site-packages
# imports through a .pth file, which also runs where that folder is added to another interpreter's
# path (the tests' overlay, dlscale.environment.build `link`), unlike a sitecustomize.
NUMPY_SHIM_MODULE = "_dlscale_mxnet_numpy"
NUMPY_SHIM_PTH = "dlscale-mxnet-numpy.pth"

# The cuda variant's shim also loads MXNet's CUDA 11 libraries (from the nvidia-*-cu11
# wheels, which are not on the library path) just before mxnet is imported, dependencies first, so
# that the loader finds them by name when libmxnet.so asks, and the environment's NCCL, which
# libmxnet.so links too. libcuda.so.1 (the driver) is not among them: it comes from the GPU node's
# NVIDIA driver.
MXNET_CUDA11_LIBS = [
    "libcudart.so.11.0",
    "libcublasLt.so.11",
    "libcublas.so.11",
    "libnvrtc.so.11.2",
    "libnvrtc-builtins.so.11.8",
    "libcufft.so.10",
    "libcurand.so.10",
    "libcusparse.so.11",
    "libcusolver.so.11",
    "libcudnn_ops_infer.so.8",
    "libcudnn_ops_train.so.8",
    "libcudnn_cnn_infer.so.8",
    "libcudnn_cnn_train.so.8",
    "libcudnn_adv_infer.so.8",
    "libcudnn_adv_train.so.8",
    "libcudnn.so.8",
    "libnvToolsExt.so.1",
    "libnccl.so.2",
]
MXNET_CUDA_SHIM = f"""

class _MxnetCuda11Libraries(importlib.abc.MetaPathFinder):
    # Stays in sys.meta_path (removing it while the import system walks the list would skip the
    # numpy shim after it) and loads once.
    loaded = False

    def find_spec(self, name, path=None, target=None):
        if name == "mxnet" and not self.loaded:
            self.loaded = True
            import ctypes
            import glob
            import os

            site = os.path.dirname(os.path.abspath(__file__))
            for soname in {MXNET_CUDA11_LIBS!r}:
                for lib in glob.glob(os.path.join(site, "nvidia", "*", "lib", soname)):
                    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
        return None


sys.meta_path.insert(0, _MxnetCuda11Libraries())
"""


def mxnet_shim(variant="cpu"):
    return MXNET_SHIM + (MXNET_CUDA_SHIM if variant == "cuda" else "")


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
                **({"tf_extra_includes": TF_EXTRA_INCLUDES} if own == "tensorflow" else {}),
                **({"numpy_shim": mxnet_shim(variant)} if own == "mxnet" else {}),
            }
            if variant == "cuda":
                made |= {"exact_pins": CUDA_EXACT_PINS, "toolkit": CUDA_TOOLKIT_MAJOR}
                made |= {"wheel_headers": CUDA_WHEEL_HEADERS.get(own, [])}
        return made
    return {"variant": variant, "pins": all_pins(), "build_pins": BUILD_PINS}
