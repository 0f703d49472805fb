package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/internal/mountinfo"
	"github.com/blockfs/blockfs/internal/privdir"
)

// The registry: each daemon writes what it claimed of memory (its Claim), its pid and where it
// is mounted to a small regular file, NS-PID.json in RegistryDir (NS: the inode of its pid
// namespace, as daemons in containers may share a directory and a uid but not pids), once its
// mount is up, and removes it when it ends. A new mount plans its memory from these files, never from the
// other mounts' own .blockfs/info.json: a read there waits for that mount's daemon, and one
// that is stopped or hung never answers (the reading thread, and the lookups of every other
// process after it on the same name, waited in the kernel, some unkillably, until it did).
//
// An entry counts while its daemon lives (the pid with the start time it wrote) and its FUSE
// connection is mounted as fuse.blockfs in this mount namespace; an entry whose daemon is gone
// (killed before it could remove it) is removed by the next mount that reads it, unless a new
// daemon with its pid wrote its own entry meanwhile (removeStale). Entries of other pid
// namespaces are skipped, never removed: their pids mean nothing here. The
// directory is private to the user (mode 0700, owned, not a symlink), as each user's mounts
// were private before (another user's info.json could not be read either).

// registryMax bounds one entry's file (a few hundred bytes).
const registryMax = 64 << 10

// entry is one daemon's file in the registry.
type entry struct {
	NS         uint64 `json:"pidns"` // the inode of its pid namespace (/proc/self/ns/pid); 0 when unknown
	PID        int    `json:"pid"`
	Start      uint64 `json:"start"`      // the daemon's start time, /proc/PID/stat field 22
	Mountpoint string `json:"mountpoint"` // where it is mounted ("" when unknown: /dev/fd/N on an older kernel)
	Dev        string `json:"dev"`        // its FUSE connection, as mountinfo names it ("0:38"); "" when unknown
	Claim      Claim  `json:"claim"`
}

// registryDirs returns the directories the registry may be in, the one a daemon writes to
// first when it can: /run/blockfs/mounts for root; else /run/user/UID/blockfs-mounts, and
// /tmp/blockfs-mounts-UID for a daemon that runs while the user has no runtime directory
// (logind makes /run/user/UID at a user's first login and deletes it at the last logout, so a
// daemon from cron or a batch job may find none while an interactive one finds it). They
// depend on nothing in the environment, so every daemon and command of a user knows the same
// ones. A variable for tests.
var registryDirs = func() []string {
	uid := os.Geteuid()
	if uid == 0 {
		return []string{"/run/blockfs/mounts"}
	}
	return []string{fmt.Sprintf("/run/user/%d/blockfs-mounts", uid), fmt.Sprintf("/tmp/blockfs-mounts-%d", uid)}
}

// RegistryDir returns the directory a daemon writes its entry to: the first of registryDirs
// whose parent is a directory of this user (for root, the only one), else the last. Readers
// read them all (readRegistry).
func RegistryDir() string {
	dirs := registryDirs()
	if os.Geteuid() == 0 {
		return dirs[0]
	}
	for _, d := range dirs[:len(dirs)-1] {
		if st, err := os.Lstat(filepath.Dir(d)); err == nil && st.IsDir() && privdir.Owner(st) == os.Geteuid() {
			return d
		}
	}
	return dirs[len(dirs)-1]
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
	case privdir.Owner(st) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d)", dir, privdir.Owner(st), os.Geteuid())
	case st.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s has mode %04o, which lets others in", dir, st.Mode().Perm())
	}
	return nil
}

// Register writes this daemon's entry for its mount at mnt (absolute, or /dev/fd/N), whose
// info.json facts are facts, and returns the function that removes it. A registry that cannot
// be written is logged: the mount serves on, and mounts after it plan without its claim.
func Register(mnt string, facts map[string]any) (remove func()) {
	if !WriteClaim(facts, mnt) {
		return func() {}
	}
	path := entryPath(RegistryDir(), pidNS(), os.Getpid())
	return func() { os.Remove(path) }
}

