"""Build (once) and find the Python environments, under $DLSCALE_ENV_ROOT in folders named by a hash of
`recipe.content()`, the interpreter and the MPI (clones share them). A folder counts once its COMPLETE
marker is written, last; a half-built one is rebuilt. Standard library only: runs under the system Python.
"""

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from dlscale.core import paths
from dlscale.environment import recipe

MARKER = "COMPLETE"
RECORD = "environment.json"
VARIANT_VAR = "DLSCALE_ENV_VARIANT"


class EnvError(RuntimeError):
    pass


def env_root():
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dlscale" / "envs"
    return Path(os.environ.get("DLSCALE_ENV_ROOT", default))


def find_mpi():
    """The MPI compiler wrapper and launcher on PATH, with the launcher's version line."""
    missing = [tool for tool in ("mpicc", "mpicxx", "mpirun") if shutil.which(tool) is None]
    if missing:
        raise EnvError(
            f"MPI not found: {', '.join(missing)} not on PATH. On a cluster, load the site's MPI "
            "module first; on Debian/Ubuntu install it with "
            "`apt-get install openmpi-bin libopenmpi-dev` (the bootstrap script does this as root)."
        )
    out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    version = out.strip().splitlines()[0] if out.strip() else "unknown"
    return {"mpirun": shutil.which("mpirun"), "mpicc": shutil.which("mpicc"), "version": version}


def variant():
    """The environment variant: `cpu` (default) or `cuda`, from $DLSCALE_ENV_VARIANT."""
    name = os.environ.get(VARIANT_VAR, "cpu")
    if name not in recipe.VARIANTS:
        raise EnvError(f"{VARIANT_VAR}={name!r}: the environment variants are {', '.join(recipe.VARIANTS)}")
    return name


