"""blockfs.Mount with a dataset in an object store (s3://): the same order, bytes and batches
as the same data packed locally, through the Loader and with a disk cache, and a second
process attaches to the one mount. test/python_pkg_test.go starts MinIO and sets
BLOCKFS_TEST_S3_ENDPOINT and BLOCKFS_TEST_S3_BUCKET (and the AWS credential variables)."""
import os
import unittest

import numpy as np

from support import Scratch, run

import blockfs
import blockfs.torch

EP = os.environ.get("BLOCKFS_TEST_S3_ENDPOINT")
BUCKET = os.environ.get("BLOCKFS_TEST_S3_BUCKET")


@unittest.skipUnless(EP and BUCKET, "needs an object store: BLOCKFS_TEST_S3_ENDPOINT and BLOCKFS_TEST_S3_BUCKET")
class S3Test(Scratch):
    def test_mount_and_loader_from_s3(self):
        url = "s3://%s/py/ds" % BUCKET
        run("pack", "--quiet", "--endpoint", EP, "--block-size", "4KiB", self.data + ".npy", url)
        dc = os.path.join(self.tmp, "disk-cache")
        opts = dict(seed=4, endpoint=EP, disk_cache=dc, cache_size="32MiB")
        with blockfs.Mount(self.data, seed=4) as local, blockfs.Mount(url, **opts) as m:
            self.assertTrue(m.owner)
            self.assertEqual(m.info["fingerprint"], local.info["fingerprint"])
            self.assertEqual(m.info["disk_cache"], dc)
            for e in (0, 1):
                np.testing.assert_array_equal(blockfs.order(m, e), blockfs.order(local, e))
            with open(blockfs.epoch_path(m, 1), "rb") as f, open(blockfs.epoch_path(local, 1), "rb") as g:
                self.assertEqual(f.read(), g.read(), "epoch 1's bytes")
            # Another Mount of the same URL and options attaches to this one.
            again = blockfs.Mount(url, **opts).open()
            self.assertFalse(again.owner)
            self.assertEqual(again.path, m.path)
            again.close()
            loader = blockfs.torch.Loader(m, 256, num_workers=2, epoch=2)
            with loader:
                got = []
                for ids, x in loader:
                    self.check_records(ids.numpy(), x.numpy())
                    got.append(ids.numpy())
            np.testing.assert_array_equal(np.concatenate(got), blockfs.order(local, 2))
            self.assertEqual((loader.epoch, loader.position), (3, 0))
            self.assertTrue(os.listdir(dc), "the disk cache holds the fetched blocks")
        self.assertFalse(os.path.exists(m.path), "unmounted, and the default mountpoint removed")


if __name__ == "__main__":
    unittest.main()
