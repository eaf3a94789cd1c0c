"""Writes Caffe Datums with Python's protobuf, as Caffe's own Python tools would, for
tests/engine/data/test_leveldb_reader.cpp: float_data Datums in the encoding a proto says.

usage: float_datums.py MODULE_DIR OUT_DIR COUNT CHANNELS HEIGHT WIDTH [VALUES]

MODULE_DIR holds datum_pb2.py, made by protoc from the test's datum.proto (Caffe's field numbers;
float_data packed or not as that proto says). Record i is OUT_DIR/i.datum with label i % 10 and
value p of C x H x W equal to ((i * 13 + p * 7) % 50) * 0.25 - 3.0 (exact in float32). VALUES, when
given, is how many values to write instead of C x H x W (a Datum whose data contradicts its shape).
"""

import os
import sys

sys.path.insert(0, sys.argv[1])
import datum_pb2  # noqa: E402  (generated into MODULE_DIR by the test)

out_dir = sys.argv[2]
count, channels, height, width = (int(v) for v in sys.argv[3:7])
values = int(sys.argv[7]) if len(sys.argv) > 7 else channels * height * width
for i in range(count):
    datum = datum_pb2.Datum()
    datum.channels = channels
    datum.height = height
    datum.width = width
    datum.label = i % 10
    datum.float_data.extend(((i * 13 + p * 7) % 50) * 0.25 - 3.0 for p in range(values))
    with open(os.path.join(out_dir, f"{i}.datum"), "wb") as out:
        out.write(datum.SerializeToString())
