"""Study configuration: schema validation, hostfiles, and the run matrix. `validate` is called before
the workflow graph is built; every problem is one `ConfigError` whose message starts with its key."""

import dataclasses
import hashlib
import itertools
import os
from pathlib import Path

import jsonschema
import yaml

from dlscale.core import paths
from dlscale.core.errors import ConfigError
from dlscale.core.paths import WORKFLOW
from dlscale.core.vocabulary import MATRIX_KEYS, RENAMED_KEYS
from dlscale.environment import build as env
from dlscale.runtime import emulate, launchers
from dlscale.runtime.hosts import parse_hostfile, select_hosts
from dlscale.workloads import frameworks
from dlscale.workloads.registry import MODELS

SCHEMA_PATH = WORKFLOW / "config" / "schema.yaml"
DATA_SHARDS = 8
# The package's defaults; a study folder's own config is read over them, and every `--configfile` over that.
DEFAULT_CONFIG = WORKFLOW / "config" / "config.yaml"
STUDY_CONFIG = "config/config.yaml"  # relative to the study folder
# What an MPI job is handed: its rule declares these as params, so a change to one remakes the job, and the job
# reads nothing else of the config (run_timeout_s is a rule resource: a longer limit remakes nothing).
JOB_SETTINGS = ("hostfile", "launcher", "emulate", "device", "autotune", "tf32")
RUN_SETTINGS = ("data", "image_size", "classes", "precision", "warmup", "iterations", "samples")
RUN_SETTINGS += ("profile_iterations", "lr", "momentum", "seed")


def merge_into(base, new):
    """Merge `new` into `base` in place, nested mappings key by key (as Snakemake merges configs)."""
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge_into(base[key], value)
        else:
            base[key] = value
    return base


def _key_path(error):
    parts = [f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(error.absolute_path)]
    return f"'{''.join(parts)}'" if parts else "(top level)"


def schema():
    """The config's schema, its framework, model and launcher enumerations taken from the registries."""
    loaded = yaml.safe_load(SCHEMA_PATH.read_text())
    loaded["properties"]["framework"]["items"]["enum"] = list(frameworks.NAMES)
    loaded["properties"]["model"]["items"]["enum"] = list(MODELS)
    loaded["properties"]["environments"]["propertyNames"]["enum"] = list(frameworks.NAMES)
    loaded["properties"]["launcher"]["properties"]["name"]["enum"] = list(launchers.NAMES)
    return loaded


def refuse_renamed(config):
    """A key renamed in 0.3.0 is refused naming its new name (the schema would only call it unknown)."""
    old = {k: new for k, new in RENAMED_KEYS.items() if k in config}
    if old:
        why = (f"config key '{k}' was renamed '{new}' in 0.3.0: write {new}: instead" for k, new in old.items())
        raise ConfigError("; ".join(why))


def validate_schema(config):
    refuse_renamed(config)
    validator = jsonschema.Draft202012Validator(schema())
    e = min(validator.iter_errors(config), key=lambda e: (list(e.absolute_path), e.message), default=None)
    if e is None:
        return
    if e.validator == "additionalProperties":
        known = ", ".join(sorted(e.schema.get("properties", {})))
        raise ConfigError(f"config key {_key_path(e)}: {e.message} (known keys: {known})")
    raise ConfigError(f"config key {_key_path(e)}: {e.message}")


def check_environments(config):
    """Every Python the config names is an executable file (its contents are checked before the runs)."""
    for fw, entry in (config.get("environments") or {}).items():
        python = resolve(entry["python"])
        if not (python.is_file() and os.access(python, os.X_OK)):
            raise ConfigError(f"config key 'environments.{fw}.python': {python} is not an executable file")


def resolve(path, base=None):
    """`path` from the config: relative to the study folder (the working directory, as Snakemake's)."""
    path = Path(path)
    return path if path.is_absolute() else (base or Path.cwd()) / path


def validate(config):
    """Schema, then what it cannot express: the hostfile is big enough, or this machine can emulate the cluster."""
    validate_schema(config)
    for check in (check_matrix, check_device, check_data, check_replay, check_design, check_environments):
        check(config)
    if config.get("emulate"):
        check_emulate(config)
    elif config["launcher"]["name"] != "srun":  # srun: Slurm places the ranks; the hostfile is not read
        hosts = parse_hostfile(resolve(config["hostfile"]))
        for nodes, rpn in itertools.product(config["nodes"], config["ranks_per_node"]):
            select_hosts(hosts, nodes, rpn, hostfile=config["hostfile"])
        for nodes in replay_nodes(config):
            select_hosts(hosts, nodes, 1, hostfile=config["hostfile"])
    return config


