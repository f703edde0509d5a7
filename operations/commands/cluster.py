"""``radctl cluster up|status|down|start|stop|restart``: the local multi-node cluster of
:mod:`operations.cluster` (3 Kafka nodes, HDFS with 2 DataNodes, Spark standalone with 2 workers), in
the background, no containers; one node at a time with ``start|stop|restart NODE``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import typer
from rich.console import Console
from rich.table import Table

from operations.cluster import (
    ClusterError,
    LocalCluster,
    down_from_state,
    read_state,
    recorded_state,
    restart_node,
    start_node,
    state_hosts,
    stop_node,
)
from operations.host_cluster import HostCluster, host_environment
from operations.hosts import HostsError, SimulatedHosts
from radstack.config import load_settings

console = Console(highlight=False)
cluster_app = typer.Typer(help="A local multi-node cluster: Kafka ×3, HDFS NameNode + DataNodes ×2, "
                               "Spark standalone master + workers ×2.", no_args_is_help=True)  # fmt: skip

CONFIG_OPT = typer.Option(None, "--config", "-c", help="radstack.yaml to read (for radstack.home).")


def _home(config: Path | None) -> Path:
    return Path(load_settings(config).home)


@cluster_app.command("up")
def up(
    kafka_nodes: int = typer.Option(3, min=1, help="Kafka KRaft nodes (broker + controller each)."),
    datanodes: int = typer.Option(2, min=1, help="HDFS DataNodes (replication min(2, datanodes))."),
    workers: int = typer.Option(2, min=1, help="Spark standalone workers (1 core, 2 GB each)."),
    hosts: int = typer.Option(0, min=0, help="Run on this many simulated hosts (Linux namespaces, root): host 1 "
                              "a Kafka node, the NameNode, the Spark master and PostgreSQL (the metadata store); "
                              "every other host a Kafka node, a "
                              "DataNode and a worker (the node counts then follow the hosts)."),
    config: Path = CONFIG_OPT,
) -> None:
    """Start every node in the background; prints the settings file that runs radstack on it."""
    settings = load_settings(config)
    if hosts:
        _up_on_hosts(Path(settings.home), hosts)
        return
    cluster = LocalCluster(home=Path(settings.home), kafka_nodes=kafka_nodes, datanodes=datanodes,
                           spark_workers=workers, jvm_dir=settings.jvm_dir)  # fmt: skip
    try:
        with console.status("starting Kafka, HDFS and Spark …"):
            cluster.up()
    except (ClusterError, RuntimeError) as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(1) from e
    times = ", ".join(f"{k} {v:.1f}s" for k, v in cluster.timings.items())
    console.print(f"[green]cluster up[/green] ({times})")
    _print_status(read_state(cluster.home))
    console.print(f"run radstack on it: RADSTACK_CONFIG={cluster.settings_file} radctl …")


def _up_on_hosts(home: Path, count: int) -> None:
    if count < 2:
        console.print("[red]--hosts needs at least 2 hosts (host 1 and one for the data nodes)[/red]")
        raise typer.Exit(2)
    if read_state(home)["running"]:
        console.print(f"[red]a cluster is already running from {home / 'cluster'}; `radctl cluster down` first[/red]")
        raise typer.Exit(1)
    shutil.rmtree(home / "cluster", ignore_errors=True)
    (home / "cluster").mkdir(parents=True)
    sim = SimulatedHosts(count, home / "cluster" / "hosts")
    try:
        with console.status(f"making {count} hosts, then starting Kafka, HDFS and Spark on them …"):
            sim.up()
            cluster = HostCluster(sim).up()
            cluster.write_state(home)
    except (ClusterError, HostsError, RuntimeError) as e:
        sim.down()
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(1) from e
    times = ", ".join(f"{k} {v:.1f}s" for k, v in cluster.timings.items())
    console.print(f"[green]cluster up on {count} hosts[/green] ({times})")
    _print_status(read_state(home))
    console.print("run radstack on a host: radctl cluster exec --host 1 -- radctl serve")


@cluster_app.command("status")
def status(
    json_out: bool = typer.Option(False, "--json", help="Print the state as JSON."),
    config: Path = CONFIG_OPT,
) -> None:
    """Each node's process, and what Kafka, the NameNode and the Spark master say. Exit 1 when down."""
    state = read_state(_home(config))
    if json_out:
        typer.echo(orjson.dumps(state, option=orjson.OPT_INDENT_2).decode())
    elif not state["processes"]:
        console.print("no cluster (radctl cluster up starts one)")
    else:
        _print_status(state)
    if not state["running"]:
        raise typer.Exit(1)


