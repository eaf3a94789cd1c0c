#!/usr/bin/env python3
"""dljob's Spark driver: runs one dljob job on a Spark cluster (schedulers/spark.cpp).

spark-submit starts it in the application master (YARN cluster mode):

    dljob_spark_driver.py --ranks N --threads C --script RUN_DIR/job.sh --log RUN_DIR/job.log
                          [--shipped-bin dljob-release/dljob-V-linux-x86_64/bin]

(on a standalone master, spark-submit runs it in client mode on the submit host instead).

It runs the job script's batch side (modules, the walltime timer, the exit-code files) with its
output in the job's log. The script's launch line calls this file again as the ranks' launcher:

    dljob_spark_driver.py --launch --ranks N -- /bin/bash job.sh --dljob-compute

which hands the command to the driver over a Unix socket and waits. The driver runs it as one
Spark stage of N tasks, one per executor (barrier execution mode where this Spark has it, so
they start together), each with DLTRAIN_RANK, DLTRAIN_WORLD_SIZE and DLTRAIN_RENDEZVOUS set:
rank 0's address (tcp://HOST:PORT, gathered by BarrierTaskContext.allGather) where Spark has
allGather (3.0), else a directory in the run directory, which the cluster shares. The stage's
exit status, the first failing rank's, is the launcher's; the driver's own is the script's.

With --shipped-bin (the profile's `archive:`, spark-submit --archives), each rank runs the
dltrain of the release YARN unpacked in its executor's working directory: DLJOB_SHIPPED_BIN
names that bin/ (absolute) for the job script's compute side.

Nothing here is Spark-version specific beyond what is probed (barrier, allGather), so the
seed's Spark 1.5.2 runs it too, without barrier mode: the site profile's settings then make
Spark wait for every executor before the stage (spark.cpp).
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

# A request or an answer on the launcher's socket: one JSON line, bounded.
MAX_MESSAGE = 4 << 20
# The variables a rank inherits from the batch side, as srun passes its environment on.
PASSED_PREFIXES = ("DLJOB_", "DLTRAIN_", "OMP_", "CUDA_")
PASSED_NAMES = ("PATH", "LD_LIBRARY_PATH", "HOME", "USER", "LANG", "TMPDIR")


def read_line(conn):
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_MESSAGE:
            raise ValueError("message over %d bytes" % MAX_MESSAGE)
    return json.loads(data.decode("utf-8")) if data else None


def rank_environment(base, rank, world, rendezvous, threads):
    env = dict(os.environ)
    env.update(base)
    env.update({
        # The executor's cores (spark.task.cpus): the node's CPUs are shared by executors that
        # affinity does not separate, and dltrain would take them all (it reads this first).
        "OMP_NUM_THREADS": str(threads),
        "DLTRAIN_RANK": str(rank),
        "DLTRAIN_WORLD_SIZE": str(world),
        "DLTRAIN_LOCAL_RANK": "0",  # one rank per executor
        "DLTRAIN_RENDEZVOUS": rendezvous,
        "DLTRAIN_COMM": "gloo",
        # A killed task (a YARN kill, a failed stage) does not signal its child: dltrain takes
        # its parent's end as SIGTERM (prctl PR_SET_PDEATHSIG) and checkpoints.
        "DLTRAIN_DIE_WITH_PARENT": "1",
    })
    return env


def run_rank(argv, env, rank, run_dir):
    """Runs one rank's command; its output goes to the job's log (rank 0) or its own."""
    name = "job.log" if rank == 0 else "rank.%d.log" % rank
    with open(os.path.join(run_dir, name), "ab") as log:
        child = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 cwd=run_dir)
        try:
            return child.wait()
        except BaseException:
            child.terminate()
            child.wait()
            raise


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def shipped_environment(base, shipped_bin):
    """The rank's variables with the shipped release's bin/, resolved in the executor's working
    directory (where YARN unpacked --archives), or the reason it is not there."""
    if not shipped_bin:
        return base
    found = os.path.abspath(shipped_bin)
    if not os.access(os.path.join(found, "dltrain"), os.X_OK):
        raise RuntimeError("dljob's release is not unpacked in this executor: no %s/dltrain "
                           "(the site profile's archive: is it the release tarball?)" % found)
    return dict(base, DLJOB_SHIPPED_BIN=found)


def make_task(argv, base, world, run_dir, rendezvous_dir, threads, shipped_bin=None):
    """The function each Spark task runs: rank = partition index."""

    def task(partition):
        # parallelize(range(N), N) puts i alone in partition i, in every Spark: the rank needs
        # no TaskContext, which PySpark has only from 2.2 (the seed's 1.5.2 has none).
        rank = next(iter(partition))
        env = shipped_environment(base, shipped_bin)
        rendezvous = rendezvous_dir
        try:  # on the executor; BarrierTaskContext from Spark 2.4, allGather from 3.0
            from pyspark import BarrierTaskContext

            ctx = BarrierTaskContext.get()
        except (ImportError, RuntimeError):  # RuntimeError: not a barrier stage
            ctx = None
        if ctx is not None and hasattr(ctx, "allGather"):
            host = os.environ.get("NM_HOST") or socket.getfqdn()
            me = json.dumps({"rank": rank, "host": host, "port": free_port() if rank == 0 else 0})
            peers = sorted((json.loads(m) for m in ctx.allGather(me)), key=lambda p: p["rank"])
            rendezvous = "tcp://%s:%d" % (peers[0]["host"], peers[0]["port"])
        rc = run_rank(argv, rank_environment(env, rank, world, rendezvous, threads), rank, run_dir)
        if rc != 0:
            raise RuntimeError("dltrain rank %d exited with status %d" % (rank, rc))
        return [rank]

    return task


def run_stage(sc, request, threads, shipped_bin=None):
    """Runs the ranks as one stage; returns the launcher's exit status."""
    world = int(request["ranks"])
    argv = request["argv"]
    base = request["env"]
    run_dir = base.get("DLJOB_RUN_DIR", os.getcwd())
    attempt = base.get("DLJOB_JOB_TOKEN", "job")
    rendezvous_dir = os.path.join(run_dir, "rendezvous." + attempt)
    shutil.rmtree(rendezvous_dir, ignore_errors=True)
    os.makedirs(rendezvous_dir)
    rdd = sc.parallelize(range(world), world)
    if hasattr(rdd, "barrier"):
        rdd = rdd.barrier()
    task = make_task(argv, base, world, run_dir, rendezvous_dir, threads, shipped_bin)
    try:
        done = rdd.mapPartitions(task).collect()
        print("dljob: %d rank(s) finished" % len(done), file=sys.stderr, flush=True)
        return 0
    except Exception as error:  # Py4JJavaError carries the task's message
        found = re.search(r"exited with status (\d+)", str(error))
        rc = int(found.group(1)) if found else 1
        print("dljob: the ranks failed (exit %d): %s" % (rc, str(error)[:2000]),
              file=sys.stderr, flush=True)
        return rc
    finally:
        shutil.rmtree(rendezvous_dir, ignore_errors=True)