def check_emulate(config):
    """This machine can make the emulated cluster, and the launcher suits it."""
    ok, why = emulate.available()
    if not ok:
        raise ConfigError(f"config key 'emulate': {why}")
    wanted = config["emulate"].get("congestion_control", emulate.CONGESTION_CONTROL)
    have = emulate.congestion_controls()
    if wanted not in have:
        raise ConfigError(
            f"config key 'emulate.congestion_control': {wanted!r} is not in this kernel (it has {', '.join(have)})"
        )
    if max(config["nodes"] + replay_nodes(config)) > emulate.MAX_NODES:
        raise ConfigError(f"config key 'nodes': an emulated cluster has at most {emulate.MAX_NODES} nodes")
    if config["launcher"]["name"] != "mpirun":
        raise ConfigError(
            "config key 'launcher.name': an emulated cluster is started with mpirun "
            f"(its remote-launch agent), not {config['launcher']['name']}"
        )
    if config["launcher"].get("bind_to", "none") != "none":
        raise ConfigError(
            "config key 'launcher.bind_to': must be none on an emulated cluster (each "
            "emulated node already runs on CPUs of its own; mpirun would bind across them)"
        )


def check_design(config):
    """Blocks added until resolved need a blocked design, more blocks than planned, and no second pass."""
    design = config.get("design") or {}
    sequential = design.get("until_resolved")
    if not sequential:
        return
    if design.get("order") != "blocked":
        raise ConfigError("config key 'design.until_resolved': needs design.order blocked (it adds whole blocks)")
    if sequential["max_blocks"] <= config["repeats"]:
        raise ConfigError(
            f"config key 'design.until_resolved.max_blocks': {sequential['max_blocks']} adds no block to the "
            f"{config['repeats']} planned (`repeats`); give more, or leave until_resolved out"
        )
    if config.get("second_pass"):
        raise ConfigError("config key 'design.until_resolved': not with second_pass (both add repeats); choose one")


def replay_nodes(config):
    """The node counts the study's gradient traffic is replayed on, or []."""
    return list(config.get("replay", {}).get("nodes", []))


def check_replay(config):
    """A replay needs the 1-rank runs it replays: 1 node with 1 rank per node, and its models."""
    if not config.get("replay"):
        return
    if 1 not in config["nodes"] or 1 not in config["ranks_per_node"]:
        raise ConfigError(
            "config key 'replay': replays the study's 1-rank runs, so 'nodes' and 'ranks_per_node' must both include 1"
        )
    missing = sorted(set(config["replay"]["models"]) - set(config["model"]))
    if missing:
        raise ConfigError(
            f"config key 'replay.models': {', '.join(missing)} not in the study's models ({', '.join(config['model'])})"
        )
    if not horovod(config):
        raise ConfigError(
            "config key 'replay': replays the gradients of the study's Horovod runs, and it runs no framework "
            "through Horovod (see 'allreduce_library')"
        )


def check_device(config):
    """A contradiction stops here; a GPU study without a GPU is not refused (its runs fail: `warnings`)."""
    if config.get("precision") == "mixed" and config.get("device", "cpu") != "gpu":
        raise ConfigError(
            "config key 'precision': mixed needs device gpu (float16 compute and loss scaling "
            "are what mixed precision means on the GPUs the study compares)"
        )


def warnings(config):
    """What will make runs fail though the config is valid, said before anything runs."""
    if config.get("device", "cpu") != "gpu" or env.variant() == "cuda":
        return []
    return [
        f"config key 'device': gpu runs need the cuda environment (GPU builds of the frameworks, "
        f"Horovod with NCCL), and {env.VARIANT_VAR} selects the {env.variant()} one: every run will "
        f"fail for want of a GPU; set {env.VARIANT_VAR}=cuda for ./bootstrap.sh and snakemake"
    ]


def check_data(config):
    """Loader workers suit the data, a user's folder exists, and every rank has TFRecord shards of its own."""
    data, workers = config["data"], config["loader_workers"]
    if data["kind"] == "synthetic":
        if workers != [0]:
            raise ConfigError(
                "config key 'loader_workers': synthetic data has no loader; use [0] (or data: {kind: images})"
            )
        return
    if 0 in workers:
        raise ConfigError("config key 'loader_workers': image data needs at least 1 loader worker per rank")
    if data.get("path") and not resolve(data["path"]).is_dir():
        raise ConfigError(
            f"config key 'data.path': {data['path']} is not a folder (expected an ImageNet-style "
            "<path>/<class>/<image>.jpg tree)"
        )
    ranks = max(config["nodes"]) * max(config["ranks_per_node"])
    if data.get("shards", DATA_SHARDS) < ranks:
        raise ConfigError(
            f"config key 'data.shards': {data.get('shards', DATA_SHARDS)} TFRecord shards for up to "
            f"{ranks} ranks; each rank reads whole shards, so give at least {ranks}"
        )


