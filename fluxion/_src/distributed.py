"""`fluxion.distributed`: several processes on jaxlib's distributed runtime (a coordination
service in process 0, a client in every process) with gloo collectives between CPU clients."""
from __future__ import annotations

import atexit
import os
import re

from fluxion._src.compiler import backend

_state: dict = {}
_exit_hook = False  # shutdown() registered with atexit
DEFAULT_PORT = 8476


def _auto_detect():
    """(coordinator_address, num_processes, process_id) from SLURM or Open MPI, else Nones."""
    env = os.environ
    if "SLURM_JOB_ID" in env and "SLURM_NTASKS" in env and "SLURM_PROCID" in env:
        nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", "localhost")
        first = nodes.split(",")[0]
        m = re.match(r"([^\[]+)\[(\d+)", first)  # node[001-004] -> node001
        host = m.group(1) + m.group(2) if m else first
        port = DEFAULT_PORT + int(env.get("SLURM_JOB_ID", "0")) % 1000
        return f"{host}:{port}", int(env["SLURM_NTASKS"]), int(env["SLURM_PROCID"])
    if "OMPI_COMM_WORLD_SIZE" in env and "OMPI_COMM_WORLD_RANK" in env:
        uri = env.get("OMPI_MCA_orte_hnp_uri") or env.get("PMIX_SERVER_URI2", "")
        m = re.search(r"tcp://([^,:;]+)", uri)
        host = m.group(1) if m else "127.0.0.1"
        return (f"{host}:{DEFAULT_PORT}", int(env["OMPI_COMM_WORLD_SIZE"]),
                int(env["OMPI_COMM_WORLD_RANK"]))
    return None, None, None


def _check_port_free(address: str) -> None:
    """Raise a RuntimeError if the coordinator's port is taken (jaxlib would crash)."""
    import socket
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        try:
            s.bind(("" if host in ("0.0.0.0", "[::]") else host, int(port)))
        except OSError as e:
            raise RuntimeError(f"cannot start the coordination service at {address}: the port "
                               f"is in use or the address is not this machine's ({e})") from None


def _wait_for_coordinator(address: str, timeout: float) -> None:
    """Raise a RuntimeError if nothing listens at `address` within `timeout` seconds.

    jaxlib's client aborts the whole process when it cannot register, so check first."""
    import socket
    import time
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return
        except OSError as e:
            if time.monotonic() >= deadline:
                raise RuntimeError(f"could not connect to the coordinator at {address} within "
                                   f"{timeout} s (wrong address, or process 0 not started): "
                                   f"{e}") from None
            time.sleep(0.2)


def _check_arguments(coordinator_address, num_processes, process_id, local_device_ids):
    """Fail before any service starts: bad arguments must not reach jaxlib."""
    host, _, port = str(coordinator_address).rpartition(":")
    if not isinstance(coordinator_address, str) or not host or not port.isdigit():
        raise ValueError(f"coordinator_address must be 'host:port', got {coordinator_address!r}")
    for name, value in (("num_processes", num_processes), ("process_id", process_id)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if not 0 <= process_id < num_processes:
        raise ValueError(f"process_id={process_id} is not in [0, num_processes={num_processes})")
    if local_device_ids is not None:
        ids = [local_device_ids] if isinstance(local_device_ids, int) else local_device_ids
        if isinstance(ids, str) or not all(isinstance(i, int) for i in ids):
            raise TypeError(f"local_device_ids must be an int or a sequence of ints, got "
                            f"{local_device_ids!r}")


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids=None,
               initialization_timeout: int = 300, heartbeat_timeout_seconds: int = 100):
    """Join a multi-process run; call before any fluxion computation.

    Process 0 hosts the coordination service at `coordinator_address` ("host:port"); every
    process connects to it and its CPU client then exchanges collectives with the others
    through gloo. Under SLURM or Open MPI the three main arguments are read from the
    environment when omitted."""
    if _state:
        raise RuntimeError("distributed.initialize should only be called once.")
    if backend._backends:
        raise RuntimeError("distributed.initialize() must be called before any fluxion "
                           "computations are executed.")
    detected = _auto_detect()
    coordinator_address = coordinator_address or detected[0]
    num_processes = num_processes if num_processes is not None else detected[1]
    process_id = process_id if process_id is not None else detected[2]
    if coordinator_address is None or num_processes is None or process_id is None:
        raise ValueError("coordinator_address, num_processes and process_id must be given "
                         "(no SLURM or Open MPI environment was detected)")
    _check_arguments(coordinator_address, num_processes, process_id, local_device_ids)
    _, jax_ext = backend._jaxlib()
    service = None
    if process_id == 0:
        _check_port_free(coordinator_address)
        try:
            service = jax_ext.get_distributed_runtime_service(
                coordinator_address, num_processes, heartbeat_timeout=heartbeat_timeout_seconds,
                shutdown_timeout=30)
        except Exception as e:
            raise RuntimeError(f"could not start the coordination service at "
                               f"{coordinator_address} (port in use or bad address?): {e}") from None
    if process_id != 0:
        _wait_for_coordinator(coordinator_address, initialization_timeout)
    client = jax_ext.get_distributed_runtime_client(
        coordinator_address, process_id, init_timeout=initialization_timeout,
        heartbeat_timeout=heartbeat_timeout_seconds, shutdown_timeout=30, use_compression=True)
    try:
        client.connect()
    except Exception as e:
        if service is not None:
            service.shutdown()
        raise RuntimeError(f"process {process_id} could not connect to the coordinator at "
                           f"{coordinator_address} within {initialization_timeout} s: {e}") from None
    host = coordinator_address.rsplit(":", 1)[0]
    hostname = "127.0.0.1" if host in ("localhost", "127.0.0.1") else None
    collectives = jax_ext.make_gloo_tcp_collectives(distributed_client=client, hostname=hostname)
    _state.update(service=service, client=client, process_id=process_id,
                  num_processes=num_processes, collectives=collectives,
                  local_device_ids=local_device_ids)
    backend.distributed_options = dict(distributed_client=client, node_id=process_id,
                                       num_nodes=num_processes, collectives=collectives)
    global _exit_hook
    if not _exit_hook:
        # Leave cleanly at exit: a client outliving its service aborts the process.
        atexit.register(shutdown)
        _exit_hook = True


def shutdown():
    """Leave the multi-process run (a barrier with the other processes, then disconnect)."""
    if not _state:
        return
    client, service = _state["client"], _state["service"]
    try:
        client.shutdown()
    finally:
        if service is not None:
            service.shutdown()
        _state.clear()
        backend.distributed_options = None


def is_initialized() -> bool:
    return bool(_state)
