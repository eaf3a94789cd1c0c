"""The state the spark-submit and yarn shims share: a fake ResourceManager in a directory.

$DLJOB_SHIM_YARN_STATE (a directory the test makes) holds the cluster's start time, the next
sequence number and one directory per application: report.json (what `yarn application`
prints), the application master's stdout and stderr, and its working directory. Every change
is made under one lock (flock on the directory's lock file).
"""
import contextlib
import fcntl
import json
import os
import socket
import sys
import time

TERMINAL = ("FINISHED", "FAILED", "KILLED")
ALL_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING", "FINISHED", "FAILED",
              "KILLED")
HOST = socket.gethostname()


def die(message, code):
    print(message, file=sys.stderr)
    sys.exit(code)


def state_dir():
    path = os.environ.get("DLJOB_SHIM_YARN_STATE", "")
    if not path or not os.path.isdir(path):
        die("yarn shim: DLJOB_SHIM_YARN_STATE must name an existing directory", 1)
    return path


def log(level, logger, message):
    """A log4j line as Spark's default console appender writes it (stderr)."""
    print("%s %s %s: %s" % (time.strftime("%y/%m/%d %H:%M:%S"), level, logger, message),
          file=sys.stderr, flush=True)


@contextlib.contextmanager
def locked():
    with open(os.path.join(state_dir(), "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def app_dir(app_id):
    return os.path.join(state_dir(), "apps", app_id)


def now_ms():
    return int(time.time() * 1000)


def new_application():
    """A new application id (application_<cluster start ms>_<NNNN>); the caller holds the lock."""
    root = state_dir()
    stamp = os.path.join(root, "cluster_start")
    if not os.path.exists(stamp):
        with open(stamp, "w") as out:
            out.write(str(now_ms()))
    sequence_file = os.path.join(root, "sequence")
    sequence = int(open(sequence_file).read()) + 1 if os.path.exists(sequence_file) else 1
    with open(sequence_file, "w") as out:
        out.write(str(sequence))
    app_id = "application_%s_%04d" % (open(stamp).read().strip(), sequence)
    os.makedirs(os.path.join(app_dir(app_id), "container"))
    return app_id


def read(app_id):
    try:
        with open(os.path.join(app_dir(app_id), "report.json")) as source:
            return json.load(source)
    except (OSError, ValueError):
        return None


def write(report):
    path = os.path.join(app_dir(report["id"]), "report.json")
    with open(path + ".tmp", "w") as out:
        json.dump(report, out)
    os.rename(path + ".tmp", path)


def update(app_id, unless_terminal=True, **fields):
    """Changes an application's report under the lock; not once it has ended."""
    with locked():
        report = read(app_id)
        if report is None or (unless_terminal and report["state"] in TERMINAL):
            return report
        report.update(fields)
        if report["state"] in TERMINAL and not report.get("finish"):
            report["finish"] = now_ms()
        write(report)
        return report


def applications():
    root = os.path.join(state_dir(), "apps")
    found = [read(name) for name in sorted(os.listdir(root))] if os.path.isdir(root) else []
    return [report for report in found if report]


def tracking_url(report):
    return "http://%s:8088/proxy/%s/" % (HOST, report["id"])