def dataset_folder(config):
    """The prepared image set's folder (None for synthetic data), shared by every study asking for the same images."""
    data = config["data"]
    if data["kind"] == "synthetic":
        return None
    cache = resolve(data.get("cache", "data"))
    if data.get("path"):
        source = str(resolve(data["path"]).resolve())
        key = f"tree-{Path(source).name}-{hashlib.sha256(source.encode()).hexdigest()[:12]}"
    else:
        key = f"generated-n{data.get('images', 1000)}-c{config['classes']}-s{config['seed']}"
    return cache / f"{key}-shards{data.get('shards', DATA_SHARDS)}-{data.get('on_corrupt', 'fail')}"


def study_config():
    """The study folder's own config (None where it has none, or where it is the package's defaults)."""
    own = Path(STUDY_CONFIG)
    return own if own.is_file() and not own.resolve().samefile(DEFAULT_CONFIG) else None


def study_template(sources):
    """A study's config/config.yaml: the defaults, or the shipped configs `sources` over them (merged in order)."""
    known = paths.shipped_configs()
    unknown = [s for s in sources if s not in known]
    if unknown:
        raise ConfigError(f"no shipped config {', '.join(unknown)}; shipped: {', '.join(known)}")
    if not sources:
        head = "# This study's config: the package's defaults, every key. Change what this study needs;"
        return f"{head}\n# a key removed takes its default (docs/reference/config.md).\n\n" + DEFAULT_CONFIG.read_text()
    head = f"# This study's config: {' + '.join(sources)} (shipped configs) over the package's defaults;\n"
    head += "# a key not here takes its default (docs/reference/config.md).\n\n"
    if len(sources) == 1:
        return head + known[sources[0]].read_text()
    merged = {}
    for name in sources:
        merge_into(merged, _read(known[name]))
    return head + yaml.safe_dump(merged, sort_keys=False)


def _read(path):
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    config = yaml.safe_load(path.read_text())
    if not isinstance(config, dict):
        raise ConfigError(f"config file {path} does not hold a mapping of keys")
    return config


def layered(configfiles=(), items=()):
    """The config Snakemake builds for `--configfile F... --config KEY=VALUE...`, so the CLI sees what runs."""
    from snakemake.cli import parse_config  # deferred: half a second to import, and only the CLI merges items

    config = _read(DEFAULT_CONFIG)
    for path in [study_config(), *configfiles] if study_config() else configfiles:
        merge_into(config, _read(path))
    try:
        merge_into(config, parse_config(list(items)))
    except ValueError as exc:
        raise ConfigError(f"--config {' '.join(items)}: {exc}") from None
    return config


def load(*configfiles, items=()):
    """The validated study config of these overlays and `--config` items (see `layered`)."""
    return validate(layered(configfiles, items))


def libraries(config, framework):
    """The communication libraries the study asks of `framework` (`allreduce_library`, else its default)."""
    return config.get("allreduce_library") or [frameworks.default_library(framework)]


def left_out(config):
    """The framework x library pairs asked for that a framework does not run, each with why (for the report)."""
    return [
        {"framework": fw, "allreduce_library": lib, "reason": frameworks.not_built(fw, lib)}
        for fw in config["framework"]
        for lib in libraries(config, fw)
        if frameworks.not_built(fw, lib)
    ]


def threads(config):
    """The study's threads per rank, as a list (the config may give one number)."""
    value = config["threads_per_rank"]
    return list(value) if isinstance(value, list) else [value]


def job_threads(config):
    """A job's threads per rank: a run's own, any other job's the study's most (worked out only here)."""
    return max(threads(config))


def matrix(config):
    """Every run of the study, as identity dicts (matrix keys plus the repeat), less `left_out`."""
    skip = {(x["framework"], x["allreduce_library"]) for x in left_out(config)}
    study = {**config, "threads_per_rank": threads(config)}
    runs = []
    for fw in config["framework"]:
        values = {**study, "framework": [fw], "allreduce_library": libraries(config, fw)}
        for combo in itertools.product(*(values[k] for k in MATRIX_KEYS), range(config["repeats"])):
            run = dict(zip(MATRIX_KEYS + ("repeat",), combo))
            if (fw, run["allreduce_library"]) not in skip:
                runs.append(run)
    return runs