def serve(sc, listener, threads, shipped_bin):
    """Answers the job script's launch requests, one at a time."""
    while True:
        conn, _ = listener.accept()
        with conn:
            try:
                request = read_line(conn)
                rc = run_stage(sc, request, threads, shipped_bin) if request else 1
            except Exception as error:  # a bad request must not end the driver
                print("dljob: launch request failed: %s" % error, file=sys.stderr, flush=True)
                rc = 1
            try:
                conn.sendall((json.dumps({"exit": rc}) + "\n").encode("utf-8"))
            except OSError:
                pass  # the launcher was stopped; the stage is over either way


def drive(args):
    from pyspark import SparkContext

    sc = SparkContext(appName=os.environ.get("DLJOB_SPARK_APP_NAME", "dljob"))
    socket_dir = tempfile.mkdtemp(prefix="dljob-spark-")
    path = os.path.join(socket_dir, "launch")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    threading.Thread(target=serve, args=(sc, listener, args.threads, args.shipped_bin),
                     daemon=True).start()
    env = dict(os.environ, DLJOB_SPARK_SOCKET=path, DLJOB_SPARK_APP_ID=sc.applicationId,
               DLJOB_SPARK_LAUNCH=os.path.abspath(__file__))
    script = None
    # SIGTERM (a YARN kill) goes to the script, whose trap forwards it to the ranks.
    signal.signal(signal.SIGTERM, lambda *_: script and script.send_signal(signal.SIGTERM))
    with open(args.log, "ab") as log:
        script = subprocess.Popen(["/bin/bash", args.script], env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        rc = script.wait()
    sc.cancelAllJobs()
    sc.stop()
    shutil.rmtree(socket_dir, ignore_errors=True)
    return rc


def launch(args):
    passed = {name: value for name, value in os.environ.items()
              if name.startswith(PASSED_PREFIXES) or name in PASSED_NAMES}
    request = {"ranks": args.ranks, "argv": args.command, "env": passed}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(os.environ["DLJOB_SPARK_SOCKET"])
    # A signal to the launcher (the script's trap forwards the walltime warning and cancels)
    # closes the connection; the stage's ranks got theirs from Spark or dltrain's own timer.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with conn:
        conn.sendall((json.dumps(request) + "\n").encode("utf-8"))
        answer = read_line(conn)
    return int(answer["exit"]) if answer else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launch", action="store_true")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--script")
    parser.add_argument("--log")
    parser.add_argument("--shipped-bin")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    if args.ranks < 1 or args.ranks > 100000:
        parser.error("--ranks: expected 1 to 100000")
    if args.threads < 1 or args.threads > 4096:
        parser.error("--threads: expected 1 to 4096")
    if args.launch:
        if not args.command or "DLJOB_SPARK_SOCKET" not in os.environ:
            parser.error("--launch runs inside a job started by this driver, with a command")
        return launch(args)
    if not args.script or not args.log:
        parser.error("expected --script and --log")
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
