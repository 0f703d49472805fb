package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOrderExperimentShort is the short version of bench/order_experiment.py: Fashion-MNIST
// stored sorted by class, a 2-layer MLP trained from the mount (2 seeds, 3 epochs). It fails if
// the defaults (full shuffle of pre-shuffled data; the sorted .npy served in place with no
// flags; the global batches of 4 node-aware mounts of the class-sorted pack) fall more than 1
// point of accuracy below a true uniform shuffle, or if no shuffle on class-sorted data does not fall clearly below it
// (so the experiment can tell a good order from a bad one).
func TestOrderExperimentShort(t *testing.T) {
	requireFUSE(t)
	py := systemPython(t)
	if _, err := os.Stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); err != nil {
		msg := "Fashion-MNIST is missing (apt-get install dataset-fashion-mnist)"
		if os.Getenv("BLOCKFS_REQUIRE_FUSE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out := filepath.Join(t.TempDir(), "short.json")
	cmd := exec.Command(py, "../bench/order_experiment.py", "--short", "--blockfs", bin,
		"--work", t.TempDir(), "--json", out)
	log, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", log)
	t.Logf("%s", log)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	var results []struct {
		Config   string  `json:"config"`
		Accuracy float64 `json:"accuracy"`
	}
	require.NoError(t, json.Unmarshal(raw, &results))
	acc := map[string]float64{}
	for _, r := range results {
		acc[r.Config] = r.Accuracy
	}
	uniform := acc["uniform shuffle (reference, in memory)"]
	defaults := acc["full, pre-shuffled (the defaults)"]
	inPlace := acc["in place, class-sorted .npy (the defaults)"]
	none := acc["none, class-sorted"]
	nodes := acc["4 nodes (--nodes 4), class-sorted"]
	require.Positive(t, uniform)
	assert.GreaterOrEqual(t, defaults, uniform-1, "the defaults are within 1 point of a uniform shuffle")
	assert.GreaterOrEqual(t, inPlace, uniform-1, "a class-sorted .npy served in place with default flags is within 1 point of a uniform shuffle")
	assert.GreaterOrEqual(t, nodes, uniform-1, "class-sorted data trained on the global batches of 4 node-aware mounts is within 1 point of a uniform shuffle")
	assert.LessOrEqual(t, none, uniform-10, "no shuffle on class-sorted data falls clearly below")
}
