#!/usr/bin/env python3
"""Independent reference values for tests/tensorlib/fashion_mnist_test.cpp.

Reads the gzip'd IDX files of the Debian package dataset-fashion-mnist with nothing but the
standard library (gzip + struct), so the numbers do not share code with tl::data. Prints C++
initialisers to paste into the test.

    python3 tests/tensorlib/data/fashion_mnist_reference.py [root]
"""
import gzip
import os
import struct
import sys

ROOT = (sys.argv[1] if len(sys.argv) > 1 else
        os.environ.get("TIDEMARK_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
SUMMED_IMAGES = [0, 1, 2, 12345, 59999]  # indices whose raw pixel sums (0..255 each) we print


def read_idx(name, magic_expected):
    with gzip.open(os.path.join(ROOT, name), "rb") as f:
        raw = f.read()
    magic, count = struct.unpack(">II", raw[:8])
    assert magic == magic_expected, (name, magic)
    if magic == 2051:
        rows, cols = struct.unpack(">II", raw[8:16])
        assert (rows, cols) == (28, 28)
        body = raw[16:]
        assert len(body) == count * rows * cols
        return count, body
    body = raw[8:]
    assert len(body) == count
    return count, body


def main():
    for split, prefix in (("train", "train"), ("test", "t10k")):
        n, pixels = read_idx(f"{prefix}-images-idx3-ubyte.gz", 2051)
        m, labels = read_idx(f"{prefix}-labels-idx1-ubyte.gz", 2049)
        assert n == m
        counts = [0] * 10
        for y in labels:
            counts[y] += 1
        print(f"// {split}: {n} images")
        print(f"constexpr int64_t k{split.capitalize()}FirstLabels[10] = "
              "{" + ", ".join(str(y) for y in labels[:10]) + "};")
        print(f"constexpr int64_t k{split.capitalize()}ClassCounts[10] = "
              "{" + ", ".join(str(c) for c in counts) + "};")
        sums = []
        for i in SUMMED_IMAGES:
            if i < n:
                sums.append((i, sum(pixels[i * 784:(i + 1) * 784])))
        print(f"constexpr std::pair<int64_t, int64_t> k{split.capitalize()}PixelSums[] = "
              "{" + ", ".join(f"{{{i}, {s}}}" for i, s in sums) + "};")
        total = sum(pixels)
        print(f"constexpr int64_t k{split.capitalize()}TotalPixelSum = {total};")


if __name__ == "__main__":
    main()
