package mount

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"time"

	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/internal/mountinfo"
	"github.com/blockfs/blockfs/internal/sysmem"
	"github.com/blockfs/blockfs/view"
	"golang.org/x/sys/unix"
)

// Claim is what one blockfs mount that is up planned for data, from the "memory" of its
// .blockfs/info.json.
type Claim struct {
	Cache       int64  // its daemon's cache
	Resident    int64  // the blocks it keeps resident in the kernel's page cache
	Cgroup      string // the memory cgroup its plan was made in
	OpenData    string // what it serves: the DATA it was mounted from, absolute
	Fingerprint string // the dataset's fingerprint
}

// Claimed returns what the blockfs mounts already up planned for data out of the memory mem
// describes, for a new mount of openData (absolute) with the given fingerprint to plan its
// budget within what they leave, so that two mounts do not each take the same share.
// Within a cgroup limit only the mounts whose daemons are charged to that cgroup (it or one
// below it) count; without one, every mount. A mount of the same data shares its resident set
// (blocks are chosen by number, so it is the same pages): only its cache counts; the mounts of
// one other dataset count its largest resident set once.
func Claimed(mem sysmem.Memory, openData, fingerprint string, timeout time.Duration) int64 {
	var n int64
	resident := map[[2]string]int64{} // by dataset: the largest resident set of its mounts
	for _, c := range claims(timeout) {
		if !mem.Contains(c.Cgroup) {
			continue
		}
		n += c.Cache
		if k := [2]string{c.OpenData, c.Fingerprint}; k != [2]string{openData, fingerprint} {
			resident[k] = max(resident[k], c.Resident)
		}
	}
	for _, r := range resident {
		n += r
	}
	return n
}

// claims returns what the blockfs mounts up in this mount namespace planned, from their
// info.json. A mount whose info.json cannot be read (another user's, a dead daemon's) or that
// does not answer within timeout is left out; the reads run in parallel, so the wait is at most
// timeout. A read stuck in a hung daemon stays stuck, in its own goroutine, until that daemon
// answers or goes: readQuarantined keeps it from taking this process's signals with it.
func claims(timeout time.Duration) []Claim {
	mounts, err := mountinfo.Read("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mnts []string
	own := servedHere() // a /dev/fd/N mount this process is about to serve
	for _, m := range mounts {
		if m.FSType == "fuse."+bfs.Type && !own[m.Dev] {
			mnts = append(mnts, m.Mountpoint)
		}
	}
	type answer struct {
		c  Claim
		ok bool
	}
	ch := make(chan answer, len(mnts)) // a late answer never blocks its goroutine
	for _, mnt := range mnts {
		go func() {
			b, err := readQuarantined(filepath.Join(mnt, view.MetaDir, view.InfoName))
			var info struct {
				OpenData    string `json:"open_data"`
				Fingerprint string `json:"fingerprint"`
				Memory      struct {
					Cache    int64  `json:"cache"`
					Resident int64  `json:"resident"`
					Cgroup   string `json:"cgroup"`
				} `json:"memory"`
			}
			if err != nil || json.Unmarshal(b, &info) != nil {
				ch <- answer{}
				return
			}
			ch <- answer{Claim{Cache: info.Memory.Cache, Resident: info.Memory.Resident,
				Cgroup: info.Memory.Cgroup, OpenData: info.OpenData, Fingerprint: info.Fingerprint}, true}
		}()
	}
	var out []Claim
	deadline := time.After(timeout)
	for range mnts {
		select {
		case a := <-ch:
			if a.ok {
				out = append(out, a.c)
			}
		case <-deadline:
			return out
		}
	}
	return out
}

// readQuarantined reads a file that may sit behind a hung FUSE daemon, on an OS thread of its
// own with every signal blocked. A request to a FUSE daemon waits uninterruptibly for its
// answer, and the kernel may hand a signal sent to the process (SIGTERM from blockfs unmount's
// caller, Slurm, Kubernetes) to any thread that does not block it: to the stuck one, it would
// stay pending until the other daemon answered, and this mount would not stop. The goroutine
// ends still locked to its thread, so the thread, with its mask, ends with it.
//
// It reads with plain system calls, not os.ReadFile: os.Open registers a file with the
// runtime's poller, and on FUSE that epoll_ctl is itself a request (POLL), made outside a
// system call as the scheduler counts them. Waiting there, on a mount this process serves (a
// /dev/fd/N mount on a kernel that does not name its connection, servedHere), the thread would
// stall the next garbage collection's stop of the world, and with it the server that would
// answer: the whole process, and the kernel, would wait forever.
func readQuarantined(path string) ([]byte, error) {
	runtime.LockOSThread()
	var all unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^all.Val[i]
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, nil); err != nil {
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}
