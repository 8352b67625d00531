"""Layer 6, hardware: GPU models as data, divisor constraints, configuration / clock / overlap tables (§5-6).

* :mod:`~napkin_cat.hardware.model`: GPU models (TOML files with units; ``load(name_or_path)``);
* :mod:`~napkin_cat.hardware.cpu`: CPU models (their caches; ``load_cpu(name_or_path)``, ``this_cpu()`` from sysfs);
* :mod:`~napkin_cat.hardware.toy`: the toy hierarchies of §5 (levels, pools, what each level offers);
* :mod:`~napkin_cat.hardware.divisors`: coalescing, tensor-core shapes, warpgroup multiples (step 4);
* :mod:`~napkin_cat.hardware.configured`: an algorithm configured for a toy hierarchy (steps 3-5: recoloured,
  piped through SMEM, relabelled per unit, split, buffered): ``configure()`` runs the lowering passes of
  :mod:`napkin_cat.plan.lowering` and returns the plan and its variables;
* :mod:`~napkin_cat.hardware.config`: Tables 1-2 (bytes per block / warpgroup, ``N_max``);
* :mod:`~napkin_cat.hardware.clock`: Table 3 (clocks per thread, ``k_TC``, the ``g_q`` threshold, ideal FLOP/s);
* :mod:`~napkin_cat.hardware.overlap`: warpgroup schedules and utilisation (§5.7, §6);
* :mod:`~napkin_cat.hardware.intensity`: matmul arithmetic intensity per level (Appendix A.4);
* :mod:`~napkin_cat.hardware.predict`: predicted time (bytes, FLOPs by pipeline, waves; §5.7);
* :mod:`~napkin_cat.hardware.timed`: tiles and variant by predicted time on a GPU model;
* :mod:`~napkin_cat.hardware.structures`: the structures both time models time (the transfer search at the
  memories their tiles fit and above, up to one holding f's inputs and outputs);
* :mod:`~napkin_cat.hardware.cputime`: predicted time on a CPU model (cache traffic, each contraction's rate by its
  tile shape) and tiles and variant by it;
* :mod:`~napkin_cat.hardware.link`: links between GPUs as data (NVLink, PCIe, InfiniBand; ``load_link(name)``);
* :mod:`~napkin_cat.hardware.devices`: the device level: P GPUs joined by links (``cluster(gpu, devices=P, link=...)``);
* :mod:`~napkin_cat.hardware.linktime`: the link's time from the cost's per-device counts, and a cluster's
  predicted time (``predict_cluster``: compute per trip and link time, a ring's transfer overlapped);
* :mod:`~napkin_cat.hardware.programtime`: a device program's predicted time, its traffic read from its cost
  (``predict_program``);
* :mod:`~napkin_cat.hardware.clustered`: the device form of least predicted step time on a cluster
  (``derive_for_cluster``: the forms the device rules make, each device's program timed by the GPU model, the link
  by the cluster's, each device's memory a constraint); :mod:`~napkin_cat.hardware.clustersweep`: that choice
  swept over a size (``sweep``: each form's time, where the choice changes); :mod:`~napkin_cat.hardware.arrival`:
  the gather a one-device form pays where its inputs arrive sharded (``gathered``);
* :mod:`~napkin_cat.hardware.objective`: ``nc.derive`` (transfers at a memory, or with ``hardware=`` a GPU or CPU
  model's predicted time, or a cluster's).

Every table has ``to_text()`` and ``to_json()``.

>>> import napkin_cat as nc
>>> nc.hardware.load("h100-sxm5").sm_count
132

May import: every layer up to plan and search.
"""
from napkin_cat.hardware.errors import CapacityError, DivisorError, HardwareError, ScheduleError
from napkin_cat.hardware.model import GPU, load, models
from napkin_cat.hardware.cpu import CPU, cpus, load_cpu, this_cpu, this_cpu_model, this_cpu_name
from napkin_cat.hardware.toy import check_offers, hierarchy_of, load_hierarchy, placement
from napkin_cat.hardware.divisors import ArrayUse, MatmulUse, constraints, uses_of
from napkin_cat.hardware.config import Variable, config_table
from napkin_cat.hardware.configured import Configured, configure
from napkin_cat.hardware.clock import OpRecord, clock_table, clock_table_of
from napkin_cat.hardware.overlap import Task, inter, intra, overlap_table, sequential, simulate
from napkin_cat.hardware.intensity import matmul_intensity
from napkin_cat.hardware.predict import KernelTime, Prediction, predict
from napkin_cat.hardware.timed import derive_for_time
from napkin_cat.hardware.cputime import derive_for_cpu_time, predict_cpu
from napkin_cat.hardware.link import Link, links, load_link
from napkin_cat.hardware.devices import Cluster, cluster
from napkin_cat.hardware.linktime import ClusterPrediction, Phase, Traffic, link_time, predict_cluster
from napkin_cat.hardware.programtime import predict_program
from napkin_cat.hardware.clustered import ClusterCandidate, ClusterDerivation, derive_for_cluster
from napkin_cat.hardware.clustersweep import ClusterSweep, sweep

__all__ = ["HardwareError", "DivisorError", "CapacityError", "ScheduleError", "GPU", "load", "models",
           "CPU", "cpus", "load_cpu", "this_cpu", "this_cpu_model", "this_cpu_name", "predict_cpu",
           "derive_for_cpu_time",
           "load_hierarchy", "hierarchy_of", "placement", "check_offers", "ArrayUse", "MatmulUse", "constraints",
           "uses_of", "Variable", "config_table", "Configured",
           "configure", "OpRecord", "clock_table", "clock_table_of", "Task", "sequential",
           "intra", "inter", "simulate", "overlap_table", "matmul_intensity", "predict", "Prediction",
           "KernelTime", "derive_for_time", "Link", "links", "load_link", "Cluster", "cluster", "Traffic", "Phase",
           "link_time", "predict_cluster", "ClusterPrediction", "predict_program", "derive_for_cluster",
           "ClusterDerivation", "ClusterCandidate", "sweep", "ClusterSweep"]
