import os
import subprocess
import sys

import pytest
import yaml

from dlscale.core import paths
from dlscale.runtime import config as cfg
from dlscale.runtime import hosts, launch
from tests import test_shipped_configs as shipped
from tests.conftest import EMULATION, ENV_RECORD, ROOT, WHY_NO_EMULATION


def test_default_config_is_valid(base_config):
    cfg.validate(base_config)
    runs = cfg.matrix(base_config)
    assert len(runs) == 4 * 2 * 2 * 3  # frameworks x models x ranks_per_node x repeats
    assert runs[0] == {
        "framework": "torch",
        "model": "alexnet",
        "allreduce_schedule": "overlap",
        "allreduce_library": "horovod",
        "layout": "best",
        "timing": "native",
        "nodes": 1,
        "ranks_per_node": 1,
        "batch_size": 8,
        "loader_workers": 1,
        "threads_per_rank": 1,
        "repeat": 0,
    }
    assert paths.run_path(runs[0]) == "torch/alexnet/overlap/horovod/best/native/nodes1_rpn1_bs8_lw1_t1/repeat0"
    assert base_config["data"]["kind"] == "images"  # the io phase reads and decodes JPEGs
    assert base_config["launcher"]["env"] == {"OMPI_MCA_mpi_yield_when_idle": 1}  # no busy-polling contention


def test_threads_per_rank_is_a_number_or_a_study_dimension(base_config, tmp_path):
    """One 2-thread rank against two 1-thread ranks: each run has its threads in its identity and
    its folder, and its ranks get them."""
    base_config.update(framework=["torch"], model=["alexnet"], repeats=1, threads_per_rank=[1, 2])
    cfg.validate(base_config)
    runs = cfg.matrix(base_config)
    assert sorted((r["ranks_per_node"], r["threads_per_rank"]) for r in runs) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert len({paths.run_path(r) for r in runs}) == 4
    two = next(r for r in runs if r["threads_per_rank"] == 2)
    base_config.update(results=str(tmp_path / "results"), logs=str(tmp_path / "logs"))
    p = launch.plan(base_config, two, ENV_RECORD)
    assert p.rank_env["OMP_NUM_THREADS"] == "2" and p.spec["threads_per_rank"] == 2
    base_config["threads_per_rank"] = 2  # one number: every run has it
    assert {r["threads_per_rank"] for r in cfg.matrix(cfg.validate(base_config) or base_config)} == {2}
    for bad in ([], [1, 1], [0], "2"):
        with pytest.raises(cfg.ConfigError, match="threads_per_rank"):
            cfg.validate({**base_config, "threads_per_rank": bad})


def test_layout_and_timing_are_study_dimensions(base_config):
    base_config.update(layout=["NCHW", "NHWC"], timing=["native", "phased"], framework=["torch"], model=["resnet50"])
    runs = cfg.matrix(base_config)
    assert len(runs) == 2 * 2 * 2 * 3
    assert {(r["layout"], r["timing"]) for r in runs} == {
        ("NCHW", "native"),
        ("NCHW", "phased"),
        ("NHWC", "native"),
        ("NHWC", "phased"),
    }
    base_config["layout"] = ["nchw"]
    with pytest.raises(cfg.ConfigError, match="config key 'layout\\[0\\]': 'nchw' is not one of"):
        cfg.validate(base_config)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("framework", ["torch", "caffe"], "config key 'framework[1]': 'caffe' is not one of"),
        ("framework", [], "config key 'framework': [] should be non-empty"),
        ("model", ["vgg16"], "config key 'model[0]': 'vgg16' is not one of"),
        ("ranks_per_node", [0], "config key 'ranks_per_node[0]': 0 is less than the minimum of 1"),
        ("batch_size", [-8], "config key 'batch_size[0]': -8 is less than the minimum of 1"),
        ("repeats", 0, "config key 'repeats': 0 is less than the minimum of 1"),
        ("iterations", "ten", "config key 'iterations': 'ten' is not of type 'integer'"),
        ("image_size", 32, "config key 'image_size': 32 is less than the minimum of 64"),
        ("emulate", {"rate_mbit": 0}, "config key 'emulate.rate_mbit': 0 is less than or equal to the minimum of 0"),
        ("emulate", {"delay_ms": 1}, "config key 'emulate': 'rate_mbit' is a required property"),
        ("extrapolate", {"max_ranks": 1024, "links": {}}, "config key 'extrapolate.links': {} should be non-empty"),
        (
            "extrapolate",
            {"max_ranks": 8, "links": {"ib": {"gbit_s": 56}}},
            "config key 'extrapolate.links.ib': 'latency_us' is a required property",
        ),
        (
            "launcher",
            {"name": "mpirun", "env": {"X; touch p": 1}},
            "config key 'launcher.env': 'X; touch p' does not match '^[A-Za-z_][A-Za-z0-9_]*$'",
        ),
        ("launcher", {"name": "mpirun", "env": {"2X": 1}}, "config key 'launcher.env': '2X' does not match"),
    ],
)
def test_schema_errors_name_the_key(base_config, key, value, message):
    base_config[key] = value
    with pytest.raises(cfg.ConfigError) as err:
        cfg.validate(base_config)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    "data, workers, message",
    [
        ({"kind": "synthetic"}, [1], "config key 'loader_workers': synthetic data has no loader; use [0]"),
        ({"kind": "images"}, [0, 2], "config key 'loader_workers': image data needs at least 1 loader worker"),
        ({"kind": "images", "path": "no/such/folder"}, [1], "config key 'data.path': no/such/folder is not a folder"),
        ({"kind": "images", "shards": 1}, [1], "config key 'data.shards': 1 TFRecord shards for up to 2 ranks"),
        ({"kind": "photos"}, [1], "config key 'data.kind': 'photos' is not one of"),
        ({"kind": "images", "on_corrupt": "ignore"}, [1], "config key 'data.on_corrupt': 'ignore' is not one of"),
    ],
)
def test_data_and_loader_workers_are_checked(base_config, data, workers, message):
    base_config.update(data=data, loader_workers=workers)
    with pytest.raises(cfg.ConfigError) as err:
        cfg.validate(base_config)
    assert str(err.value).startswith(message)