// WriteClaim writes this daemon's entry: the claim in facts (info.json's), at mnt once
// mounted ("" before: an entry that names no mount counts while its daemon lives). A registry
// that cannot be written is logged and reported false.
func WriteClaim(facts map[string]any, mnt string) bool {
	c, err := claimOf(facts)
	if err == nil {
		e := entry{NS: pidNS(), PID: os.Getpid(), Start: startTime(os.Getpid()), Claim: c}
		if mnt != "" {
			e.Mountpoint, e.Dev = connection(mnt)
		}
		err = writeEntry(RegistryDir(), e)
	}
	if err != nil {
		log.Printf("blockfs: cannot record this mount's memory in %s (%v); mounts made while it is up plan as if it took none", RegistryDir(), err)
	}
	return err == nil
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

// entryPath returns the path of the entry of process pid of pid namespace ns in dir.
func entryPath(dir string, ns uint64, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("%d-%d.json", ns, pid))
}

// parseName returns the pid namespace and the pid an entry's file name NS-PID.json says, and
// false for any other name.
func parseName(name string) (ns uint64, pid int, ok bool) {
	n, p, found := strings.Cut(strings.TrimSuffix(name, ".json"), "-")
	if !found || !strings.HasSuffix(name, ".json") {
		return 0, 0, false
	}
	ns, err1 := strconv.ParseUint(n, 10, 64)
	pid, err2 := strconv.Atoi(p)
	return ns, pid, err1 == nil && err2 == nil && pid > 0
}

// pidNS returns the inode of this process's pid namespace (readlink /proc/self/ns/pid says
// "pid:[INODE]"), or 0 where it cannot be read.
func pidNS() uint64 {
	l, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "pid:["), "]"), 10, 64)
	return v
}

// writeEntry writes e to dir atomically (a temporary file renamed over NS-PID.json).
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
		err = os.Rename(tmp.Name(), entryPath(dir, e.NS, e.PID))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// readRegistry returns the live entries of every registry directory (registryDirs): a daemon
// writes to the one it found, which need not be the one this process would write to.
func readRegistry(mounts []mountinfo.Mount) []entry {
	var out []entry
	for _, d := range registryDirs() {
		out = append(out, readEntries(d, mounts)...)
	}
	return out
}

// readEntries returns the live entries of the registry in dir, but this process's: those of
// this pid namespace whose daemon lives and whose connection is a fuse.blockfs mount in mounts.
// It removes the files of daemons that are gone. Only regular files are read (not through a
// symlink), each at most registryMax bytes.
func readEntries(dir string, mounts []mountinfo.Mount) []entry {
	if checkPrivate(dir) != nil {
		return nil
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	self := pidNS()
	var out []entry
	for _, de := range names {
		ns, pid, ok := parseName(de.Name())
		if !ok || ns != self || pid == os.Getpid() || !de.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, de.Name())
		e, err := readEntryFile(path)
		if err != nil || e.PID != pid || e.NS != ns {
			continue
		}
		if e.Start == 0 || startTime(pid) != e.Start {
			removeStale(path) // its daemon is gone (the pid may be another process's now)
			continue
		}
		if mounted(mounts, e) {
			out = append(out, e)
		}
	}
	return out
}

// readEntryFile reads the entry in the regular file at path, which it opens without following
// a symlink or waiting (a FIFO), refusing one of more than registryMax bytes.
func readEntryFile(path string) (entry, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return entry{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return entry{}, err
	}
	if !st.Mode().IsRegular() || st.Size() > registryMax {
		return entry{}, fmt.Errorf("%s: not a regular file of at most %d bytes", path, registryMax)
	}
	b, err := io.ReadAll(io.LimitReader(f, registryMax))
	var e entry
	if err == nil {
		err = json.Unmarshal(b, &e)
	}
	return e, err
}

// removeStale removes the entry at path, read as one whose daemon is gone, unless it is no
// longer stale: a new daemon that got the same pid may have written its own there since it was
// read. It takes the file away first (a rename, atomic), then checks what it took: a live
// daemon's entry goes back (a link, which never replaces one written meanwhile).
func removeStale(path string) {
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".stale-%d-%s", os.Getpid(), filepath.Base(path)))
	if os.Rename(path, tmp) != nil {
		return
	}
	if e, err := readEntryFile(tmp); err == nil && e.Start != 0 && startTime(e.PID) == e.Start {
		_ = os.Link(tmp, path)
	}
	os.Remove(tmp)
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
	for _, e := range readRegistry(mounts) {
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
