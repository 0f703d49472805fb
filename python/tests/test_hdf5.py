"""blockfs.hdf5 without a mount: the options it gives for each kind of HDF5 dataset, what it
refuses and how, and to_npy's copy. test/inplace_test.go's TestHDF5InPlace mounts with them."""
import contextlib
import io
import os
import shutil
import tempfile
import unittest

import numpy as np

import support  # noqa: F401 (first: it finds the blockfs package and binary)

import blockfs.hdf5

try:
    import h5py
except ImportError:  # TestPythonPackage fails on a skip: make test installs python3-h5py
    h5py = None


@unittest.skipIf(h5py is None, "h5py is not installed (apt-get install python3-h5py)")
class HDF5Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="blockfs-h5-")
        cls.h5 = os.path.join(cls.tmp, "t.h5")
        cls.x = np.arange(300 * 4, dtype=np.float32).reshape(300, 4)
        with h5py.File(cls.h5, "w") as f:
            f.create_dataset("x", data=cls.x)
            f.create_dataset("g/be", data=cls.x.astype(">f8"))
            f.create_dataset("arr", data=np.zeros(10, dtype=("<i2", (2, 3))))
            f.create_dataset("rec", data=np.zeros(10, dtype=[("a", "<i4"), ("b", "<f8")]))
            f.create_dataset("flags", data=np.array([True, False] * 5))
            f.create_dataset("z", data=cls.x, chunks=(50, 4), compression="gzip")
            f.create_dataset("c", data=cls.x, chunks=(50, 4))
            f.create_dataset("text", data=["a", "bcd"], dtype=h5py.string_dtype())
            f.create_dataset("none", shape=(0, 4), dtype="f4")
            f.create_dataset("unwritten", shape=(10, 4), dtype="f4")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_options_say_where_and_what(self):
        o = blockfs.hdf5.mount_options(self.h5, "x")
        self.assertEqual({k: v for k, v in o.items() if k != "offset"},
                         {"record_size": 16, "records": 300, "dtype": "<f4", "shape": "4"})
        with open(self.h5, "rb") as f:
            f.seek(o["offset"])
            self.assertEqual(f.read(16 * 300), self.x.tobytes(), "the rows are at offset")
        self.assertEqual(blockfs.hdf5.mount_options(self.h5, "g/be")["dtype"], ">f8")
        arr = blockfs.hdf5.mount_options(self.h5, "arr")
        self.assertEqual((arr["record_size"], arr["dtype"], arr["shape"]), (12, "<i2", "2,3"), "an array type's dimensions are the row's")
        rec = blockfs.hdf5.mount_options(self.h5, "rec")
        self.assertEqual(rec["record_size"], 12)
        self.assertNotIn("dtype", rec, "a compound type stays bytes")
        flags = blockfs.hdf5.mount_options(self.h5, "flags")
        self.assertEqual((flags["dtype"], "shape" in flags), ("|b1", False))

    def test_refusals(self):
        for name in ("z", "c"):
            with self.assertRaisesRegex(blockfs.hdf5.NotInPlaceError, "it is not one run of bytes in the file.*to-npy"):
                blockfs.hdf5.mount_options(self.h5, name)
        for name, want in (("nope", r"has no dataset 'nope' \(it has: arr, c, flags, g/be, none, rec, text, unwritten, x, z\)"),
                           ("g", "is a group"), ("text", "variable-length"), ("none", "has no rows"),
                           ("unwritten", "never written")):
            with self.assertRaisesRegex(ValueError, want) as e:
                blockfs.hdf5.mount_options(self.h5, name)
            self.assertNotIsInstance(e.exception, blockfs.hdf5.NotInPlaceError, name)
            self.assertNotIn("\n", str(e.exception))

    def test_to_npy(self):
        out = os.path.join(self.tmp, "z.npy")
        self.assertEqual(blockfs.hdf5.to_npy(self.h5, "z", out, chunk_mib=1), out)
        np.testing.assert_array_equal(np.load(out), self.x)
        arr = os.path.join(self.tmp, "arr.npy")
        blockfs.hdf5.to_npy(self.h5, "arr", arr)
        self.assertEqual(np.load(arr).shape, (10, 2, 3))
        with self.assertRaisesRegex(ValueError, "variable-length"):
            blockfs.hdf5.to_npy(self.h5, "text", os.path.join(self.tmp, "text.npy"))
        with self.assertRaisesRegex(ValueError, "chunk_mib"):
            blockfs.hdf5.to_npy(self.h5, "z", out, chunk_mib=0)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["arr.npy", "t.h5", "z.npy"], "nothing half-written left")

    def test_command(self):
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            self.assertEqual(blockfs.hdf5.main(["flags", self.h5, "x"]), 0)
            self.assertEqual(blockfs.hdf5.main(["flags", self.h5, "z"]), 1)
        o = blockfs.hdf5.mount_options(self.h5, "x")
        self.assertEqual(stdout.getvalue(), f"--record-size 16 --offset {o['offset']} --records 300 --dtype <f4 --shape 4\n")
        lines = stderr.getvalue().splitlines()
        self.assertEqual(lines[0], f"x: 300 rows of float32 (4,), 16 bytes each, at byte {o['offset']} of {self.h5}")
        self.assertRegex(lines[1], "^blockfs.hdf5: 'z' in .* is compressed: ")
        self.assertEqual(len(lines), 2)


if __name__ == "__main__":
    unittest.main()
