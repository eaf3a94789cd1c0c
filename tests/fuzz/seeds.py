"""Seeds for the fuzz targets whose files the repository has none of: small valid inputs in the
layout each target of dl_fuzz.cpp expects, so the fuzzer starts inside each format instead of
searching for its header.

  image/  every kind dltrain decodes (PNG grey, RGB, RGBA, palette, 16-bit; JPEG baseline and
          progressive, grey and colour; binary PGM and PPM), after the target's channel byte
  idx/    an IDX image file and its label file, after the byte that says where they split
  cifar/  two CIFAR-10 records
  imagelist/ ImageData lists of dl_fuzz's three images, after the byte for colour and resize
  overrides/, solver/ `dljob --set` and `dltrain --solver` assignments
  scheduler/ tests/fixtures/scheduler-output's recorded outputs, after the exit-status byte
  metrics/ a metrics.jsonl as dltrain writes it: a run killed at iteration 300, resumed from its
          checkpoint at 200, completed, and a line cut short

    python3 tests/fuzz/seeds.py DIR
"""
import io
import json
import struct
import sys
from pathlib import Path

from PIL import Image


def images() -> dict:
    rgb = Image.new("RGB", (5, 3))
    rgb.putdata([(i * 40 % 256, i * 90 % 256, i * 7 % 256) for i in range(15)])
    grey = rgb.convert("L")
    kinds = {
        "rgb.png": (rgb, "PNG", {}),
        "grey.png": (grey, "PNG", {}),
        "rgba.png": (rgb.convert("RGBA"), "PNG", {}),
        "palette.png": (rgb.convert("P"), "PNG", {}),
        "grey16.png": (grey.convert("I;16"), "PNG", {}),
        "rgb.jpg": (rgb, "JPEG", {"quality": 90}),
        "grey.jpg": (grey, "JPEG", {"quality": 90}),
        "progressive.jpg": (rgb, "JPEG", {"quality": 90, "progressive": True}),
        "grey.pgm": (grey, "PPM", {}),
        "rgb.ppm": (rgb, "PPM", {}),
    }
    encoded = {}
    for name, (image, form, options) in kinds.items():
        buffer = io.BytesIO()
        image.save(buffer, form, **options)
        encoded[name] = buffer.getvalue()
    return encoded


def main(out: Path) -> None:
    for name, data in images().items():
        for channels in (0, 1, 2):  # the target's own, grey, colour
            path = out / "image" / f"{channels}-{name}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(bytes([channels]) + data)

    count, rows, cols = 3, 4, 5
    images_file = struct.pack(">IIII", 0x803, count, rows, cols) + bytes(range(count * rows * cols))
    labels_file = struct.pack(">II", 0x801, count) + bytes([0, 1, 2])
    split = round(255 * len(images_file) / (len(images_file) + len(labels_file)))
    # The target splits at len * split / 255 (rounded down): pad the labels so that it lands
    # exactly after the images.
    while (len(images_file) + len(labels_file)) * split // 255 != len(images_file):
        labels_file += b"\0"
    (out / "idx").mkdir(parents=True, exist_ok=True)
    (out / "idx" / "valid").write_bytes(bytes([split]) + images_file + labels_file)

    (out / "cifar").mkdir(parents=True, exist_ok=True)
    record = lambda label: bytes([label]) + bytes(i % 256 for i in range(3 * 32 * 32))
    (out / "cifar" / "two-records").write_bytes(record(3) + record(9))

    lines = []
    for start, stop, final in ((0, 300, False), (200, 500, True)):
        lines.append({"type": "start", "iter": start, "max_iter": 500, "resumed_from": "",
                      "threads": 2, "backend": "cpu", "device": "cpu (2 threads)",
                      "batch_size": 64, "data_bytes": 54880000})
        for it in range(start, stop, 100):
            lines.append({"type": "test", "iter": it, "max_iter": 500, "accuracy": 0.1 + it / 1000,
                          "loss": 2.3 - it / 500})
            lines.append({"type": "train", "iter": it, "max_iter": 500, "loss": 2.0 - it / 600,
                          "lr": 0.01, "images_per_s": 6000.5, "data_wait_fraction": 0.001,
                          "elapsed_s": 1.5 + it / 100})
        if final:
            lines.append({"type": "final", "iter": stop, "max_iter": 500, "status": "completed",
                          "test_accuracy": 0.6, "test_loss": None, "train_images_per_s": 6100.0,
                          "wall_s": 9.5, "setup_s": 0.4, "first_step_s": 0.02, "test_s": 2.2,
                          "checkpoint_s": 0.04})
    (out / "imagelist").mkdir(parents=True, exist_ok=True)
    (out / "imagelist" / "same-size").write_bytes(b"\x01a.pgm 0\nc d.pgm 7\n")
    (out / "imagelist" / "resized").write_bytes(b"\x06a.pgm 1\nb.pgm 2\n\nc d.pgm 2147483647\n")

    (out / "overrides").mkdir(parents=True, exist_ok=True)
    (out / "overrides" / "some").write_bytes(
        b"resources.gpus=2\nresources.walltime=02:00:00\nresources.memory=16G\n"
        b"data.stage_to=ramdisk\ncheckpoint.max_continuations=3\nenvironment.needs=[cuda]\n")
    (out / "solver").mkdir(parents=True, exist_ok=True)
    (out / "solver" / "some").write_bytes(
        b"max_iter=5\nbase_lr=0.1\nlr_policy=step\nstepsize=2\nbatch_size=4\ntype=Nesterov\n")

    recorded = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "scheduler-output"
    (out / "scheduler").mkdir(parents=True, exist_ok=True)
    for path in sorted(recorded.glob("*.txt")):
        (out / "scheduler" / path.name).write_bytes(b"\0" + path.read_bytes())

    text = "".join(json.dumps(line) + "\n" for line in lines)
    (out / "metrics").mkdir(parents=True, exist_ok=True)
    (out / "metrics" / "resumed.jsonl").write_bytes(text.encode() + b'{"type": "train", "it')


if __name__ == "__main__":
    main(Path(sys.argv[1]))
