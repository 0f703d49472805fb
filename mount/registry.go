package mount

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/internal/mountinfo"
	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/view"
)

// The registry: each daemon writes what it claimed of memory (its Claim), its pid and where it
// is mounted to a small regular file, PID.json in RegistryDir, once its mount is up, and
// removes it when it ends. A new mount plans its memory from these files, never from the
// other mounts' own .blockfs/info.json: a read there waits for that mount's daemon, and one
// that is stopped or hung never answers (the reading thread, and the lookups of every other
// process after it on the same name, waited in the kernel, some unkillably, until it did).
//
// An entry counts while its daemon lives (the pid with the start time it wrote) and its FUSE
// connection is mounted as fuse.blockfs in this mount namespace; an entry whose daemon is gone
// (killed before it could remove it) is removed by the next mount that reads it. The
// directory is private to the user (mode 0700, owned, not a symlink), as each user's mounts
// were private before (another user's info.json could not be read either).

// registryMax bounds one entry's file (a few hundred bytes).
const registryMax = 64 << 10

// entry is one daemon's file in the registry.
type entry struct {
	PID        int    `json:"pid"`
	Start      uint64 `json:"start"`      // the daemon's start time, /proc/PID/stat field 22
	Mountpoint string `json:"mountpoint"` // where it is mounted ("" when unknown: /dev/fd/N on an older kernel)
	Dev        string `json:"dev"`        // its FUSE connection, as mountinfo names it ("0:38"); "" when unknown
	Claim      Claim  `json:"claim"`
}

// RegistryDir returns the directory of the registry: /run/blockfs/mounts for root, else
// /run/user/UID/blockfs-mounts where the user has a runtime directory, else
// /tmp/blockfs-mounts-UID. It depends on nothing in the environment, so every daemon and
// command of a user finds the same one.
func RegistryDir() string {
	uid := os.Geteuid()
	if uid == 0 {
		return "/run/blockfs/mounts"
	}
	run := fmt.Sprintf("/run/user/%d", uid)
	if st, err := os.Lstat(run); err == nil && st.IsDir() && owner(st) == uid {
		return filepath.Join(run, "blockfs-mounts")
	}
	return fmt.Sprintf("/tmp/blockfs-mounts-%d", uid)
}