@cluster_app.command("down")
def down(config: Path = CONFIG_OPT) -> None:
    """Stop every node (TERM, wait, KILL the process group); the data dirs stay until the next `up`."""
    stopped = down_from_state(_home(config))
    console.print(f"stopped {len(stopped)} processes" + (f": {', '.join(stopped)}" if stopped else ""))


NODE_ARG = typer.Argument(..., help="A node as `radctl cluster status` names it: kafka-2, datanode-1, spark-worker-2 …")


def _one_node(action: str, config: Path | None, name: str) -> None:
    home = _home(config)
    try:
        if action == "stop":
            stopped = stop_node(home, name)
            console.print(f"stopped {name}" if stopped else f"{name} was not running")
        else:
            pid = (start_node if action == "start" else restart_node)(home, name)
            console.print(f"{action}ed {name} (pid {pid})")
    except ClusterError as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(1) from e


@cluster_app.command("stop")
def stop(name: str = NODE_ARG, config: Path = CONFIG_OPT) -> None:
    """Stop one node (TERM, then KILL its process group); its data stays for `start`."""
    _one_node("stop", config, name)


@cluster_app.command("start")
def start(name: str = NODE_ARG, config: Path = CONFIG_OPT) -> None:
    """Start one stopped or crashed node again: the same command, ports and data as `up` gave it."""
    _one_node("start", config, name)


@cluster_app.command("restart")
def restart(name: str = NODE_ARG, config: Path = CONFIG_OPT) -> None:
    """Stop and start one node."""
    _one_node("restart", config, name)


@cluster_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_(
    ctx: typer.Context,
    host: int = typer.Option(..., "--host", min=1, help="The simulated host (1 … N of `up --hosts N`)."),
    config: Path = CONFIG_OPT,
) -> None:
    """Run a command on one simulated host, in its network and mount namespaces, with that host's
    radstack home and settings (RADSTACK_HOME, RADSTACK_CONFIG) and SPARK_LOCAL_IP set to its address:
    `radctl cluster exec --host 1 -- radctl serve`."""
    try:
        hosts = state_hosts(recorded_state(_home(config)))
    except ClusterError as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(1) from e
    if hosts is None or not 1 <= host <= hosts.count:
        console.print("[red]no such host: the cluster was not started with `up --hosts N`, or N is smaller[/red]")
        raise typer.Exit(2)
    if not ctx.args:
        console.print("[red]give the command after --, e.g. -- radctl serve[/red]")
        raise typer.Exit(2)
    try:
        argv = hosts.command(host, list(ctx.args))
    except HostsError as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(1) from e
    os.execvpe(argv[0], argv, {**os.environ, **host_environment(hosts, host)})


def _print_status(state: dict) -> None:  # type: ignore[type-arg]
    hosts = state.get("hosts") or {}
    t = Table("host", "node", "pid", "state") if hosts else Table("node", "pid", "state")
    for name, info in state["processes"].items():
        row = [name, str(info["pid"]), "[green]running[/green]" if info["alive"] else "[red]gone[/red]"]
        if hosts:
            h = str(info.get("host"))
            up = (hosts.get("running") or {}).get(h)
            row.insert(0, f"{h} {hosts['addresses'].get(h, '')}" + ("" if up else " [red](down)[/red]"))
        t.add_row(*row)
    console.print(t)
    k, h, s = state["kafka"], state["hdfs"], state["spark"]
    console.print(f"kafka  {k['brokers_serving']}/{k['nodes']} brokers serving  {k['bootstrap_servers']}")
    console.print(f"hdfs   {h.get('live_datanodes')}/{h['datanodes']} DataNodes live  {h['fs_url']}  (logs {h['logs']})")
    console.print(f"spark  master {s.get('master_status')}, {s.get('alive_workers')}/{s['workers']} workers, "
                  f"{s.get('active_apps')} running / {s.get('completed_apps')} completed apps  "
                  f"{s['master_url']}  UI {s['web_url']}")  # fmt: skip