def test_the_prepared_images_are_shared_by_recipe(base_config, tmp_path):
    folder = cfg.dataset_folder(base_config)
    assert folder.parent == ROOT / "data" and "n256-c1000-s0" in folder.name
    assert cfg.dataset_folder({**base_config, "seed": 1}) != folder
    assert cfg.dataset_folder({**base_config, "results": "elsewhere"}) == folder
    assert cfg.dataset_folder({**base_config, "data": {"kind": "synthetic"}}) is None
    mine = cfg.dataset_folder({**base_config, "data": {"kind": "images", "path": str(tmp_path)}})
    assert mine.name.startswith(f"tree-{tmp_path.name}-")


def test_unknown_key_is_named(base_config):
    base_config["batchsize"] = [8]
    with pytest.raises(cfg.ConfigError, match="'batchsize' was unexpected"):
        cfg.validate(base_config)


def test_a_key_renamed_in_0_3_is_refused_naming_its_new_name(base_config, tmp_path):
    """`comm` and `comm_library` are `allreduce_schedule` and `allreduce_library` since 0.3.0: a config
    with the old words is refused naming the new ones, alone or in an overlay of the default config."""
    with pytest.raises(cfg.ConfigError, match="config key 'comm' was renamed 'allreduce_schedule' in 0.3.0"):
        cfg.validate({**base_config, "comm": ["overlap"]})
    overlay = tmp_path / "old.yaml"
    overlay.write_text("comm: [sequential]\ncomm_library: [horovod]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "dlscale", "check-config", str(overlay)], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode != 0
    assert "'comm' was renamed 'allreduce_schedule'" in proc.stderr
    assert "'comm_library' was renamed 'allreduce_library'" in proc.stderr


def test_missing_key_is_named(base_config):
    del base_config["hostfile"]
    with pytest.raises(cfg.ConfigError, match="'hostfile' is a required property"):
        cfg.validate(base_config)


def test_missing_hostfile(base_config, tmp_path):
    base_config["hostfile"] = str(tmp_path / "nope")
    with pytest.raises(cfg.ConfigError, match=r"config key 'hostfile': file .*nope does not exist"):
        cfg.validate(base_config)


def test_more_ranks_than_slots(base_config):
    base_config["ranks_per_node"] = [1, 4]
    with pytest.raises(
        cfg.ConfigError,
        match=r"config key 'ranks_per_node': 4 ranks per node .* "
        r"fewer slots on localhost \(2 slots\)",
    ):
        cfg.validate(base_config)


def test_more_nodes_than_hosts(base_config):
    base_config["nodes"] = [1, 2]
    with pytest.raises(
        cfg.ConfigError, match="config key 'nodes': 2 nodes asked for, but hostfiles/localhost lists 1 host"
    ):
        cfg.validate(base_config)


def test_hostfile_parsing(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# cluster\nnode01 slots=4\n\nnode02 slots=4 max_slots=8  # comment\nnode03\n")
    assert hosts.parse_hostfile(path) == [("node01", 4), ("node02", 4), ("node03", 1)]
    assert hosts.select_hosts(hosts.parse_hostfile(path), 2, 4) == ["node01", "node02"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("node01 slots=four\n", r"hosts:1: cannot read 'slots=four'"),
        ("node01 slots=2\nnode02 cpus=2\n", r"hosts:2: cannot read 'cpus=2'"),
        ("node01 slots=0\n", r"hosts:1: slots must be at least 1"),
        ("node01\nnode01\n", r"hosts:2: host 'node01' is listed twice"),
        ("# nothing\n", r"hosts: no hosts listed"),
    ],
)
def test_hostfile_errors(tmp_path, text, message):
    path = tmp_path / "hosts"
    path.write_text(text)
    with pytest.raises(cfg.ConfigError, match=message):
        hosts.parse_hostfile(path)


def test_shipped_cluster_example_parses():
    listed = hosts.parse_hostfile(ROOT / "hostfiles" / "example-4x4")
    assert listed == [(f"node0{i}", 4) for i in range(1, 5)]


def test_emulated_study_config_is_valid_where_clusters_can_be_made(base_config):
    import yaml

    from tests.conftest import ROOT

    base_config.update(yaml.safe_load((ROOT / "config" / "emulated.yaml").read_text()))
    base_config["hostfile"] = "no/such/hostfile"  # an emulated study does not read it
    if not EMULATION:
        with pytest.raises(cfg.ConfigError, match=f"config key 'emulate': {WHY_NO_EMULATION}"):
            cfg.validate(base_config)
        return
    cfg.validate(base_config)
    runs = cfg.matrix(base_config)
    assert len(runs) == 3 * 3 * 2 * 2 * 5  # frameworks x models x comm modes x nodes x repeats
    assert {r["nodes"] for r in runs} == {1, 2} and {r["allreduce_schedule"] for r in runs} == {"overlap", "sequential"}
    assert cfg.replay_nodes(base_config) == [4, 8, 16]
    base_config["emulate"]["congestion_control"] = "nosuch"
    with pytest.raises(
        cfg.ConfigError, match="config key 'emulate.congestion_control': 'nosuch' is not in this kernel"
    ):
        cfg.validate(base_config)


def test_replay_needs_its_one_rank_runs_and_its_hosts(base_config):
    base_config["replay"] = {"nodes": [2], "models": ["alexnet"], "iterations": 5, "warmup": 1}
    with pytest.raises(
        cfg.ConfigError, match="config key 'nodes': 2 nodes asked for, but hostfiles/localhost lists 1 host"
    ):
        cfg.validate(base_config)  # replayed on the hostfile's first 2 hosts
    base_config["model"] = ["resnet50"]
    with pytest.raises(cfg.ConfigError, match=r"'replay.models': alexnet not in the study's models \(resnet50\)"):
        cfg.validate(base_config)
    base_config.update(model=["alexnet"], ranks_per_node=[2])
    with pytest.raises(cfg.ConfigError, match="'replay': replays the study's 1-rank runs"):
        cfg.validate(base_config)
    base_config["replay"]["nodes"] = [1]
    with pytest.raises(cfg.ConfigError, match=r"config key 'replay.nodes\[0\]': 1 is less than the minimum of 2"):
        cfg.validate(base_config)


def test_a_replay_of_a_study_that_runs_nothing_through_horovod_is_refused(base_config):
    base_config.update(framework=["torch", "jax"], model=["alexnet"], allreduce_library=["native"])
    base_config["replay"] = {"nodes": [2], "models": ["alexnet"], "iterations": 5, "warmup": 1}
    with pytest.raises(cfg.ConfigError, match="'replay': replays the gradients of the study's Horovod runs"):
        cfg.check_replay(base_config)
    base_config["allreduce_library"] = ["native", "horovod"]
    cfg.check_replay(base_config)


@pytest.mark.parametrize(
    "framework, library, device, binding",
    [
        (["jax", "mxnet", "tensorflow"], None, "cpu", "tensorflow"),  # the registry's order
        (["jax", "mxnet", "torch"], None, "cpu", "torch"),  # the reference, where the study runs it
        (["torch", "jax"], ["native"], "cpu", None),  # nothing through Horovod: no binding
        (["mxnet"], None, "gpu", "torch"),  # PyTorch's binding alone has a GPU path
    ],
)
def test_the_sweeps_binding_is_that_of_a_framework_the_study_runs_through_horovod(
    base_config, framework, library, device, binding
):
    base_config.update(framework=framework, device=device)
    if library:
        base_config["allreduce_library"] = library
    assert cfg.instrument(base_config) == binding


def test_srun_study_does_not_read_the_hostfile(base_config):
    base_config["launcher"].update(name="srun", mpi="pmix")
    base_config["hostfile"] = "no/such/hostfile"
    cfg.validate(base_config)
    base_config["launcher"]["name"] = "qsub"
    with pytest.raises(cfg.ConfigError, match="config key 'launcher.name': 'qsub' is not one of"):
        cfg.validate(base_config)


def test_mixed_precision_on_the_cpu_stops_the_study(base_config):
    with pytest.raises(cfg.ConfigError, match="config key 'precision': mixed needs device gpu"):
        cfg.validate({**base_config, "precision": "mixed"})


def test_gpu_study_in_the_cpu_environment_is_warned_about_not_refused(base_config, monkeypatch):
    # its runs fail, each saying why, and the tables are made (tests/test_shipped_configs.py)
    monkeypatch.delenv("DLSCALE_ENV_VARIANT", raising=False)
    conf = cfg.validate({**base_config, "device": "gpu"})
    (warning,) = cfg.warnings(conf)
    assert (
        warning.startswith("config key 'device': gpu runs need the cuda environment")
        and "DLSCALE_ENV_VARIANT=cuda" in warning
    )
    monkeypatch.setenv("DLSCALE_ENV_VARIANT", "cuda")
    assert cfg.warnings(cfg.validate({**base_config, "device": "gpu", "precision": "mixed"})) == []
    assert cfg.warnings(base_config) == []


def test_gpu_config_is_valid_in_the_cuda_environment(base_config, monkeypatch):
    monkeypatch.setenv("DLSCALE_ENV_VARIANT", "cuda")
    gpu = cfg.load(cfg.resolve("config/gpu.yaml"))
    assert (gpu["device"], gpu["image_size"], len(cfg.matrix(gpu))) == ("gpu", 224, 3 * 3 * 2 * 3)  # x 2 loader_workers


OVERLAYS = sorted(p.name for p in (ROOT / "config").glob("*.yaml") if p.name not in ("config.yaml", "schema.yaml"))
CHAINS = shipped.OVERLAYS


def test_overlays_are_layered_on_the_default_config_as_snakemake_layers_them(tmp_path):
    # Snakemake reads config/config.yaml, then each --configfile, then --config, merging nested keys
    mine = tmp_path / "mine.yaml"
    mine.write_text("data: {images: 64}\nlauncher: {env: {UCX_TLS: rc}}\nrepeats: 2\n")
    conf = cfg.layered([cfg.resolve("config/loader.yaml"), mine], ["iterations=7", "results=out/x"])
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    loader = yaml.safe_load((ROOT / "config" / "loader.yaml").read_text())
    assert conf["data"] == {**default["data"], **loader["data"], "images": 64}
    assert conf["launcher"]["env"] == {**default["launcher"]["env"], "UCX_TLS": "rc"}
    assert conf["launcher"]["name"] == default["launcher"]["name"]
    assert (conf["repeats"], conf["iterations"], conf["results"]) == (2, 7, "out/x")
    assert conf["model"] == loader["model"] and conf["extrapolate"] == default["extrapolate"]
    with pytest.raises(cfg.ConfigError, match="does not exist"):
        cfg.layered([tmp_path / "nope.yaml"])


@pytest.mark.slow
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_check_config_takes_every_shipped_overlay(overlay, monkeypatch):

    conf = yaml.safe_load((ROOT / "config" / overlay).read_text())
    if conf.get("emulate") and not EMULATION:
        pytest.skip(f"{overlay}: {WHY_NO_EMULATION}")
    files = CHAINS.get(overlay, [f"config/{overlay}"])  # an overlay on another shipped study, checked over it
    proc = subprocess.run(
        [sys.executable, "-m", "dlscale", "check-config", *files], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"config/config.yaml + {' + '.join(files)}: ok, ")
    if conf.get("device") == "gpu" and os.environ.get("DLSCALE_ENV_VARIANT") != "cuda":
        assert "warning: config key 'device': gpu runs need the cuda environment" in proc.stdout


@pytest.mark.slow
def test_check_config_names_the_bad_key_of_an_overlay_or_a_config_item(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("framework: [torch, caffe]\n")
    run = [sys.executable, "-m", "dlscale", "check-config"]
    proc = subprocess.run(run + [str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "config key 'framework[1]': 'caffe' is not one of" in proc.stderr
    proc = subprocess.run(run + ["--config", "repeats=0"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "config key 'repeats'" in proc.stderr


@pytest.mark.slow
def test_retry_reads_an_overlay_as_snakemake_does(tmp_path):
    # the README's example: `retry --configfile config/emulated.yaml -- --dry-run` used to fail with
    # "'autotune' is a required property": it read the overlay alone
    overlay = tmp_path / "study.yaml"
    overlay.write_text(f"results: {tmp_path / 'results'}\nranks_per_node: [1]\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dlscale",
            "retry",
            "--configfile",
            str(overlay),
            "--config",
            "repeats=1",
            "framework=torch",
            "--",
            "--dry-run",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "no failed runs matching framework=torch"


def test_framework_library_pairs_a_framework_does_not_run_are_left_out_before_anything_runs(base_config):
    """allreduce_library [horovod, native]: PyTorch runs both, MXNet Horovod only, JAX its own only; the
    pairs left out are listed with why, and a study left with nothing is refused naming the key."""
    conf = {**base_config, "framework": ["torch", "mxnet", "jax"], "allreduce_library": ["horovod", "native"]}
    cfg.validate(conf)
    pairs = {(r["framework"], r["allreduce_library"]) for r in cfg.matrix(conf)}
    assert pairs == {("torch", "horovod"), ("torch", "native"), ("mxnet", "horovod"), ("jax", "native")}
    assert len(cfg.matrix(conf)) == 4 * len(cfg.matrix({**conf, "framework": ["mxnet"]}))
    left = {(x["framework"], x["allreduce_library"]): x["reason"] for x in cfg.left_out(conf)}
    assert set(left) == {("mxnet", "native"), ("jax", "horovod")}
    assert "parameter server" in left[("mxnet", "native")] and "no JAX binding" in left[("jax", "horovod")]
    assert cfg.native(conf) == ["torch", "jax"]
    # without the key every framework runs its default, nothing is left out
    default = {k: v for k, v in conf.items() if k != "allreduce_library"}
    assert {(r["framework"], r["allreduce_library"]) for r in cfg.matrix(default)} == {
        ("torch", "horovod"),
        ("mxnet", "horovod"),
        ("jax", "native"),
    }
    assert cfg.left_out(default) == [] and cfg.native(default) == ["jax"]
    with pytest.raises(cfg.ConfigError, match="config key 'allreduce_library': no framework runs"):
        cfg.validate({**conf, "framework": ["mxnet"], "allreduce_library": ["native"]})


def test_check_config_lists_the_pairs_left_out(tmp_path):
    overlay = tmp_path / "libs.yaml"
    overlay.write_text("framework: [torch, mxnet]\nallreduce_library: [horovod, native]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "dlscale", "check-config", str(overlay)], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "left out: mxnet with native: MXNet's own distributed path is a parameter server" in proc.stdout


def test_the_sweep_times_each_frameworks_binding_apart_only_when_asked(base_config):
    """The default study: PyTorch is the instrument (its binding's paths in the sweep's first job),
    JAX's own collectives are swept apart in JAX's environment; with `allreduce_bindings: each`
    TensorFlow's and MXNet's bindings too, each in its own. A GPU sweep has PyTorch's binding only."""
    assert cfg.instrument(base_config) == "torch" and base_config["allreduce_bindings"] == "instrument"
    assert cfg.swept_apart(base_config) == ["jax"]
    each = {**base_config, "allreduce_bindings": "each"}
    assert cfg.swept_apart(each) == ["tensorflow", "mxnet", "jax"] == cfg.swept_apart(cfg.sweep_settings(each))
    assert cfg.swept_apart({**each, "device": "gpu"}) == ["jax"]
    assert cfg.swept_apart({**each, "framework": ["torch"]}) == []
    cfg.validate(each)
    with pytest.raises(cfg.ConfigError, match="config key 'allreduce_bindings': 'all' is not one of"):
        cfg.validate({**base_config, "allreduce_bindings": "all"})