def _nvcc_facts(nvcc):
    """(toolkit root, release) as nvcc reports them: a wrapper script on PATH reports the toolkit it runs."""
    dry_run = [nvcc, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull]
    try:
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
        dry = subprocess.run(dry_run, capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    top = re.search(r"^#\$ TOP=(.+)$", dry, re.M)
    release = re.search(r"release (\d+\.\d+)", version)
    return (Path(top.group(1).strip()).resolve() if top else None), (release.group(1) if release else None)


def find_cuda_home():
    """The root of the CUDA toolkit Horovod's GPU build compiles with, checked to hold nvcc and the runtime
    headers and to be recipe.CUDA_TOOLKIT_MAJOR's release; otherwise an EnvError."""
    candidates = [os.environ.get(name) for name in ("HOROVOD_CUDA_HOME", "CUDA_HOME")]
    candidates += [shutil.which("nvcc"), "/usr/local/cuda"]
    for candidate in filter(None, candidates):
        nvcc = Path(candidate) if Path(candidate).name == "nvcc" else Path(candidate) / "bin" / "nvcc"
        if not nvcc.exists():
            continue
        home, release = _nvcc_facts(nvcc)
        if home is None or not any(home.glob("**/include/cuda_runtime.h")):
            continue
        if release is None or release.split(".")[0] != recipe.CUDA_TOOLKIT_MAJOR:
            raise EnvError(
                f"the CUDA toolkit in {home} is release {release}, and the cuda environments build "
                f"Horovod with CUDA {recipe.CUDA_TOOLKIT_MAJOR}.x, the release of PyTorch's wheel, whose "
                f"headers its GPU build compiles against: load a CUDA {recipe.CUDA_TOOLKIT_MAJOR}.x "
                "toolkit (or point $HOROVOD_CUDA_HOME at one)"
            )
        return home
    raise EnvError(
        "the cuda environment builds Horovod's GPU operations with nvcc, and no CUDA toolkit with "
        "nvcc and its headers was found ($HOROVOD_CUDA_HOME, $CUDA_HOME, PATH, /usr/local/cuda): "
        f"load the site's CUDA {recipe.CUDA_TOOLKIT_MAJOR}.x module first"
    )


def env_key(mpi, variant="cpu", own=None):
    content = {"recipe": recipe.content(variant, own), "python": platform.python_version(), "mpi": mpi["version"]}
    content |= {"machine": platform.machine(), "mpicc": mpi["mpicc"]}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def env_dir(mpi=None, variant_name=None, own=None):
    """The folder of the workload environment or (`own`) of that framework's own environment."""
    name = variant_name or variant()
    tag = ("" if name == "cpu" else f"{name}-") + (f"{own}-" if own else "")
    key = env_key(mpi or find_mpi(), name, own)
    return env_root() / f"py{sys.version_info.major}{sys.version_info.minor}-{tag}{key}"


def is_complete(path):
    return (Path(path) / MARKER).is_file() and (Path(path) / "bin" / "python").exists()


def _run(argv, log, env=None, cwd=None):
    log.write(f"$ {' '.join(map(str, argv))}\n")
    log.flush()
    proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    if proc.returncode != 0:
        raise EnvError(f"command failed ({proc.returncode}): {' '.join(map(str, argv))}; see {log.name}")


def apply_edits(src, edits=recipe.HOROVOD_EDITS):
    """Apply the recipe's source edits in order; each old text must occur exactly once."""
    for rel, old, new in edits:
        path = Path(src) / rel
        text = path.read_text()
        count = text.count(old)
        if count != 1:
            raise EnvError(f"Horovod edit expected exactly one {old!r} in {rel}, found {count}")
        path.write_text(text.replace(old, new))


def check_build(python, own, variant_name="cpu", environ=None):
    """`horovodrun --check-build` output, and the features framework `own` needs that it lacks."""
    horovodrun = str(Path(python).parent / "horovodrun")
    out = subprocess.run([horovodrun, "--check-build"], capture_output=True, text=True, env=environ).stdout
    built = set(re.findall(r"\[X\]\s+(\S+)", out))
    return out, [f for f in recipe.horovod_features(own, variant_name) if f not in built]


def nccl_build_env(site):
    """Settings for the nvidia-nccl wheel's NCCL, with the libnccl.so link the build looks for (it has .so.2)."""
    home = Path(site) / "nvidia" / "nccl"
    lib = home / "lib" / "libnccl.so"
    if not lib.exists():
        lib.symlink_to("libnccl.so.2")
    library_path = os.pathsep.join(filter(None, [str(home / "lib"), os.environ.get("LD_LIBRARY_PATH")]))
    return {"HOROVOD_NCCL_HOME": str(home), "LD_LIBRARY_PATH": library_path}


def driver_stub(directory, library):
    """Where there is no NVIDIA driver (a login node), `import mxnet` fails in Horovod's build (libmxnet.so
    links libcuda.so.1): a libcuda.so.1 in `directory` whose functions (those `library` asks for) return
    CUDA_ERROR_NO_DEVICE, and `directory` for the build's LD_LIBRARY_PATH; None where the driver is."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libcuda.so.1")
        return None
    nm = ["nm", "-D", "--undefined-only", str(library)]
    undefined = subprocess.run(nm, capture_output=True, text=True, check=True).stdout
    names = sorted(set(re.findall(r"^\s+U (cu[A-Z]\w*)(?:@\S*)?$", undefined, re.M)))
    source = Path(directory) / "libcuda_stub.c"
    source.write_text("".join(f"int {name}(void) {{ return 100; }}\n" for name in names))
    compile_stub = ["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(Path(directory) / "libcuda.so.1")]
    subprocess.run([*compile_stub, str(source)], check=True, capture_output=True)
    return Path(directory)


@contextlib.contextmanager
def _step(what):
    """A line on stderr as a build step starts and one with its time: whoever waits minutes sees where."""
    started = time.monotonic()
    print(f"dlscale env: {what} ...", file=sys.stderr, flush=True)
    yield
    print(f"dlscale env: {what}: done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)


def _build(path, mpi, log, variant_name="cpu"):
    """The workload environment: a venv of the tools' pins (no framework, in either variant)."""
    py = _venv(path, log)
    wanted = recipe.requirements(variant_name)
    with _step(f"installing the workload environment's {len(wanted)} pinned packages"):
        _run([py, "-m", "pip", "install", *wanted], log)
    _write_record(path, py, mpi, variant_name, None)


def _build_horovod(py, tmp, log, variant_name, build_env, own):
    """Horovod built into `py`'s venv; `horovodrun --check-build`'s output once it lists what `own` needs."""
    src = _horovod_source(py, tmp, log, variant_name)
    _run([py, "-m", "pip", "install", "--no-build-isolation", "--no-cache-dir", "-v", str(src)], log, env=build_env)
    out, missing = check_build(py, own, variant_name, build_env)
    log.write(out)
    if missing:
        raise EnvError(f"horovodrun --check-build does not list {', '.join(missing)} as built; see {log.name}")
    return out


def _build_own(path, name, mpi, log, variant_name):
    """A framework's own environment: its pinned wheels and, for a Horovod framework, Horovod for it alone."""
    horovod = name in recipe.HOROVOD_FRAMEWORKS
    # Horovod's CMake reads HOROVOD_CUDA_HOME, its PyTorch part CUDA_HOME (else it guesses from the nvcc on
    # PATH): found before GBs of wheels are downloaded.
    home = str(find_cuda_home()) if horovod and variant_name == "cuda" else None
    py = _venv(path, log)
    cmake = [f"cmake=={recipe.BUILD_PINS['cmake']}"] if horovod else []
    with _step(f"installing {name}'s pinned packages"):
        _run([py, "-m", "pip", "install", *recipe.requirements(variant_name, own=name), *cmake], log)
    out = None
    if horovod:
        site = _site_packages(py)
        shim = recipe.declared(name).SITE_SHIM  # the module its environment imports first (MXNet's numpy.bool)
        if shim:
            Path(site, f"{shim['module']}.py").write_text(shim["text"][variant_name])
            Path(site, shim["pth"]).write_text(f"import {shim['module']}\n")
        with tempfile.TemporaryDirectory(prefix="dlscale-horovod-") as tmp:
            cuda = _cuda_build_env(tmp, site, log, name, home) if home else {}
            build_env = _horovod_build_env(path, py, cuda, name, variant_name)
            with _step(f"compiling Horovod {recipe.HOROVOD_VERSION} for {name}"):
                out = _build_horovod(py, tmp, log, variant_name, build_env, name)
    _write_record(path, py, mpi, variant_name, out, own=name)


def _venv(path, log):
    """A new venv at `path` with the pinned pip; returns its python."""
    py = path / "bin" / "python"
    with _step(f"making a venv at {path}"):
        _run([sys.executable, "-m", "venv", str(path)], log)
        _run([py, "-m", "pip", "install", f"pip=={recipe.BUILD_PINS['pip']}"], log)
    return py


def _site_packages(py):
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return subprocess.run([py, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def _cuda_build_env(tmp, site, log, name, home):
    """Framework `name`'s GPU build settings: the toolkit at `home`, NCCL, its CUDA wheels' headers and,
    where its wheel links the driver (DRIVER_LINKED) and there is none, the driver stub made in `tmp`."""
    env = {"HOROVOD_CUDA_HOME": home, "CUDA_HOME": home, **nccl_build_env(site)}
    env["CPATH"] = [str(Path(site) / "nvidia" / lib / "include") for lib in recipe.CUDA_WHEEL_HEADERS.get(name, [])]
    linked = recipe.declared(name).DRIVER_LINKED
    stub = driver_stub(tmp, Path(site) / linked) if linked else None
    if stub:
        log.write(f"no NVIDIA driver here: building with the driver stub {stub}/libcuda.so.1\n")
        env["LD_LIBRARY_PATH"] = os.pathsep.join([str(stub), env["LD_LIBRARY_PATH"]])
    return env


def _horovod_source(py, tmp, log, variant_name):
    """The folder of Horovod's source release, downloaded and unpacked in `tmp`, the recipe's edits applied."""
    sdist_only = ["--no-deps", "--no-binary", ":all:"]
    _run([py, "-m", "pip", "download", *sdist_only, f"horovod=={recipe.HOROVOD_VERSION}", "-d", tmp], log)
    sdist = next(Path(tmp).glob("horovod-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp, filter="data")
    src = Path(tmp) / f"horovod-{recipe.HOROVOD_VERSION}"
    apply_edits(src, recipe.horovod_edits(variant_name))
    return src


def _horovod_build_env(path, py, cuda, own, variant_name):
    """Horovod's build environment: its switches for `own` alone, the CUDA settings `cuda` (its "CPATH" a
    list), the framework's HOROVOD_INCLUDES, parallel make, and the venv's bin on PATH."""
    cuda = dict(cuda)
    cpath = cuda.pop("CPATH", [])
    declared = recipe.declared(own)
    if declared.HOROVOD_INCLUDES:
        include = _include_dir(py, declared.INCLUDE_DIR)
        cpath += [str(Path(include) / inc) for inc in declared.HOROVOD_INCLUDES]
    if os.environ.get("CPATH"):
        cpath.append(os.environ["CPATH"])
    made = {**os.environ, **recipe.own_horovod_build_env(own, variant_name), **cuda, "CPATH": os.pathsep.join(cpath)}
    return made | {"MAKEFLAGS": f"-j{os.cpu_count() or 2}", "PATH": f"{path / 'bin'}{os.pathsep}{os.environ['PATH']}"}


def _include_dir(py, function):
    """What `function` (a framework's INCLUDE_DIR, "module.path.function") returns in the Python `py`."""
    module, name = function.rsplit(".", 1)
    code = f"import importlib; print(importlib.import_module({module!r}).{name}())"
    done = subprocess.run([py, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def _write_record(path, py, mpi, variant_name, check_build_out, own=None):
    """environment.json: where the environment is, what it was built from, and what check-build said."""
    pins = recipe.own_pins(own, variant_name) if own else recipe.all_pins()
    record = {"path": str(path), "python": str(py), "key": path.name, "variant": variant_name, "pins": pins}
    record |= {"horovod": recipe.HOROVOD_VERSION if check_build_out else None, "mpi": mpi}
    record |= {"check_build": check_build_out, **({"framework": own} if own else {})}
    (path / RECORD).write_text(json.dumps(record, indent=2) + "\n")


@contextlib.contextmanager
def _locked(lockfile):
    lockfile.parent.mkdir(parents=True, exist_ok=True)
    with open(lockfile, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def build(quiet=False, own=None):
    """The path of the complete workload environment (or `own` framework's), built first if need be."""
    mpi, variant_name = find_mpi(), variant()
    path = env_dir(mpi, variant_name, own)
    if is_complete(path):
        return path
    with _locked(path.with_name(path.name + ".lock")):
        if is_complete(path):
            return path
        if path.exists():
            shutil.rmtree(path)  # a half-made environment from an interrupted build
        log_path = path.with_name(path.name + ".build.log")
        what = f"{own}'s own environment" if own else "the workload environment"
        if not quiet:
            takes = "a few minutes" if own else "a minute or two"
            print(f"building {what} in {path} (log: {log_path}); this takes {takes} once", file=sys.stderr)
        with open(log_path, "w") as log, _step(f"building {what}"):
            try:
                if own:
                    _build_own(path, own, mpi, log, variant_name)
                else:
                    _build(path, mpi, log, variant_name)
            except BaseException:
                shutil.rmtree(path, ignore_errors=True)
                raise
        (path / MARKER).write_text("ok\n")
    return path


def record_rule(python, record_path, log_path, own=None):
    """The `environment` rule (or with `own` `framework_environment`'s): the environment built or found by
    `python`, its record copied to `record_path`. No shell: the folders may hold spaces or quotes."""
    argv = [python, "-m", "dlscale", "env", "build", "--record", str(record_path)]
    argv += ["--framework", own] if own else []
    with open(log_path, "w") as log:
        subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=True)


def load_record(path):
    return json.loads((Path(path) / RECORD).read_text())


def own_record(framework):
    """The record of `framework`'s own environment, built first if there is none."""
    return load_record(build(quiet=True, own=framework))


OVERLAY_MARK = "dlscale-environment.pth"
DEV_MARK = "dlscale-dev"


def dev_frameworks():
    """The Horovod frameworks' own environments, built if need be: what `--dev` links for the tests."""
    return [build(own=fw) for fw in recipe.HOROVOD_FRAMEWORKS]


def is_dev(link_path):
    """Whether the overlay at `link_path` was made with the frameworks: a bootstrap without --dev keeps them."""
    return (Path(link_path) / DEV_MARK).is_file()


def link(path, link_path, frameworks=()):
    """Make `link_path` (the checkout's `.venv`) a small venv over the shared environment `path`, this
    checkout installed editable. With `frameworks` (`dev_frameworks`) their packages follow on the path: one
    interpreter importing every Horovod framework for the tests (PyTorch's Horovod, found first, is its)."""
    link_path, path = Path(link_path), Path(path)
    if link_path.is_symlink():
        link_path.unlink()  # the layout before the overlay: a link to the environment itself
    elif link_path.exists() and not list(link_path.glob(f"lib/python*/site-packages/{OVERLAY_MARK}")):
        raise EnvError(f"{link_path} exists and is not this project's environment overlay; remove it")
    else:
        shutil.rmtree(link_path, ignore_errors=True)
    base_python = [str(path / "bin" / "python"), "-c", "import sys; print(sys._base_executable)"]
    base = subprocess.run(base_python, check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([base, "-m", "venv", "--without-pip", str(link_path)], check=True)
    python = link_path.resolve() / "bin" / "python"
    own = _site_packages(python)
    shared = [_site_packages(Path(p) / "bin" / "python") for p in [path, *frameworks]]
    # addsitedir (not a plain path line) also reads the environments' own .pth files (MXNet's shim)
    (Path(own) / OVERLAY_MARK).write_text("".join(f"import site; site.addsitedir({s!r})\n" for s in shared))
    if frameworks:
        (link_path / DEV_MARK).write_text("".join(f"{p}\n" for p in frameworks))
    _commands(path / "bin", link_path.resolve() / "bin", python)
    editable = ["--quiet", "--no-deps", "--no-build-isolation", "--no-index", "--editable", str(paths.SOURCE)]
    subprocess.run([str(python), "-m", "pip", "install", *editable], check=True, cwd=paths.SOURCE)


def _commands(env_bin, own_bin, python):
    """The environment's commands in the overlay: Python scripts re-pointed at the overlay's python, others linked."""
    for script in sorted(env_bin.iterdir()):
        target = own_bin / script.name
        if target.exists() or script.name.startswith(("python", "activate", "Activate")):
            continue
        head = script.read_bytes()[:200] if script.is_file() else b""
        if head.startswith(b"#!" + str(env_bin).encode()):
            text = script.read_text().split("\n", 1)
            target.write_text(f"#!{python}\n{text[1] if len(text) > 1 else ''}")
            target.chmod(0o755)
        elif script.is_file() and os.access(script, os.X_OK):
            target.symlink_to(script.resolve())
