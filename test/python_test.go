package test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// systemPython returns Debian's python3 with numpy and torch (BLOCKFS_PYTHON overrides); the
// test skips without them, or fails under BLOCKFS_REQUIRE_FUSE=1 (requirePython).
func systemPython(t *testing.T) string {
	t.Helper()
	return requirePython(t, "numpy", "torch")
}

// pyCheck runs test/testdata/loader_checks.py and returns its "ok ..." line.
func pyCheck(t *testing.T, py string, args ...string) string {
	t.Helper()
	cmd := exec.Command(py, append([]string{"testdata/loader_checks.py"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loader_checks.py %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	out := strings.TrimSpace(stdout.String())
	require.True(t, strings.HasPrefix(out, "ok"), out)
	return out
}

// float32Npy writes rows x cols float32 values from fill as a .npy file.
func float32Npy(t *testing.T, dir string, rows, cols int, fill func(r, c int) float32) string {
	t.Helper()
	data := make([]byte, 0, rows*cols*4)
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(fill(r, c)))
		}
	}
	return npyFile(t, dir, fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols), data)
}

func TestPyTorchFixed(t *testing.T) {
	t.Parallel() // one core's work (a Python reader and the daemon taking turns): beside the tests that mostly wait
	py := systemPython(t)
	rng := rand.New(rand.NewSource(1))
	src := float32Npy(t, t.TempDir(), 3001, 16, func(r, c int) float32 { return rng.Float32() })
	dst := packCLI(t, src, "--block-size", "16KiB") // 256 records a block
	m := mount(t, dst, "--cache-size", "8MiB", "--readahead", "256KiB", "--mix", "2")
	first := pyCheck(t, py, "epochs", m.dir, src)
	assert.Equal(t, first, pyCheck(t, py, "epochs", m.dir, src), "the same epochs read again give the same orders")
	pyCheck(t, py, "ranks", m.dir)
	pyCheck(t, py, "resume", m.dir)
	pyCheck(t, py, "memmap", m.dir)
}

func TestPyTorchVariable(t *testing.T) {
	t.Parallel() // one core's work (a Python reader and the daemon taking turns): beside the tests that mostly wait
	py := systemPython(t)
	rng := rand.New(rand.NewSource(2))
	var b strings.Builder
	for i := 0; i < 2500; i++ {
		fmt.Fprintf(&b, "{\"id\": %d, \"text\": %q}\n", i, strings.Repeat("w", rng.Intn(400)))
	}
	src := filepath.Join(t.TempDir(), "records.jsonl")
	require.NoError(t, os.WriteFile(src, []byte(b.String()), 0o644))
	dst := packCLI(t, src, "--block-size", "32KiB")
	m := mount(t, dst, "--cache-size", "8MiB", "--readahead", "256KiB")
	first := pyCheck(t, py, "epochs", m.dir, src)
	assert.Equal(t, first, pyCheck(t, py, "epochs", m.dir, src))
	pyCheck(t, py, "ranks", m.dir)
	pyCheck(t, py, "resume", m.dir)
}

// TestTrainingLoop trains logistic regression on a linearly separable dataset stored in
// blockfs, fed only from the mount, and requires the loss to fall.
func TestTrainingLoop(t *testing.T) {
	py := systemPython(t)
	const d = 8
	rng := rand.New(rand.NewSource(3))
	w := make([]float64, d)
	for i := range w {
		w[i] = rng.NormFloat64()
	}
	rows := make([][]float32, 4000)
	for r := range rows {
		x := make([]float32, d+1)
		var dot float64
		for c := 0; c < d; c++ {
			x[c] = float32(rng.NormFloat64())
			dot += w[c] * float64(x[c])
		}
		if dot > 0 {
			x[d] = 1
		}
		rows[r] = x
	}
	// Stored sorted by label: the worst layout, which pack's pre-shuffle and the epoch order undo.
	src := float32Npy(t, t.TempDir(), len(rows), d+1, func(r, c int) float32 { return rows[r][c] })
	dst := packCLI(t, src, "--block-size", "16KiB")
	m := mount(t, dst, "--cache-size", "8MiB", "--readahead", "256KiB")
	out := pyCheck(t, py, "train", m.dir)
	t.Log(out)
}

func TestExamplesRun(t *testing.T) {
	py := systemPython(t)
	rng := rand.New(rand.NewSource(4))
	src := float32Npy(t, t.TempDir(), 1000, 4, func(r, c int) float32 { return rng.Float32() })
	dst := packCLI(t, src, "--block-size", "4KiB")
	m := mount(t, dst, "--cache-size", "8MiB", "--readahead", "256KiB")
	out, err := exec.Command(py, "../docs/examples/numpy_memmap.py", m.dir, "--epoch", "1").CombinedOutput()
	require.NoError(t, err, "numpy_memmap.py: %s", out)
	assert.Contains(t, string(out), "1000 records")

	// The training example mounts the dataset itself, stops after 5 batches with a checkpoint
	// and resumes from it: the resumed run finishes epoch 0 with the 1000 - 5*64 records left.
	runtime, ckpt := runtimeDir(t), filepath.Join(t.TempDir(), "ckpt.pt")
	train := func(args ...string) string {
		cmd := exec.Command(py, append([]string{"../docs/examples/pytorch_train.py", dst, "--checkpoint", ckpt}, args...)...)
		cmd.Env = append(os.Environ(), "PYTHONPATH=../python", "BLOCKFS_BIN="+bin, "BLOCKFS_RUNTIME_DIR="+runtime)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "pytorch_train.py %v: %s", args, out)
		return string(out)
	}
	assert.Contains(t, train("--stop-after", "5", "--workers", "3"), "stopped after 5 batches, at epoch 0 record 320")
	out2 := train("--workers", "1")
	assert.Contains(t, out2, "resumed at epoch 0, record 320")
	assert.Contains(t, out2, "epoch 0: 680 records")
	assert.Contains(t, out2, "epoch 1: 1000 records")
	out, err = exec.Command("sh", "../docs/examples/shell.sh", m.dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "bytes_served")
}
