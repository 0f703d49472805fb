// Command blocksize measures cold random-order block reads of a file for several block sizes,
// the measurement behind the default block size in docs/FORMAT.md. Run as root (it drops the
// page cache): go run ./scripts/blocksize FILE
package main

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: blocksize FILE   (a file of a few GiB; run as root)")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	st, err := f.Stat()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buf := make([]byte, 1<<20)
	for round := 0; round < 3; round++ {
		for _, bs := range []int64{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20} {
			if err := exec.Command("sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches").Run(); err != nil {
				fmt.Fprintln(os.Stderr, "cannot drop the page cache (run as root):", err)
				os.Exit(1)
			}
			nb := st.Size() / bs
			start := time.Now()
			for _, b := range rand.Perm(int(nb)) {
				for o := int64(0); o < bs; o += int64(len(buf)) {
					n := min(int64(len(buf)), bs-o)
					if _, err := f.ReadAt(buf[:n], int64(b)*bs+o); err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(1)
					}
				}
			}
			el := time.Since(start).Seconds()
			fmt.Printf("round %d block %8d KiB: %6.0f MB/s\n", round, bs>>10, float64(nb*bs)/el/1e6)
		}
	}
}
