"""Sets of real PyTorch snapshots as the project keeps them: files beside an index, or packed in
`*.tar.zst` archives (unpacked with `tar --zstd`, which needs the zstd command). Shared by
scripts/score-diagnoses.py and scripts/score-predictions.py."""
import glob
import os
import subprocess


class UnpackError(Exception):
    pass


def unpack(directory, work):
    """The directory's snapshots by file name: those in its archives, unpacked into
    WORK/snapshots, and the .pickle / .pkl files beside them."""
    files = {}
    for archive in sorted(glob.glob(os.path.join(directory, "*.tar.zst"))):
        dest = os.path.join(work, "snapshots")
        os.makedirs(dest, exist_ok=True)
        r = subprocess.run(["tar", "--zstd", "-xf", archive, "-C", dest], capture_output=True, text=True)
        if r.returncode != 0:
            raise UnpackError(f"{archive}: cannot unpack ({r.stderr.strip()}; tar needs the zstd command)")
        for name in os.listdir(dest):
            files[name] = os.path.join(dest, name)
    for path in glob.glob(os.path.join(directory, "*")):
        name = os.path.basename(path)
        if name.endswith((".pickle", ".pkl")):
            files[name] = path
    return files
