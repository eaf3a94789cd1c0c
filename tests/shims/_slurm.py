# Shared by the test shims: run Slurm commands and read every job of this user at once.
import math
import os
import subprocess
import sys


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True)


def jobs():
    """Every job slurmctld knows (MinJobAge is a day on the test cluster), as dicts."""
    result = run(["scontrol", "show", "job", "-o"])
    out = []
    for line in result.stdout.splitlines():
        fields = {}
        for token in line.split():
            if "=" in token:
                key, _, value = token.partition("=")
                fields.setdefault(key, value)
        if "JobId" in fields:
            out.append(fields)
    return out


def exit_code(job):
    code, _, signal = job.get("ExitCode", "0:0").partition(":")
    return int(code or 0), int(signal or 0)


def walltime_minutes(seconds):
    return max(1, math.ceil(int(seconds) / 60))


def die(message, code=1):
    sys.stderr.write(message + "\n")
    sys.exit(code)


def user():
    return os.environ.get("USER") or os.environ.get("LOGNAME") or "root"