def calibrations(config):
    """A contention calibration per configuration (less nodes, repeat) of 2+ ranks per node; none on GPUs."""
    if not config.get("contention", {}).get("trials") or config.get("device", "cpu") == "gpu":
        return []
    keys = ({k: v for k, v in run.items() if k not in ("nodes", "repeat")} for run in matrix(config))
    return list({paths.contention(key): key for key in keys if key["ranks_per_node"] > 1}.values())


def _through(config, lib):
    """The frameworks the study runs through library `lib`."""
    return [fw for fw in config["framework"] if lib in libraries(config, fw) and not frameworks.not_built(fw, lib)]


def native(config):
    """The frameworks the study runs through their own library (whose allreduce the sweep times)."""
    return _through(config, frameworks.NATIVE)


def horovod(config):
    """The frameworks the study runs through Horovod."""
    return _through(config, frameworks.HOROVOD)


def swept_apart(config):
    """Frameworks swept in their own Python (not the instrument): native, and Horovod's with bindings each."""
    each = config.get("allreduce_bindings", "instrument") == "each" and config.get("device", "cpu") != "gpu"
    wanted = set(native(config)) | (set(horovod(config)) if each else set())
    return [fw for fw in config["framework"] if fw in wanted and fw != instrument(config)]


def instrument(config):
    """The framework whose Horovod binding sweep and replays use (GPU: PyTorch's, the one with a GPU path)."""
    if config.get("device", "cpu") == "gpu":
        return frameworks.REFERENCE
    return frameworks.first_with("instrument", horovod(config))


def check_matrix(config):
    """A study whose every framework x library pair is left out would run nothing."""
    if not matrix(config):
        why = "; ".join(f"{x['framework']} {x['allreduce_library']}: {x['reason']}" for x in left_out(config))
        raise ConfigError(f"config key 'allreduce_library': no framework runs the libraries asked for ({why})")


def job_settings(config):
    """Every MPI job's settings, with its threads per rank and, emulated, the study's node counts."""
    settings = {k: config.get(k) for k in JOB_SETTINGS}
    settings["threads_per_rank"] = job_threads(config)
    if config.get("emulate"):
        settings["nodes"] = config["nodes"]
    return settings


@dataclasses.dataclass(frozen=True)
class JobPlan:
    """How every MPI job of the study runs, resolved once by `job_plan` (defaults: a bench script's mpirun)."""

    threads_per_rank: int = 1
    launcher: dict = dataclasses.field(default_factory=lambda: {"name": "mpirun"})
    hostfile: str = None
    emulate: dict = None
    study_nodes: tuple = ()  # the study's node counts: the largest fixes each emulated node's CPUs
    device: str = "cpu"
    autotune: bool = True
    tf32: bool = False
    timeout_s: float = None  # run_timeout_s: a job past it is killed


def job_plan(settings):
    """The JobPlan of the study config or a rule's settings (`job_settings`, with its run_timeout_s)."""
    return JobPlan(
        threads_per_rank=job_threads(settings),
        launcher=settings["launcher"],
        study_nodes=tuple(settings.get("nodes") or ()),
        device=settings.get("device") or "cpu",
        timeout_s=settings["run_timeout_s"],
        **{k: settings[k] for k in ("hostfile", "emulate", "autotune", "tf32") if k in settings},  # else the defaults
    )


def run_settings(config):
    """What the `run` rule hands a run besides its identity."""
    return {**job_settings(config), **{k: config.get(k) for k in RUN_SETTINGS}}


def sweep_settings(config):
    """What the `allreduce` rule hands a sweep besides the job settings."""
    keys = ("allreduce_max_bytes", "framework", "allreduce_library", "allreduce_bindings")
    return {**job_settings(config), **{k: config.get(k) for k in keys}}


def dataset_settings(config):
    """What the `dataset` rule hands the image preparation."""
    return {k: config[k] for k in ("data", "classes", "seed")}


def replay_settings(config):
    """What the `replay` rule hands a replay (its plans are an input)."""
    keys = ("framework", "allreduce_library")
    return {**job_settings(config), "replay": config["replay"], **{k: config.get(k) for k in keys}}


def title(config, configfiles):
    """The config's `title`, else the first config file given (not the defaults or the study's), else the folder's."""
    if config.get("title"):
        return config["title"]
    read = {DEFAULT_CONFIG.resolve(), Path(STUDY_CONFIG).resolve()}
    given = [Path(f) for f in configfiles if Path(f).resolve() not in read]
    if given:
        return f"dlscale: {given[0].stem}"
    return f"dlscale: {Path.cwd().name}" if study_config() else "dlscale: the default study"
