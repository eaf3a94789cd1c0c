#!/usr/bin/python3
"""Writes an HDF5 file of named datasets, as Caffe's HDF5Data reads them, with Debian's h5py
(tests/engine/data/test_hdf5_reader.cpp).

    hdf5_files.py FILE JSON

JSON: {"NAME": {"dtype": "float32" | "float64" | "int32", "shape": [...], "values": [...]}, ...}
"""
import json
import sys

import h5py
import numpy


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with h5py.File(sys.argv[1], "w") as out:
        for name, spec in json.loads(sys.argv[2]).items():
            out[name] = numpy.array(spec["values"], dtype=spec["dtype"]).reshape(spec["shape"])


if __name__ == "__main__":
    main()
