"""A real two-node Ray cluster on this machine, shared by the distributed tests of a session
(:func:`intq.testing.ray_cluster.local_cluster`: ``ray start --head`` on 127.0.0.1 with a free port
and a second ``ray start --address`` node, 1 CPU and an 80 MB object store each, no dashboard, token
authentication from the environment; ended process by process at the end of the session)."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("ray") is None:  # not imported here: Ray reads its authentication settings on import
    pytest.skip("Ray is not installed (pip install 'intq[ray]'; the test extras install it)", allow_module_level=True)


class RayCluster:
    """The running cluster: its ``address`` and this process's :class:`intq.distributed.Cluster` on it."""

    def __init__(self, address: str, cluster):
        self.address, self.cluster = address, cluster


@pytest.fixture(scope="session")
def ray_cluster():
    from intq.distributed import connect
    from intq.testing.ray_cluster import RayStartError, local_cluster, ray_command, wait_for_nodes

    if ray_command() is None:
        pytest.skip("the `ray` command is not installed next to this Python")
    try:
        with local_cluster(nodes=2, cpus=1) as address:
            cluster = connect(address)
            wait_for_nodes(2)
            yield RayCluster(address, cluster)
            cluster.close()
    except RayStartError as e:
        pytest.fail(str(e))