// privateDir makes dir (and, for /run/blockfs, its parent) and checks it is a directory of
// this user that only this user can enter.
func privateDir(dir string) error {
	if parent := filepath.Dir(dir); parent == "/run/blockfs" {
		if err := os.Mkdir(parent, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return checkPrivate(dir)
}

// checkPrivate says why dir is not a private directory of this user, or nil.
func checkPrivate(dir string) error {
	st, err := os.Lstat(dir)
	switch {
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case owner(st) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d)", dir, owner(st), os.Geteuid())
	case st.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s has mode %04o, which lets others in", dir, st.Mode().Perm())
	}
	return nil
}

func owner(st fs.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

// register writes this daemon's entry for its mount at mnt (absolute, or /dev/fd/N), whose
// info.json facts are facts, and returns the function that removes it. A registry that cannot
// be written is logged: the mount serves on, and mounts after it plan without its claim.
func register(mnt string, facts map[string]any) (remove func()) {
	c, err := claimOf(facts)
	if err == nil {
		e := entry{PID: os.Getpid(), Start: startTime(os.Getpid()), Claim: c}
		e.Mountpoint, e.Dev = connection(mnt)
		err = writeEntry(RegistryDir(), e)
	}
	if err != nil {
		log.Printf("blockfs: cannot record this mount's memory in %s (%v); mounts made while it is up plan as if it took none", RegistryDir(), err)
		return func() {}
	}
	path := entryPath(RegistryDir(), os.Getpid())
	return func() { os.Remove(path) }
}

// claimOf decodes a mount's Claim from its info.json facts, as other mounts read it.
func claimOf(facts map[string]any) (Claim, error) {
	b, err := json.Marshal(facts)
	if err != nil {
		return Claim{}, err
	}
	var info struct {
		OpenData    string `json:"open_data"`
		Fingerprint string `json:"fingerprint"`
		Memory      struct {
			Cache    int64  `json:"cache"`
			Resident int64  `json:"resident"`
			Cgroup   string `json:"cgroup"`
		} `json:"memory"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return Claim{}, err
	}
	return Claim{Cache: info.Memory.Cache, Resident: info.Memory.Resident, Cgroup: info.Memory.Cgroup,
		OpenData: info.OpenData, Fingerprint: info.Fingerprint}, nil
}

// connection returns where this process's mount at mnt is mounted and its FUSE connection's
// device, from /proc/self/mountinfo: the topmost fuse.blockfs mount at mnt, or for /dev/fd/N
// the one on the connection this process holds (servedHere; unknown on a kernel that does not
// name it).
func connection(mnt string) (mountpoint, dev string) {
	mounts, _ := mountinfo.Read("/proc/self/mountinfo")
	if bfs.FuseFD(mnt) >= 0 {
		for d := range servedHere() {
			dev = d
		}
		for _, m := range mounts {
			if dev != "" && m.Dev == dev && m.FSType == "fuse."+bfs.Type {
				mountpoint = m.Mountpoint
			}
		}
		return mountpoint, dev
	}
	for _, m := range mounts {
		if m.Mountpoint == mnt {
			mountpoint, dev = mnt, m.Dev // a later line is mounted over an earlier one
		}
	}
	return mountpoint, dev
}

func entryPath(dir string, pid int) string { return filepath.Join(dir, strconv.Itoa(pid)+".json") }

// writeEntry writes e to dir atomically (a temporary file renamed over PID.json).
func writeEntry(dir string, e entry) error {
	if err := privateDir(dir); err != nil {
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), entryPath(dir, e.PID))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// readEntries returns the live entries of the registry in dir, but this process's: those whose
// daemon lives and whose connection is a fuse.blockfs mount in mounts. It removes the files of
// daemons that are gone. Only regular files are read, each at most registryMax bytes.
func readEntries(dir string, mounts []mountinfo.Mount) []entry {
	if checkPrivate(dir) != nil {
		return nil
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []entry
	for _, de := range names {
		pid, err := strconv.Atoi(strings.TrimSuffix(de.Name(), ".json"))
		if err != nil || !strings.HasSuffix(de.Name(), ".json") || pid <= 0 || pid == os.Getpid() {
			continue
		}
		path := filepath.Join(dir, de.Name())
		b, err := userfile.ReadFile(path, registryMax)
		var e entry
		if err != nil || json.Unmarshal(b, &e) != nil || e.PID != pid {
			continue
		}
		if e.Start == 0 || startTime(pid) != e.Start {
			os.Remove(path) // its daemon is gone (the pid may be another process's now)
			continue
		}
		if mounted(mounts, e) {
			out = append(out, e)
		}
	}
	return out
}

// mounted reports whether e's connection is a fuse.blockfs mount in mounts (at its
// mountpoint, when e names one). An entry that knows neither counts while its daemon lives.
func mounted(mounts []mountinfo.Mount, e entry) bool {
	if e.Dev == "" && e.Mountpoint == "" {
		return true
	}
	for _, m := range mounts {
		if m.FSType == "fuse."+bfs.Type && (e.Dev == "" || m.Dev == e.Dev) && (e.Mountpoint == "" || m.Mountpoint == e.Mountpoint) {
			return true
		}
	}
	return false
}

// startTime returns process pid's start time (clock ticks after boot, /proc/PID/stat field
// 22), or 0 when there is no such process.
func startTime(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces: count after its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64) // field 22 is the 20th after the name
	return v
}

// Daemon returns the pid of the daemon serving the blockfs mount at mnt (absolute), from the
// registry, and whether it is stopped (SIGSTOP, a debugger); 0 when none is registered there.
func Daemon(mnt string) (pid int, stopped bool) {
	mounts, _ := mountinfo.Read("/proc/self/mountinfo")
	for _, e := range readEntries(RegistryDir(), mounts) {
		if e.Mountpoint == mnt {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.PID))
			st := string(b[strings.LastIndexByte(string(b), ')')+1:]) // " T ..." after the name
			st = strings.TrimSpace(st)
			return e.PID, strings.HasPrefix(st, "T") || strings.HasPrefix(st, "t")
		}
	}
	return 0, false
}

// IsBlockfsMountpoint reports whether the topmost mount at path (absolute and clean, symlinks
// not followed) is a fuse.blockfs one in /proc/self/mountinfo. It touches nothing under path,
// so it answers even when that mount's daemon does not.
func IsBlockfsMountpoint(path string) bool {
	mounts, _ := mountinfo.Read("/proc/self/mountinfo")
	top := ""
	for _, m := range mounts {
		if m.Mountpoint == path {
			top = m.FSType // a later line is mounted over an earlier one
		}
	}
	return top == "fuse."+bfs.Type
}

// infoFacts returns what the mount's .blockfs/info.json says (fs's infoFacts): the set's facts
// and the mount's own.
func infoFacts(set view.Served, extra map[string]any) map[string]any {
	f := set.Facts()
	for k, v := range extra {
		f[k] = v
	}
	return f
}
