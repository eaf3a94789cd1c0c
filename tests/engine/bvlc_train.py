#!/usr/bin/python3
"""BVLC/caffe's solver files trained for 10 iterations on small generated data of the right
shape, from a copy of Caffe's tree, as Caffe's users run them (`dltrain train -solver S`).

    bvlc_train.py DLTRAIN [NAME...]     exit 0 when every solver trains; NAMEs pick some

The nets are the unmodified files of tests/fixtures/bvlc-caffe/. Their data is generated where
they name it: LMDBs of raw Datums (MNIST 1x28x28, CIFAR-10 3x32x32, ImageNet 3x256x256 with
labels up to 999), LevelDBs of the siamese net's 2x28x28 pairs (similarity 0 or 1), Caffe's
mean.binaryproto files of those shapes, and for the Flickr style fine-tuning net an image list of
PPM files of several sizes (ImageData resizes them to 256x256). lenet_auto_solver's two nets are
not in Caffe's tree: its LeNet notebook writes them (lenet() below, the notebook's own), and it
runs from examples/ as the notebook does. Each solver runs with --solver max_iter=10,
batch_size=2 (the train nets'), test_iter=1 (every test net's) and a test every 5 iterations, on
the CPU (the ImageNet-sized nets: see train()). Needs Debian's
python3-lmdb, python3-plyvel and python3-h5py (scripts/setup.sh installs them). The HDF5
classification nets have no solver file (their notebook writes one): each net file trains as
`dltrain train --config NET` with the same settings and base_lr 0.01.
"""
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import h5py
import lmdb
import plyvel

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "fixtures", "bvlc-caffe")

# Every solver whose nets read data dltrain reads (tests/fixtures/bvlc-caffe/expected.txt says
# "not checked" for them: their data is all that is missing), but GoogLeNet's quick_solver: the
# same net as its solver.prototxt, with other solver keys (engine.bvlc_corpus checks those).
SOLVERS = [
    "examples/mnist/lenet_solver.prototxt",
    "examples/mnist/lenet_solver_adam.prototxt",
    "examples/mnist/lenet_solver_rmsprop.prototxt",
    "examples/mnist/lenet_adadelta_solver.prototxt",
    "examples/mnist/lenet_multistep_solver.prototxt",
    "examples/mnist/lenet_consolidated_solver.prototxt",  # V1 layers inline, two test nets
    "examples/mnist/lenet_auto_solver.prototxt",  # train_net and test_net files
    "examples/mnist/mnist_autoencoder_solver.prototxt",  # two test nets by stage
    "examples/mnist/mnist_autoencoder_solver_adadelta.prototxt",
    "examples/mnist/mnist_autoencoder_solver_adagrad.prototxt",
    "examples/mnist/mnist_autoencoder_solver_nesterov.prototxt",
    "examples/siamese/mnist_siamese_solver.prototxt",  # shared weights, ContrastiveLoss
    "examples/cifar10/cifar10_quick_solver.prototxt",
    "examples/cifar10/cifar10_quick_solver_lr1.prototxt",
    "examples/cifar10/cifar10_full_solver.prototxt",
    "examples/cifar10/cifar10_full_solver_lr1.prototxt",
    "examples/cifar10/cifar10_full_solver_lr2.prototxt",
    "examples/cifar10/cifar10_full_sigmoid_solver.prototxt",
    "examples/cifar10/cifar10_full_sigmoid_solver_bn.prototxt",
    "models/bvlc_alexnet/solver.prototxt",
    "models/bvlc_reference_caffenet/solver.prototxt",
    "models/bvlc_googlenet/solver.prototxt",
    "models/finetune_flickr_style/solver.prototxt",
]

# Nets without a solver file: trained with --config and base_lr 0.01.
NETS = [
    "examples/hdf5_classification/train_val.prototxt",
    "examples/hdf5_classification/nonlinear_train_val.prototxt",
    "examples/hdf5_classification/nonlinear_auto_train.prototxt",
    "examples/hdf5_classification/nonlinear_auto_test.prototxt",
]

