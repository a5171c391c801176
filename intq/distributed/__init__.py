"""intq.distributed — calibration, evaluation, comparison and search on a Ray cluster, with the
results of one process, bit for bit.

An optional extra (``pip install 'intq[ray]'``), never needed on one machine: ``import
intq.distributed`` does not import Ray; connecting does.

* :func:`connect` / :class:`Cluster` — an existing cluster (``"HOST:PORT"``, ``"ray://HOST:PORT"``,
  ``"auto"``) or a private local one (``workers=N``); an address that cannot be reached is a
  :class:`ClusterError` naming it;
* :func:`intq.distributed.shards.run_sharded` — the data streamed from this machine in shards of
  whole runs to actors that hold the models once (:mod:`intq.distributed.workers`), each shard run
  by a shard function of the package that owns the computation, the results merged in data order
  (calibration: :mod:`intq.calibration.sharded`; evaluation and comparison:
  :mod:`intq.analysis.sharded`); a worker killed mid-run is restarted and its shards retried, with
  the same result;
* :meth:`Cluster.map` — independent tasks (the candidates of ``target_sqnr``, sensitivity's
  layers, AdaRound's layers, the per-tensor range searches) in parallel, results in order.

``intq.calibrate``, ``intq.quantize``, :func:`intq.analysis.evaluate.evaluate`,
:func:`intq.analysis.compare` and :func:`intq.analysis.sensitivity.sensitivity` take
``cluster=`` / ``workers=`` and come here; the command line takes ``--cluster ADDRESS`` /
``--workers N``. This package knows nothing of calibration or analysis (they use it, DESIGN's
package table). docs/scale.md says how to point intq at a cluster and what runs where.
"""

from importlib import import_module

#: public name -> the module that defines it (imported on first use: ``import intq.distributed``
#: imports neither Ray nor the workers)
_LAZY = {"Cluster": "cluster", "ClusterError": "cluster", "connect": "cluster", "with_cluster": "cluster",
         "session": "cluster", "parallel_map": "cluster"}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(f"intq.distributed.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'intq.distributed' has no attribute {name!r}")

