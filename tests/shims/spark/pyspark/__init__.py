"""Test stand-in for PySpark: only what dljob's Spark driver (spark_driver.py) uses.

SparkContext(appName=...) with applicationId (the shim's YARN id, DLJOB_SHIM_YARN_APP_ID),
parallelize(range(n), n), RDD.barrier(), mapPartitions(f), collect(), cancelAllJobs(), stop();
BarrierTaskContext.get() / TaskContext.get() with partitionId() and allGather(str).
$DLJOB_SHIM_SPARK_VERSION (3.5.1) takes away what older PySparks lack: allGather before 3.0,
barrier() and BarrierTaskContext before 2.4, TaskContext before 2.2 (the seed's 1.5.2).

collect() runs each partition as an OS process of its own (fork), all started together as a
barrier stage's tasks are; allGather goes through a directory, answered in partition order. A
task that raises aborts the stage: the other tasks get SIGTERM (PySpark's worker is killed;
here the driver's run_rank then stops its rank) and collect() raises an error whose text holds
the failed task's exception, as Py4JJavaError's does. Not Spark: no executors, no retries.
"""
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback

__all__ = ["SparkContext", "TaskContext", "BarrierTaskContext"]


class TaskContext:
    _current = None

    def __init__(self, partition, gather_dir):
        self._partition = partition
        self._gather_dir = gather_dir
        self._round = 0

    @classmethod
    def get(cls):
        return TaskContext._current

    def partitionId(self):
        return self._partition


class BarrierTaskContext(TaskContext):
    @classmethod
    def get(cls):
        if not isinstance(TaskContext._current, BarrierTaskContext):
            raise RuntimeError("It is not in a barrier stage")
        return TaskContext._current

    def allGather(self, message=""):
        self._round += 1
        prefix = os.path.join(self._gather_dir, "%d." % self._round)
        with open(prefix + "%d.tmp" % self._partition, "w") as out:
            out.write(message)
        os.rename(prefix + "%d.tmp" % self._partition, prefix + str(self._partition))
        world = int(open(os.path.join(self._gather_dir, "world")).read())
        names = [prefix + str(p) for p in range(world)]
        while not all(os.path.exists(name) for name in names):
            time.sleep(0.02)
        return [open(name).read() for name in names]


class _StageFailed(Exception):
    pass


class RDD:
    def __init__(self, sc, partitions, barrier=False, function=None):
        self._sc = sc
        self._partitions = partitions
        self._barrier = barrier
        self._function = function

    def barrier(self):
        return RDD(self._sc, self._partitions, True, self._function)

    def mapPartitions(self, function):
        return RDD(self._sc, self._partitions, self._barrier, function)

    def collect(self):
        return self._sc._run_stage(self._partitions, self._function, self._barrier)


def _run_task(partition, data, function, barrier, gather_dir, write_end):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds the task's finally blocks
    context = (_Barrier if barrier else _Task)(partition, gather_dir)
    _Task._current = context
    try:
        result = ("ok", list(function(iter(data))))
    except BaseException as error:  # pylint: disable=broad-except
        result = ("error", "%s\n%s" % (error, traceback.format_exc()))
    with os.fdopen(write_end, "wb") as out:
        pickle.dump(result, out)
    os._exit(0)


class SparkContext:
    def __init__(self, appName="pyspark-shell", master=None):  # pylint: disable=unused-argument
        self.appName = appName
        self.applicationId = (os.environ.get("DLJOB_SHIM_YARN_APP_ID") or
                              os.environ.get("DLJOB_SHIM_SPARK_APP_ID") or
                              "local-%d" % (time.time() * 1000))
        self._tasks = {}
        self._stopped = False

    def parallelize(self, data, numSlices=None):
        data = list(data)
        slices = numSlices or len(data) or 1
        return RDD(self, [data[i * len(data) // slices:(i + 1) * len(data) // slices]
                          for i in range(slices)])

    def _run_stage(self, partitions, function, barrier):
        if self._stopped:
            raise RuntimeError("Cannot call methods on a stopped SparkContext.")
        gather_dir = tempfile.mkdtemp(prefix="fake-pyspark-")
        with open(os.path.join(gather_dir, "world"), "w") as out:
            out.write(str(len(partitions)))
        readers = {}
        partitions_of = {}
        try:
            for index, data in enumerate(partitions):
                read_end, write_end = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(read_end)
                    _run_task(index, data, function, barrier, gather_dir, write_end)
                os.close(write_end)
                self._tasks[pid] = index
                partitions_of[pid] = index
                readers[pid] = read_end
            results = {}
            while readers:
                time.sleep(0.05)  # waitpid by pid: the driver's own children are not ours
                for pid in list(readers):
                    try:
                        done, status = os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:  # reaped by cancelAllJobs (stop, cancel)
                        raise _StageFailed("Job 0 cancelled because SparkContext was shut down")
                    if not done:
                        continue
                    self._tasks.pop(pid, None)
                    index = partitions_of[pid]
                    with os.fdopen(readers.pop(pid), "rb") as source:
                        try:
                            outcome = pickle.load(source)
                        except EOFError:
                            outcome = ("error", "task ended with wait status %d" % status)
                    if outcome[0] == "error":
                        raise _StageFailed(
                            "An error occurred while calling collect.\n"
                            "org.apache.spark.SparkException: Job aborted due to stage "
                            "failure: Task %d in stage 0.0 failed 1 times, most recent "
                            "failure: Lost task %d.0 in stage 0.0: org.apache.spark.api."
                            "python.PythonException: Traceback (most recent call last):\n%s"
                            % (index, index, outcome[1]))
                    results[index] = outcome[1]
            return [item for index in sorted(results) for item in results[index]]
        finally:
            self.cancelAllJobs()
            for read_end in readers.values():
                os.close(read_end)  # a task that ended unread
            for name in os.listdir(gather_dir):
                os.unlink(os.path.join(gather_dir, name))
            os.rmdir(gather_dir)

    def cancelAllJobs(self):
        """Ends the running tasks: SIGTERM, and each is reaped."""
        for pid in list(self._tasks):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in list(self._tasks):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            self._tasks.pop(pid, None)

    def stop(self):
        self.cancelAllJobs()
        self._stopped = True


_Task, _Barrier = TaskContext, BarrierTaskContext
_VERSION = tuple(int(part) for part in
                 os.environ.get("DLJOB_SHIM_SPARK_VERSION", "3.5.1").split(".")[:2])
if _VERSION < (3, 0):
    del BarrierTaskContext.allGather
if _VERSION < (2, 4):
    del RDD.barrier, BarrierTaskContext
    __all__.remove("BarrierTaskContext")
if _VERSION < (2, 2):
    del TaskContext
    __all__.remove("TaskContext")