# Where the nets read, and what: (channels, height, width, classes).
LMDBS = {
    "examples/mnist/mnist_train_lmdb": (1, 28, 28, 10),
    "examples/mnist/mnist_test_lmdb": (1, 28, 28, 10),
    "examples/cifar10/cifar10_train_lmdb": (3, 32, 32, 10),
    "examples/cifar10/cifar10_test_lmdb": (3, 32, 32, 10),
    "examples/imagenet/ilsvrc12_train_lmdb": (3, 256, 256, 1000),
    "examples/imagenet/ilsvrc12_val_lmdb": (3, 256, 256, 1000),
}
LEVELDBS = {
    "examples/siamese/mnist_siamese_train_leveldb": (2, 28, 28, 2),
    "examples/siamese/mnist_siamese_test_leveldb": (2, 28, 28, 2),
}
# The solvers that run from another folder than Caffe's root, as their notebook does.
FOLDERS = {"examples/mnist/lenet_auto_solver.prototxt": "examples"}
MEANS = {
    "examples/cifar10/mean.binaryproto": (3, 32, 32),
    "data/ilsvrc12/imagenet_mean.binaryproto": (3, 256, 256),
}
RECORDS = 6


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number, wire, payload):
    key = varint(number << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def datum(channels, height, width, pixels, label):
    """caffe.Datum: channels 1, height 2, width 3, data 4, label 5."""
    return (field(1, 0, channels) + field(2, 0, height) + field(3, 0, width) +
            field(4, 2, pixels) + field(5, 0, label))


def write_lmdb(path, shape, rng, records=RECORDS):
    channels, height, width, classes = shape
    os.makedirs(path)
    env = lmdb.open(path, map_size=1 << 30)
    with env.begin(write=True) as txn:
        for i in range(records):
            pixels = rng.randbytes(channels * height * width)
            label = rng.randrange(classes) if i else classes - 1  # the largest label too
            txn.put(b"%08d" % i, datum(channels, height, width, pixels, label))
    env.close()


def write_leveldb(path, shape, rng):
    channels, height, width, classes = shape
    db = plyvel.DB(path, create_if_missing=True, error_if_exists=True)
    for i in range(RECORDS):
        pixels = rng.randbytes(channels * height * width)
        db.put(b"%08d" % i, datum(channels, height, width, pixels, i % classes))
    db.close()


def layer(name, kind, bottoms, body=""):
    """One layer as pycaffe's NetSpec prints it (protobuf's text format)."""
    text = 'layer {\n  name: "%s"\n  type: "%s"\n' % (name, kind)
    text += "".join('  bottom: "%s"\n' % bottom for bottom in bottoms)
    return text + '  top: "%s"\n%s}\n' % (name, body)


def lenet(source, batch_size):
    """The LeNet notebook's lenet() (examples/01-learning-lenet.ipynb): its net, as it writes
    it to mnist/lenet_auto_{train,test}.prototxt."""
    xavier = "    weight_filler {\n      type: \"xavier\"\n    }\n"
    conv = "  convolution_param {\n    num_output: %d\n    kernel_size: 5\n" + xavier + "  }\n"
    pool = "  pooling_param {\n    pool: MAX\n    kernel_size: 2\n    stride: 2\n  }\n"
    ip = "  inner_product_param {\n    num_output: %d\n" + xavier + "  }\n"
    data = ('layer {\n  name: "data"\n  type: "Data"\n  top: "data"\n  top: "label"\n'
            "  transform_param {\n    scale: 0.00392156862745\n  }\n"
            '  data_param {\n    source: "%s"\n    batch_size: %d\n    backend: LMDB\n  }\n}\n'
            % (source, batch_size))
    return (data + layer("conv1", "Convolution", ["data"], conv % 20) +
            layer("pool1", "Pooling", ["conv1"], pool) +
            layer("conv2", "Convolution", ["pool1"], conv % 50) +
            layer("pool2", "Pooling", ["conv2"], pool) +
            layer("fc1", "InnerProduct", ["pool2"], ip % 500) +
            'layer {\n  name: "relu1"\n  type: "ReLU"\n  bottom: "fc1"\n  top: "fc1"\n}\n' +
            layer("score", "InnerProduct", ["fc1"], ip % 10) +
            'layer {\n  name: "loss"\n  type: "SoftmaxWithLoss"\n  bottom: "score"\n'
            '  bottom: "label"\n  top: "loss"\n}\n')


def write_hdf5_list(root, listed, files, rows, rng):
    """Caffe's HDF5Data list and its files, as the classification notebook writes them: 4
    features of float32 per row and a 0/1 label each, in datasets named as the layers' tops."""
    lines = []
    for i in range(files):
        name = "%s_%d.h5" % (os.path.splitext(listed)[0], i)
        with h5py.File(os.path.join(root, name), "w") as out:
            out["data"] = [[rng.uniform(-2, 2) for _ in range(4)] for _ in range(rows)]
            out["label"] = [[float(rng.randrange(2))] for _ in range(rows)]
        lines.append(name + "\n")
    with open(os.path.join(root, listed), "w", encoding="utf-8") as out:
        out.writelines(lines)


def write_mean(path, shape, rng):
    """caffe.BlobProto as compute_image_mean writes it: num, channels, height, width, data."""
    channels, height, width = shape
    values = struct.pack("<%df" % (channels * height * width),
                         *(rng.uniform(90, 130) for _ in range(channels * height * width)))
    blob = (field(1, 0, 1) + field(2, 0, channels) + field(3, 0, height) + field(4, 0, width) +
            field(5, 2, values))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(blob)


def write_image_list(root, listed, count, classes, rng):
    """Caffe's image list of PPM files of several sizes: `path label` lines."""
    folder = os.path.join(root, "data", "flickr_style", "images")
    os.makedirs(folder, exist_ok=True)
    lines = []
    for i in range(count):
        width, height = rng.choice([(300, 260), (256, 256), (320, 240)])
        name = "%s_%d.ppm" % (os.path.basename(listed).split(".")[0], i)
        with open(os.path.join(folder, name), "wb") as out:
            out.write(b"P6 %d %d 255\n" % (width, height))
            out.write(rng.randbytes(width * height * 3))
        lines.append("data/flickr_style/images/%s %d\n" % (name, rng.randrange(classes)))
    with open(os.path.join(root, listed), "w", encoding="utf-8") as out:
        out.writelines(lines)


def caffe_root():
    root = tempfile.mkdtemp(prefix="dl_bvlc_train_")
    for top in ("examples", "models"):
        shutil.copytree(os.path.join(CORPUS, top), os.path.join(root, top))
    rng = random.Random(20261130)
    for path, shape in LMDBS.items():
        write_lmdb(os.path.join(root, path), shape, rng)
    for path, shape in LEVELDBS.items():
        write_leveldb(os.path.join(root, path), shape, rng)
    for path, shape in MEANS.items():
        write_mean(os.path.join(root, path), shape, rng)
    # What the LeNet notebook writes, from examples/ (its working directory).
    for name, source, batch in (("train", "mnist/mnist_train_lmdb", 64),
                                ("test", "mnist/mnist_test_lmdb", 100)):
        with open(os.path.join(root, "examples", "mnist", "lenet_auto_%s.prototxt" % name), "w",
                  encoding="utf-8") as out:
            out.write(lenet(source, batch))
    os.makedirs(os.path.join(root, "examples", "hdf5_classification", "data"))
    write_hdf5_list(root, "examples/hdf5_classification/data/train.txt", 2, 5, rng)
    write_hdf5_list(root, "examples/hdf5_classification/data/test.txt", 1, 4, rng)
    write_image_list(root, "data/flickr_style/train.txt", 4, 20, rng)
    write_image_list(root, "data/flickr_style/test.txt", 2, 20, rng)
    return root


def train(dltrain, root, runs, solver):
    run_dir = os.path.join(runs, solver.replace("/", "_"))
    # The ImageNet-sized nets (models/) train on one image a step at a tenth of their rate
    # (random images send CaffeNet's 0.01 to NaN within 10 steps, as they would Caffe's) and
    # leave out their test nets, whose files' batches of 50 would take most of the test's time
    # on two cores: `dltrain check` builds those (engine.bvlc_corpus).
    large = solver.startswith("models/")
    settings = (["max_iter=10", "display=5", "snapshot=0"] +
                (["batch_size=1", "test_iter=0"] if large else
                 ["batch_size=2", "test_iter=1", "test_interval=5"]))
    folder = FOLDERS.get(solver, "")
    given = ["--config", solver] if solver in NETS else ["-solver",
                                                         os.path.relpath(solver, folder or ".")]
    command = [dltrain, "train"] + given + ["--run-dir", run_dir, "--device", "cpu",
                                            "--deadline", "none"]
    if solver in NETS:
        settings.append("base_lr=0.01")
    for setting in settings:
        command += ["--solver", setting]
    if large:
        command += ["--solver", "base_lr=%g" % (base_lr(os.path.join(root, solver)) / 10)]
    started = time.monotonic()
    try:
        run = subprocess.run(command, cwd=os.path.join(root, folder), capture_output=True,
                             text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        return False, "no answer in 600 s", 600.0
    seconds = time.monotonic() - started
    shutil.rmtree(run_dir, ignore_errors=True)  # an ImageNet net's checkpoint is 488 MB
    out = run.stdout + run.stderr
    if run.returncode != 0:
        return False, out[-2000:], seconds
    done = "completed at iteration 10 of 10" in out
    return done, "" if done else out[-2000:], seconds


def base_lr(solver_file):
    with open(solver_file, encoding="utf-8") as text:
        for line in text:
            if line.strip().startswith("base_lr:"):
                return float(line.split(":", 1)[1].split("#")[0])
    return 0.01


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    dltrain = os.path.abspath(sys.argv[1])
    chosen = [s for s in SOLVERS + NETS
              if len(sys.argv) == 2 or any(n in s for n in sys.argv[2:])]
    root = caffe_root()
    # The run directories on a RAM disk where there is one: the checkpoints are written and
    # deleted at once, and a disk's fsync of them is not what this test measures.
    shm = "/dev/shm"
    runs = tempfile.mkdtemp(prefix="dl_bvlc_runs_",
                            dir=shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else root)
    failed = 0
    try:
        for solver in chosen:
            ok, why, seconds = train(dltrain, root, runs, solver)
            print("%-55s %s (%.1f s)" % (solver, "trains" if ok else "FAILED", seconds))
            if not ok:
                failed += 1
                print(why)
    finally:
        shutil.rmtree(runs, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    print("bvlc train: %d of %d solver and net files train 10 iterations"
          % (len(chosen) - failed, len(chosen)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
